/**
 * PRODUCE (type 0) and MULTIPRODUCE (type 3), as in Kafka 0.7; fire-and-forget: no response.
 *
 * ```
 * ProduceRequest      => topic partition messageSetSize messageSet
 *   topic          string (int16 length + utf8)
 *   partition      int32
 *   messageSetSize int32
 *   messageSet     messageSetSize bytes (SPEC §1)
 * MultiProduceRequest => count int16 | count x ProduceRequest
 * ```
 */
import { type Decoder, type Encoder, type TopicNameCache, validateTopic } from '../codec.js';
import { ErrorCode, ProtocolError } from '../errors.js';
import { frameSizeBytes, RequestType } from '../frame.js';
import { messageOverheadBytes, writeMessage, writeMessageCrcs } from '../message.js';
import { entrySizeInBytes, type MessageHeader, writeMessageWithHeader } from '../message-header.js';

/** Messages for one partition of one topic. */
export interface PartitionMessages {
  readonly topic: string;
  /** Partition number, ≥ 0. */
  readonly partition: number;
  /** An encoded message set (see encodeMessageSet). */
  readonly messages: Buffer;
}

/** Writes one `topic partition messageSetSize messageSet` block. */
export function writePartitionMessages(e: Encoder, p: PartitionMessages): void {
  validateTopic(p.topic);
  e.writeString(p.topic).writeInt32(p.partition).writeInt32(p.messages.length).writeBytes(p.messages);
}

/** Reads one `topic partition messageSetSize messageSet` block (the set is a view). */
export function readPartitionMessages(d: Decoder): PartitionMessages {
  const topic = d.readTopic();
  const partition = readPartition(d);
  const size = d.readInt32();
  return { topic, partition, messages: d.readBytes(size, 'message set') };
}

/** Reads a partition number and checks it is not negative. */
export function readPartition(d: Decoder): number {
  const partition = d.readInt32();
  if (partition < 0) throw new ProtocolError(ErrorCode.WrongPartition, `negative partition ${partition}`);
  return partition;
}

/** Reads an int16 count of repeated entries and checks it is at least `min`. */
export function readCount(d: Decoder, what: string, min = 0): number {
  const count = d.readInt16();
  if (count < min) throw new ProtocolError(ErrorCode.InvalidRequest, `${what} count ${count} is below ${min}`);
  return count;
}

/**
 * One partition's messages given as payloads rather than as an encoded set: the request
 * writers put each payload straight into the request as a message (its CRC computed there), so
 * a payload is copied once on its way to the socket.
 */
export interface PartitionPayloads {
  readonly topic: string;
  /** Partition number, ≥ 0. */
  readonly partition: number;
  /** Message bodies, in order. */
  readonly payloads: readonly Uint8Array[];
  /** Parallel to `payloads`: each message's metadata header (docs/format.md §2a); absent or undefined entries make plain messages. */
  readonly headers?: readonly (MessageHeader | undefined)[] | undefined;
}

/** What a produce request carries for one partition: an encoded message set, or payloads written as one. */
export type ProduceBlock = PartitionMessages | PartitionPayloads;

/** Most partitions in one MULTIPRODUCE or PRODUCE_ACK request (an int16 count). */
export const maxPartitionsPerRequest = 32767;

/**
 * Bytes of the message set a block carries.
 * @throws ProtocolError (InvalidMessage) for a metadata header over 65535 bytes
 */
export function blockMessageSetBytes(b: ProduceBlock): number {
  if ('messages' in b) return b.messages.length;
  let n = 0;
  const { payloads, headers } = b;
  for (let i = 0; i < payloads.length; i++) {
    const header = headers?.[i];
    n += header === undefined ? messageOverheadBytes + payloads[i]!.length : entrySizeInBytes({ value: payloads[i]!, header });
  }
  return n;
}

/** Bytes of one `topic partition messageSetSize messageSet` block (topics are ASCII: one byte per character). */
function blockBytes(b: ProduceBlock, setBytes: number): number {
  return 2 + b.topic.length + 4 + 4 + setBytes;
}

/**
 * Bytes of the blocks of a produce request, each block's message set size alongside.
 * @throws RangeError for no block or more than {@link maxPartitionsPerRequest}; ProtocolError
 *   (InvalidTopic) for a bad topic name
 */
export function produceBlocksBytes(blocks: readonly ProduceBlock[], setBytes: number[]): number {
  if (blocks.length < 1 || blocks.length > maxPartitionsPerRequest) {
    throw new RangeError(`a produce request carries 1 to ${maxPartitionsPerRequest} partitions, not ${blocks.length}`);
  }
  let n = 0;
  for (const b of blocks) {
    validateTopic(b.topic);
    const set = blockMessageSetBytes(b);
    setBytes.push(set);
    n += blockBytes(b, set);
  }
  return n;
}

/**
 * Writes blocks (sized by {@link produceBlocksBytes}, which filled `setBytes`) at `position`.
 * @returns the position after them
 */
export function writeProduceBlocks(target: Buffer, position: number, blocks: readonly ProduceBlock[], setBytes: readonly number[]): number {
  let pos = position;
  for (let i = 0; i < blocks.length; i++) {
    const b = blocks[i]!;
    const set = setBytes[i]!;
    pos = writeBlockHead(target, pos, b.topic, b.partition, set);
    const setStart = pos;
    if ('messages' in b) {
      target.set(b.messages, pos);
      pos += b.messages.length;
    } else {
      const { payloads, headers } = b;
      // The CRCs of the whole set in one go once its messages are in place (one native call).
      if (headers === undefined) for (let j = 0; j < payloads.length; j++) pos = writeMessage(target, pos, payloads[j]!, 0, false);
      else for (let j = 0; j < payloads.length; j++) pos = writeMessageWithHeader(target, pos, payloads[j]!, headers[j], 0, false);
      writeMessageCrcs(target, setStart, pos);
    }
    if (pos - setStart !== set) throw new RangeError(`message set of ${pos - setStart} bytes written where ${set} were counted`);
  }
  return pos;
}

/** Topic names up to this many characters are copied a character at a time rather than by `Buffer.write`. */
const shortTopicChars = 32;

/**
 * Writes `topic partition messageSetSize` at `position` (`topic` validated: ASCII).
 * @returns the position after it, where the message set goes
 * @throws RangeError when `target` is too small
 */
function writeBlockHead(target: Buffer, position: number, topic: string, partition: number, setBytes: number): number {
  let pos = target.writeInt16BE(topic.length, position);
  const n = topic.length;
  // A request usually carries a short topic name: a native call costs more than the bytes.
  if (n <= shortTopicChars && pos + n <= target.length) {
    for (let k = 0; k < n; k++) target[pos + k] = topic.charCodeAt(k);
    pos += n;
  } else {
    pos += target.write(topic, pos, 'latin1');
  }
  pos = target.writeInt32BE(partition, pos);
  return target.writeInt32BE(setBytes, pos);
}

/** Writes a frame head, `size int32 | type int16`, for a frame that ends at `end`. */
export function writeFrameHead(target: Buffer, position: number, end: number, type: number): number {
  target.writeInt32BE(end - position - frameSizeBytes, position);
  return target.writeInt16BE(type, position + frameSizeBytes);
}

/**
 * Bytes of a framed MULTIPRODUCE request carrying `blocks`, size prefix included; fills
 * `setBytes` for {@link writeMultiProduceRequest}.
 * @throws as {@link produceBlocksBytes}
 */
export function multiProduceRequestBytes(blocks: readonly ProduceBlock[], setBytes: number[]): number {
  return frameSizeBytes + 2 + 2 + produceBlocksBytes(blocks, setBytes);
}

/**
 * Writes a framed MULTIPRODUCE request into `target` at `position` (it needs
 * {@link multiProduceRequestBytes} bytes, which also filled `setBytes`), payload blocks as
 * messages written in place.
 * @returns the position just past the frame
 * @throws RangeError when `target` is too small; ProtocolError (InvalidMessage) for a metadata header over 65535 bytes
 */
export function writeMultiProduceRequest(target: Buffer, position: number, blocks: readonly ProduceBlock[], setBytes: readonly number[]): number {
  let pos = position + frameSizeBytes + 2;
  pos = target.writeInt16BE(blocks.length, pos);
  const end = writeProduceBlocks(target, pos, blocks, setBytes);
  writeFrameHead(target, position, end, RequestType.MultiProduce);
  return end;
}

/**
 * Bytes of a framed MULTIPRODUCE request carrying one partition's message set of `setBytes`
 * bytes (see {@link blockMessageSetBytes}), size prefix included: what
 * {@link writeMultiProduceMessageRequest} needs for one message of `setBytes` bytes. The topic
 * is checked through `topics` when given (a producer names one topic request after request:
 * checking it again would cost more than its bytes), else on every call.
 * @throws ProtocolError (InvalidTopic) for a bad topic name
 */
export function singleSetMultiProduceRequestBytes(topic: string, setBytes: number, topics?: TopicNameCache): number {
  if (topics !== undefined) topics.check(topic);
  else validateTopic(topic);
  return singleSetHeadBytes + topic.length + setBytes;
}

/** Bytes of a one-block MULTIPRODUCE request besides its topic's characters and its message set. */
const singleSetHeadBytes = frameSizeBytes + 2 + 2 + 2 + 4 + 4;

/**
 * Writes a framed MULTIPRODUCE request of one message, `payload` (with its metadata `header`
 * when given, else plain), for one partition, into `target` at `position`: the same bytes as
 * {@link writeMultiProduceRequest} for that one block, without the arrays a block is made of.
 * It needs {@link singleSetMultiProduceRequestBytes}`(topic, setBytes)` bytes, `setBytes`
 * being the message's size (`messageSizeInBytes`, or `entrySizeInBytes` with a header).
 * @returns the position just past the frame
 * @throws RangeError when `target` is too small or `setBytes` is not the message's size;
 *   ProtocolError (InvalidMessage) for a metadata header over 65535 bytes
 */
export function writeMultiProduceMessageRequest(
  target: Buffer,
  position: number,
  topic: string,
  partition: number,
  payload: Uint8Array,
  header: MessageHeader | undefined,
  setBytes: number,
): number {
  const n = topic.length;
  const setStart = position + singleSetHeadBytes + n;
  const frameEnd = setStart + setBytes;
  if (!(position >= 0 && frameEnd <= target.length)) {
    throw new RangeError(`request of ${frameEnd - position} bytes does not fit at position ${position} of ${target.length}`);
  }
  // One bounds check for the whole head, then byte stores: the head is most of the work of a
  // request of one small message, and each checked Buffer write costs a call.
  const size = frameEnd - position - frameSizeBytes;
  let pos = position;
  target[pos++] = size >>> 24;
  target[pos++] = size >>> 16;
  target[pos++] = size >>> 8;
  target[pos++] = size;
  target[pos++] = RequestType.MultiProduce >>> 8;
  target[pos++] = RequestType.MultiProduce;
  // The block count, 1.
  target[pos++] = 0;
  target[pos++] = 1;
  target[pos++] = n >>> 8;
  target[pos++] = n;
  if (n <= shortTopicChars) for (let k = 0; k < n; k++) target[pos++] = topic.charCodeAt(k);
  else pos += target.write(topic, pos, 'latin1');
  target[pos++] = partition >>> 24;
  target[pos++] = partition >>> 16;
  target[pos++] = partition >>> 8;
  target[pos++] = partition;
  target[pos++] = setBytes >>> 24;
  target[pos++] = setBytes >>> 16;
  target[pos++] = setBytes >>> 8;
  target[pos++] = setBytes;
  const end = header === undefined ? writeMessage(target, pos, payload) : writeMessageWithHeader(target, pos, payload, header);
  if (end !== frameEnd) throw new RangeError(`message of ${end - setStart} bytes written where ${setBytes} were counted`);
  return end;
}

/** Encodes a framed PRODUCE request. */
export function encodeProduceRequest(p: PartitionMessages): Buffer {
  const setBytes: number[] = [];
  const size = frameSizeBytes + 2 + produceBlocksBytes([p], setBytes);
  const buf = Buffer.allocUnsafe(size);
  const end = writeProduceBlocks(buf, frameSizeBytes + 2, [p], setBytes);
  writeFrameHead(buf, 0, end, RequestType.Produce);
  return buf;
}

/** Decodes a PRODUCE body (after the type). @throws ProtocolError */
export function decodeProduceRequest(d: Decoder): PartitionMessages {
  const p = readPartitionMessages(d);
  d.assertDone('produce request');
  return p;
}

/** Encodes a framed MULTIPRODUCE request (1 to 32767 partitions). @throws RangeError for another count */
export function encodeMultiProduceRequest(ps: readonly ProduceBlock[]): Buffer {
  const setBytes: number[] = [];
  const buf = Buffer.allocUnsafe(multiProduceRequestBytes(ps, setBytes));
  writeMultiProduceRequest(buf, 0, ps, setBytes);
  return buf;
}

/** Decodes a MULTIPRODUCE body (after the type). @throws ProtocolError */
export function decodeMultiProduceRequest(d: Decoder): PartitionMessages[] {
  const count = readCount(d, 'multiproduce', 1);
  const out: PartitionMessages[] = [];
  for (let i = 0; i < count; i++) out.push(readPartitionMessages(d));
  d.assertDone('multiproduce request');
  return out;
}
