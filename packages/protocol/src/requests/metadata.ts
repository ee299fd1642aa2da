/**
 * (klog) METADATA (type 6): how many partitions a broker holds for each of some topics. A
 * broker creates a topic it does not know yet with its default partition count, as a produce
 * to it would (docs/design.md §2), so a producer with a static broker list can learn the
 * partitions it may send to. A request naming no topic (count 0) asks for every topic the
 * broker holds and creates none (docs/format.md §12): how a consumer learns that a topic does
 * not exist.
 *
 * ```
 * MetadataRequest  => count int16 | count x topic string
 * MetadataResponse => errorCode int16 | count int16 | count x (topic errorCode int16 partitions int32)
 * ```
 */
import { type Decoder, validateTopic } from '../codec.js';
import { ErrorCode, type ErrorCodeValue } from '../errors.js';
import { encodeFrame, RequestType } from '../frame.js';
import { readCount } from './produce.js';

/** One topic's partition count on the answering broker. */
export interface TopicMetadata {
  readonly topic: string;
  readonly errorCode: ErrorCodeValue;
  /** Partitions of the topic on this broker (0 on error). */
  readonly partitions: number;
}

/** Encodes a framed METADATA request for 0 (every topic the broker holds, creating none) to 32767 topics. */
export function encodeMetadataRequest(topics: readonly string[]): Buffer {
  return encodeFrame(RequestType.Metadata, (e) => {
    e.writeInt16(topics.length);
    for (const t of topics) {
      validateTopic(t);
      e.writeString(t);
    }
  });
}

/** Decodes a METADATA body (after the type). @throws ProtocolError */
export function decodeMetadataRequest(d: Decoder): string[] {
  const count = readCount(d, 'metadata');
  const topics: string[] = [];
  for (let i = 0; i < count; i++) topics.push(d.readTopic());
  d.assertDone('metadata request');
  return topics;
}

/** Encodes a framed METADATA response (top-level error code 0). */
export function encodeMetadataResponse(topics: readonly TopicMetadata[]): Buffer {
  return encodeFrame(ErrorCode.None, (e) => {
    e.writeInt16(topics.length);
    for (const t of topics) e.writeString(t.topic).writeInt16(t.errorCode).writeInt32(t.partitions);
  });
}

/** Decodes a METADATA response body (after the error code). @throws ProtocolError */
export function decodeMetadataResponse(d: Decoder): TopicMetadata[] {
  const count = readCount(d, 'metadata response');
  const out: TopicMetadata[] = [];
  for (let i = 0; i < count; i++) {
    const topic = d.readTopic();
    const errorCode = d.readInt16() as ErrorCodeValue;
    out.push({ topic, errorCode, partitions: d.readInt32() });
  }
  d.assertDone('metadata response');
  return out;
}
