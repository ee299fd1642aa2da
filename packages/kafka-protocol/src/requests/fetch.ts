/**
 * Fetch (key 1), versions 0-4, answered with message sets of magic 0 (v0-1) or 1 (v2-4):
 *
 * ```
 * Fetch Request (Version: 0-2) => replica_id int32 max_wait_ms int32 min_bytes int32 [topics]
 * Fetch Request (Version: 3) => replica_id int32 max_wait_ms int32 min_bytes int32 max_bytes int32 [topics]
 * Fetch Request (Version: 4) => replica_id int32 max_wait_ms int32 min_bytes int32 max_bytes int32 isolation_level int8 [topics]
 *   topics => topic string [partitions]
 *     partitions => partition int32 fetch_offset int64 partition_max_bytes int32
 *
 * Fetch Response (Version: 0) => [responses]
 * Fetch Response (Version: 1-4) => throttle_time_ms int32 [responses]
 *   responses => topic string [partitions]
 *     partitions (v0-3) => partition int32 error_code int16 high_watermark int64 records bytes
 *     partitions (v4)   => partition int32 error_code int16 high_watermark int64 last_stable_offset int64
 *                          [aborted_transactions] records bytes
 *       aborted_transactions => producer_id int64 first_offset int64   (always null here)
 * ```
 */
import type { KafkaReader, KafkaWriter } from '../codec.js';
import { finishResponse, startResponse } from '../header.js';

/** One partition of a Fetch request. */
export interface FetchPartitionRequest {
  readonly partition: number;
  /** Byte offset to read from: the first message at or after it is served. */
  readonly fetchOffset: number;
  readonly maxBytes: number;
}

/** A decoded Fetch request. */
export interface FetchRequest {
  readonly replicaId: number;
  readonly maxWaitMs: number;
  readonly minBytes: number;
  /** v3+: most bytes of the whole response; v0-2: no limit (Infinity). */
  readonly maxBytes: number;
  readonly topics: readonly { readonly topic: string; readonly partitions: readonly FetchPartitionRequest[] }[];
}

/** @throws KafkaProtocolError (InvalidRequest) for bytes that are not this layout */
export function decodeFetchRequest(r: KafkaReader, version: number): FetchRequest {
  const replicaId = r.int32('replica_id');
  const maxWaitMs = r.int32('max_wait_ms');
  const minBytes = r.int32('min_bytes');
  const maxBytes = version >= 3 ? r.int32('max_bytes') : Infinity;
  if (version >= 4) r.int8('isolation_level');
  const topics = r.array(
    (r) => ({
      topic: r.string('topic'),
      partitions: r.array((r) => ({ partition: r.int32('partition'), fetchOffset: r.int64('fetch_offset'), maxBytes: r.int32('partition_max_bytes') }), 'partitions'),
    }),
    'topics',
  );
  r.done('Fetch request');
  return { replicaId, maxWaitMs, minBytes, maxBytes, topics };
}

/** One partition's answer to a Fetch. */
export interface FetchPartitionResponse {
  readonly partition: number;
  readonly errorCode: number;
  /** The last visible message's offset + 1 (0 for an empty partition); -1 on error. */
  readonly highWatermark: number;
  /** A Kafka message set (magic 0 for v0-1, 1 for v2-4). */
  readonly records: Buffer;
}

/** The magic of the message sets a Fetch response of `version` carries. */
export function fetchMagic(version: number): 0 | 1 {
  return version >= 2 ? 1 : 0;
}

/**
 * The framed Fetch response of `version` (0-4), as parts to send in order: the fields, and each
 * partition's records as they are (not copied).
 */
export function encodeFetchResponse(
  correlationId: number,
  version: number,
  topics: readonly { readonly topic: string; readonly partitions: readonly FetchPartitionResponse[] }[],
): Buffer[] {
  const w = startResponse(correlationId, 128);
  const cuts: number[] = [];
  const records: Buffer[] = [];
  let recordBytes = 0;
  if (version >= 1) w.int32(0);
  w.array(topics, (w: KafkaWriter, t) =>
    w.string(t.topic).array(t.partitions, (w, p) => {
      w.int32(p.partition).int16(p.errorCode).int64(p.highWatermark);
      if (version >= 4) w.int64(p.highWatermark).int32(-1);
      w.int32(p.records.length);
      cuts.push(w.length);
      records.push(p.records);
      recordBytes += p.records.length;
    }),
  );
  const fields = finishResponse(w, recordBytes);
  const parts: Buffer[] = [];
  let from = 0;
  cuts.forEach((cut, i) => {
    parts.push(fields.subarray(from, cut));
    if (records[i]!.length > 0) parts.push(records[i]!);
    from = cut;
  });
  parts.push(fields.subarray(from));
  return parts;
}
