/**
 * OffsetFetch (key 9), version 1:
 *
 * ```
 * OffsetFetch Request (Version: 1) => group_id string [topics]
 *   topics => name string [partition_indexes int32]
 * OffsetFetch Response (Version: 1) => [topics]
 *   topics => name string [partitions]
 *     partitions => partition_index int32 committed_offset int64 metadata nullable_string error_code int16
 * ```
 *
 * committed_offset -1: nothing committed.
 */
import type { KafkaReader } from '../codec.js';
import { finishResponse, startResponse } from '../header.js';

/** A decoded OffsetFetch request. */
export interface OffsetFetchRequest {
  readonly groupId: string;
  readonly topics: readonly { readonly name: string; readonly partitions: readonly number[] }[];
}

/** @throws KafkaProtocolError (InvalidRequest) */
export function decodeOffsetFetchRequest(r: KafkaReader): OffsetFetchRequest {
  const groupId = r.string('group_id');
  const topics = r.array((r) => ({ name: r.string('topic'), partitions: r.array((r) => r.int32('partition'), 'partitions') }), 'topics');
  r.done('OffsetFetch request');
  return { groupId, topics };
}

/** One partition's committed offset. */
export interface OffsetFetchPartition {
  readonly partition: number;
  /** -1 when nothing is committed. */
  readonly offset: number;
  readonly errorCode: number;
}

/** The framed OffsetFetch response. */
export function encodeOffsetFetchResponse(
  correlationId: number,
  topics: readonly { readonly name: string; readonly partitions: readonly OffsetFetchPartition[] }[],
): Buffer {
  const w = startResponse(correlationId, 64);
  w.array(topics, (w, t) => w.string(t.name).array(t.partitions, (w, p) => w.int32(p.partition).int64(p.offset).string('').int16(p.errorCode)));
  return finishResponse(w);
}
