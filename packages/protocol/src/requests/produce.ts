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
import { type Decoder, type Encoder, validateTopic } from '../codec.js';
import { ErrorCode, ProtocolError } from '../errors.js';
import { encodeFrame, RequestType } from '../frame.js';

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

/** Encodes a framed PRODUCE request. */
export function encodeProduceRequest(p: PartitionMessages): Buffer {
  return encodeFrame(RequestType.Produce, (e) => writePartitionMessages(e, p), p.messages.length + 64);
}

/** Decodes a PRODUCE body (after the type). @throws ProtocolError */
export function decodeProduceRequest(d: Decoder): PartitionMessages {
  const p = readPartitionMessages(d);
  d.assertDone('produce request');
  return p;
}

/** Encodes a framed MULTIPRODUCE request (1 to 32767 partitions). */
export function encodeMultiProduceRequest(ps: readonly PartitionMessages[]): Buffer {
  const bytes = ps.reduce((n, p) => n + p.messages.length + 64, 64);
  return encodeFrame(
    RequestType.MultiProduce,
    (e) => {
      e.writeInt16(ps.length);
      for (const p of ps) writePartitionMessages(e, p);
    },
    bytes,
  );
}

/** Decodes a MULTIPRODUCE body (after the type). @throws ProtocolError */
export function decodeMultiProduceRequest(d: Decoder): PartitionMessages[] {
  const count = readCount(d, 'multiproduce', 1);
  const out: PartitionMessages[] = [];
  for (let i = 0; i < count; i++) out.push(readPartitionMessages(d));
  d.assertDone('multiproduce request');
  return out;
}
