/**
 * ListOffsets (key 2), versions 0-1:
 *
 * ```
 * ListOffsets Request (Version: 0) => replica_id int32 [topics]
 *   topics => name string [partitions]
 *     partitions => partition_index int32 timestamp int64 max_num_offsets int32
 * ListOffsets Request (Version: 1) => replica_id int32 [topics]
 *   topics => name string [partitions]
 *     partitions => partition_index int32 timestamp int64
 *   timestamp: -1 latest, -2 earliest, else ms since the epoch
 *
 * ListOffsets Response (Version: 0) => [topics]
 *   topics => name string [partitions]
 *     partitions => partition_index int32 error_code int16 [old_style_offsets int64]
 * ListOffsets Response (Version: 1) => [topics]
 *   topics => name string [partitions]
 *     partitions => partition_index int32 error_code int16 timestamp int64 offset int64
 * ```
 */
import type { KafkaReader } from '../codec.js';
import { finishResponse, startResponse } from '../header.js';

/** One partition of a ListOffsets request. */
export interface ListOffsetsPartitionRequest {
  readonly partition: number;
  /** -1 latest, -2 earliest, else ms since the epoch. */
  readonly timestamp: number;
  /** v0: most offsets to return; v1: 1. */
  readonly maxNumOffsets: number;
}

/** A decoded ListOffsets request. */
export interface ListOffsetsRequest {
  readonly replicaId: number;
  readonly topics: readonly { readonly name: string; readonly partitions: readonly ListOffsetsPartitionRequest[] }[];
}

/** @throws KafkaProtocolError (InvalidRequest) for bytes that are not this layout */
export function decodeListOffsetsRequest(r: KafkaReader, version: number): ListOffsetsRequest {
  const replicaId = r.int32('replica_id');
  const topics = r.array(
    (r) => ({
      name: r.string('topic'),
      partitions: r.array(
        (r) => ({ partition: r.int32('partition'), timestamp: r.int64('timestamp'), maxNumOffsets: version === 0 ? r.int32('max_num_offsets') : 1 }),
        'partitions',
      ),
    }),
    'topics',
  );
  r.done('ListOffsets request');
  return { replicaId, topics };
}

/** One partition's answer to ListOffsets. */
export interface ListOffsetsPartitionResponse {
  readonly partition: number;
  readonly errorCode: number;
  /** Newest first (v0 sends them all, v1 the first, or -1 when there is none). */
  readonly offsets: readonly number[];
  /** v1: the timestamp of the message found by a search by time; absent (-1 sent) otherwise. */
  readonly timestamp?: number;
}

/** The framed ListOffsets response of `version` (0-1). */
export function encodeListOffsetsResponse(
  correlationId: number,
  version: number,
  topics: readonly { readonly name: string; readonly partitions: readonly ListOffsetsPartitionResponse[] }[],
): Buffer {
  const w = startResponse(correlationId, 64);
  w.array(topics, (w, t) =>
    w.string(t.name).array(t.partitions, (w, p) => {
      w.int32(p.partition).int16(p.errorCode);
      if (version === 0) w.array(p.offsets, (w, o) => w.int64(o));
      else w.int64(p.offsets.length > 0 ? (p.timestamp ?? -1) : -1).int64(p.offsets[0] ?? -1);
    }),
  );
  return finishResponse(w);
}
