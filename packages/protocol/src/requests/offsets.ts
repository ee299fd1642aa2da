/**
 * OFFSETS (type 4), as in Kafka 0.7: the segment start offsets of a partition before a time.
 *
 * ```
 * OffsetsRequest  => topic partition int32 time int64 maxOffsets int32
 *   time  ms since the epoch; -1 the latest offset (log end), -2 the earliest offset
 * OffsetsResponse => errorCode int16 | count int32 | count x offset int64   (newest first)
 * ```
 */
import { type Decoder, validateTopic } from '../codec.js';
import { ErrorCode, ProtocolError } from '../errors.js';
import { encodeFrame, RequestType } from '../frame.js';
import { readPartition } from './produce.js';

/** Special `time` values of an OFFSETS request. */
export const OffsetTime = { Latest: -1, Earliest: -2 } as const;

/** An OFFSETS request. */
export interface OffsetsRequest {
  readonly topic: string;
  readonly partition: number;
  /** ms since the epoch, or {@link OffsetTime}.Latest (−1) / .Earliest (−2). */
  readonly time: number;
  /** Most offsets to return, ≥ 1. */
  readonly maxOffsets: number;
}

/** Encodes a framed OFFSETS request. */
export function encodeOffsetsRequest(r: OffsetsRequest): Buffer {
  validateTopic(r.topic);
  return encodeFrame(RequestType.Offsets, (e) => {
    e.writeString(r.topic).writeInt32(r.partition).writeInt64(r.time).writeInt32(r.maxOffsets);
  });
}

/** Decodes an OFFSETS body (after the type). @throws ProtocolError */
export function decodeOffsetsRequest(d: Decoder): OffsetsRequest {
  const topic = d.readTopic();
  const partition = readPartition(d);
  const time = d.readInt64();
  const maxOffsets = d.readInt32();
  if (time < -2) throw new ProtocolError(ErrorCode.InvalidRequest, `offsets time ${time} is below -2`);
  if (maxOffsets < 1) throw new ProtocolError(ErrorCode.InvalidRequest, `maxOffsets ${maxOffsets} is below 1`);
  d.assertDone('offsets request');
  return { topic, partition, time, maxOffsets };
}

/** Encodes a framed OFFSETS response. */
export function encodeOffsetsResponse(offsets: readonly number[]): Buffer {
  return encodeFrame(ErrorCode.None, (e) => {
    e.writeInt32(offsets.length);
    for (const o of offsets) e.writeInt64(o);
  });
}

/** Decodes an OFFSETS response body (after the error code). @throws ProtocolError */
export function decodeOffsetsResponse(d: Decoder): number[] {
  const count = d.readInt32();
  if (count < 0 || count * 8 > d.remaining) {
    throw new ProtocolError(ErrorCode.InvalidRequest, `offsets count ${count} does not fit in ${d.remaining} bytes`);
  }
  const out: number[] = [];
  for (let i = 0; i < count; i++) out.push(d.readInt64());
  return out;
}
