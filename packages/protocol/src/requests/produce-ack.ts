/**
 * (klog) PRODUCE_ACK (type 5): an acknowledged produce of one or more partitions. The broker
 * answers once every message set has been appended (acks 1), appended and flushed to disk
 * (acks 2), or, on a replicated partition, flushed on every ISR member (acks −1, "all":
 * docs/replication.md §11; on a paper topic −1 is 2), with where each set landed.
 *
 * ```
 * ProduceAckRequest  => acks int16 | count int16 | count x (topic partition messageSetSize messageSet)
 *   acks  1: answer after the append; 2: answer after the append and its flush (fsync);
 *        -1: answer once the high watermark passed the set (replicated), as 2 on a paper topic
 * ProduceAckResponse => errorCode int16 | count int16 | count x PartitionResult
 *   PartitionResult  => topic partition int32 errorCode int16 offset int64 nextOffset int64
 *     offset     log offset of the set's first message (-1 on error)
 *     nextOffset log end offset after the set (-1 on error)
 * ```
 */
import type { Decoder } from '../codec.js';
import { ErrorCode, ProtocolError, type ErrorCodeValue } from '../errors.js';
import { encodeFrame, frameSizeBytes, RequestType } from '../frame.js';
import {
  type ProduceBlock,
  produceBlocksBytes,
  readCount,
  readPartition,
  readPartitionMessages,
  writeFrameHead,
  writeProduceBlocks,
  type PartitionMessages,
} from './produce.js';

/**
 * When the broker answers an acknowledged produce: 1 after append, 2 after append and flush,
 * −1 ("all") once flushed on every ISR member of a replicated partition (docs/replication.md
 * §11; on a paper topic as 2).
 */
export const AckLevel = { Appended: 1, Flushed: 2, All: -1 } as const;
/** One of the values of {@link AckLevel}. */
export type AckLevelValue = (typeof AckLevel)[keyof typeof AckLevel];

/** Whether `acks` is one of the {@link AckLevel} values (1, 2 or −1). */
export function isAckLevel(acks: number): acks is AckLevelValue {
  return acks === AckLevel.Appended || acks === AckLevel.Flushed || acks === AckLevel.All;
}

/** A PRODUCE_ACK request. */
export interface ProduceAckRequest {
  readonly acks: AckLevelValue;
  readonly partitions: readonly PartitionMessages[];
}

/** Where one partition's message set landed, or why it did not. */
export interface ProduceAckResult {
  readonly topic: string;
  readonly partition: number;
  readonly errorCode: ErrorCodeValue;
  /** Log offset of the set's first message; −1 on error. */
  readonly offset: number;
  /** Log end offset just after the set; on error −1, except for MessageSizeTooLarge: the broker's max.message.bytes (docs/format.md §11). */
  readonly nextOffset: number;
}

/** Encodes a framed PRODUCE_ACK request (1 to 32767 partitions). @throws RangeError for another count or an `acks` not 1, 2 or −1 */
export function encodeProduceAckRequest(r: ProduceAckRequest): Buffer {
  const setBytes: number[] = [];
  const buf = Buffer.allocUnsafe(produceAckRequestBytes(r.partitions, setBytes));
  writeProduceAckRequest(buf, 0, r.acks, r.partitions, setBytes);
  return buf;
}

/**
 * Bytes of a framed PRODUCE_ACK request carrying `blocks`, size prefix included; fills
 * `setBytes` for {@link writeProduceAckRequest}.
 * @throws RangeError for no block or more than 32767; ProtocolError (InvalidTopic) for a bad topic name
 */
export function produceAckRequestBytes(blocks: readonly ProduceBlock[], setBytes: number[]): number {
  return frameSizeBytes + 2 + 2 + 2 + produceBlocksBytes(blocks, setBytes);
}

/**
 * Writes a framed PRODUCE_ACK request into `target` at `position` (it needs
 * {@link produceAckRequestBytes} bytes, which also filled `setBytes`), payload blocks as
 * messages written in place.
 * @returns the position just past the frame
 * @throws RangeError when `target` is too small or `acks` is not 1, 2 or −1; ProtocolError (InvalidMessage) for a metadata header over 65535 bytes
 */
export function writeProduceAckRequest(
  target: Buffer,
  position: number,
  acks: AckLevelValue,
  blocks: readonly ProduceBlock[],
  setBytes: readonly number[],
): number {
  if (!isAckLevel(acks)) throw new RangeError(`acks ${String(acks)} is not 1 (appended), 2 (flushed) or -1 (all)`);
  let pos = position + frameSizeBytes + 2;
  pos = target.writeInt16BE(acks, pos);
  pos = target.writeInt16BE(blocks.length, pos);
  const end = writeProduceBlocks(target, pos, blocks, setBytes);
  writeFrameHead(target, position, end, RequestType.ProduceAck);
  return end;
}

/** Decodes a PRODUCE_ACK body (after the type). @throws ProtocolError */
export function decodeProduceAckRequest(d: Decoder): ProduceAckRequest {
  const acks = d.readInt16();
  if (!isAckLevel(acks)) {
    throw new ProtocolError(ErrorCode.InvalidRequest, `acks ${acks} is not 1 (appended), 2 (flushed) or -1 (all)`);
  }
  const count = readCount(d, 'produce-ack', 1);
  const partitions: PartitionMessages[] = [];
  for (let i = 0; i < count; i++) partitions.push(readPartitionMessages(d));
  d.assertDone('produce-ack request');
  return { acks, partitions };
}

/** Encodes a framed PRODUCE_ACK response (top-level error code 0). */
export function encodeProduceAckResponse(results: readonly ProduceAckResult[]): Buffer {
  return encodeFrame(ErrorCode.None, (e) => {
    e.writeInt16(results.length);
    for (const r of results) {
      e.writeString(r.topic).writeInt32(r.partition).writeInt16(r.errorCode).writeInt64(r.offset).writeInt64(r.nextOffset);
    }
  });
}

/** Decodes a PRODUCE_ACK response body (after the error code). @throws ProtocolError */
export function decodeProduceAckResponse(d: Decoder): ProduceAckResult[] {
  const count = readCount(d, 'produce-ack response');
  const out: ProduceAckResult[] = [];
  for (let i = 0; i < count; i++) {
    const topic = d.readTopic();
    const partition = readPartition(d);
    const errorCode = d.readInt16() as ErrorCodeValue;
    out.push({ topic, partition, errorCode, offset: d.readInt64(), nextOffset: d.readInt64() });
  }
  d.assertDone('produce-ack response');
  return out;
}
