/**
 * OffsetCommit (key 8), version 2:
 *
 * ```
 * OffsetCommit Request (Version: 2) => group_id string generation_id int32 member_id string retention_time_ms int64 [topics]
 *   topics => name string [partitions]
 *     partitions => partition_index int32 committed_offset int64 committed_metadata nullable_string
 * OffsetCommit Response (Version: 2) => [topics]
 *   topics => name string [partitions]
 *     partitions => partition_index int32 error_code int16
 * ```
 *
 * generation_id -1 with an empty member_id is a commit from outside any group generation.
 */
import type { KafkaReader } from '../codec.js';
import { finishResponse, startResponse } from '../header.js';

/** One partition's offset to commit. */
export interface OffsetCommitPartition {
  readonly partition: number;
  /** The next offset to read. */
  readonly offset: number;
  readonly metadata: string | null;
}

/** A decoded OffsetCommit request. */
export interface OffsetCommitRequest {
  readonly groupId: string;
  readonly generationId: number;
  readonly memberId: string;
  readonly topics: readonly { readonly name: string; readonly partitions: readonly OffsetCommitPartition[] }[];
}

/** @throws KafkaProtocolError (InvalidRequest) */
export function decodeOffsetCommitRequest(r: KafkaReader): OffsetCommitRequest {
  const groupId = r.string('group_id');
  const generationId = r.int32('generation_id');
  const memberId = r.string('member_id');
  r.int64('retention_time_ms');
  const topics = r.array(
    (r) => ({
      name: r.string('topic'),
      partitions: r.array((r) => ({ partition: r.int32('partition'), offset: r.int64('committed_offset'), metadata: r.nullableString('committed_metadata') }), 'partitions'),
    }),
    'topics',
  );
  r.done('OffsetCommit request');
  return { groupId, generationId, memberId, topics };
}

/** The framed OffsetCommit response. */
export function encodeOffsetCommitResponse(
  correlationId: number,
  topics: readonly { readonly name: string; readonly partitions: readonly { readonly partition: number; readonly errorCode: number }[] }[],
): Buffer {
  const w = startResponse(correlationId, 64);
  w.array(topics, (w, t) => w.string(t.name).array(t.partitions, (w, p) => w.int32(p.partition).int16(p.errorCode)));
  return finishResponse(w);
}
