/**
 * Produce (key 0), versions 0-2:
 *
 * ```
 * Produce Request (Version: 0-2) => acks int16 timeout_ms int32 [topic_data]
 *   topic_data => name string [partition_data]
 *     partition_data => index int32 records bytes            records: a MessageSet (magic 0 or 1)
 *
 * Produce Response (Version: 0) => [responses]
 * Produce Response (Version: 1) => [responses] throttle_time_ms int32
 * Produce Response (Version: 2) => [responses] throttle_time_ms int32
 *   responses => name string [partition_responses]
 *     partition_responses => index int32 error_code int16 base_offset int64 (v2: log_append_time_ms int64)
 * ```
 *
 * acks 0 has no response.
 */
import type { KafkaReader } from '../codec.js';
import { finishResponse, startResponse } from '../header.js';

/** One partition's records in a Produce request. */
export interface ProducePartitionData {
  readonly partition: number;
  /** The message set, as sent (a view). */
  readonly records: Buffer;
}

/** A decoded Produce request. */
export interface ProduceRequest {
  /** 0 no response, 1 the leader's append, -1 every in-sync replica. */
  readonly acks: number;
  readonly timeoutMs: number;
  readonly topics: readonly { readonly name: string; readonly partitions: readonly ProducePartitionData[] }[];
}

/** @throws KafkaProtocolError (InvalidRequest) for bytes that are not this layout */
export function decodeProduceRequest(r: KafkaReader): ProduceRequest {
  const acks = r.int16('acks');
  const timeoutMs = r.int32('timeout_ms');
  const topics = r.array(
    (r) => ({ name: r.string('topic'), partitions: r.array((r) => ({ partition: r.int32('partition'), records: r.bytes('records') }), 'partitions') }),
    'topics',
  );
  r.done('Produce request');
  return { acks, timeoutMs, topics };
}

/** One partition's answer to a Produce. */
export interface ProducePartitionResponse {
  readonly partition: number;
  readonly errorCode: number;
  /** Byte offset of the first message appended, -1 on error. */
  readonly baseOffset: number;
}

/** The framed Produce response of `version` (0-2). */
export function encodeProduceResponse(
  correlationId: number,
  version: number,
  topics: readonly { readonly name: string; readonly partitions: readonly ProducePartitionResponse[] }[],
): Buffer {
  const w = startResponse(correlationId, 64);
  w.array(topics, (w, t) =>
    w.string(t.name).array(t.partitions, (w, p) => {
      w.int32(p.partition).int16(p.errorCode).int64(p.baseOffset);
      if (version >= 2) w.int64(-1);
    }),
  );
  if (version >= 1) w.int32(0);
  return finishResponse(w);
}
