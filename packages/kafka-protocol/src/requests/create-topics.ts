/**
 * CreateTopics (key 19), version 0:
 *
 * ```
 * CreateTopics Request (Version: 0) => [topics] timeout_ms int32
 *   topics => name string num_partitions int32 replication_factor int16 [assignments] [configs]
 *     assignments => partition_index int32 [broker_ids int32]
 *     configs => name string value nullable_string
 * CreateTopics Response (Version: 0) => [topics]
 *   topics => name string error_code int16
 * ```
 */
import type { KafkaReader } from '../codec.js';
import { finishResponse, startResponse } from '../header.js';

/** One topic to create. */
export interface CreatableTopic {
  readonly name: string;
  /** -1: the broker's default. */
  readonly numPartitions: number;
  readonly replicationFactor: number;
  /** Explicit replica assignments (klog refuses them). */
  readonly assignments: number;
  readonly configs: readonly { readonly name: string; readonly value: string | null }[];
}

/** @throws KafkaProtocolError (InvalidRequest) */
export function decodeCreateTopicsRequest(r: KafkaReader): { topics: CreatableTopic[]; timeoutMs: number } {
  const topics = r.array(
    (r) => ({
      name: r.string('topic'),
      numPartitions: r.int32('num_partitions'),
      replicationFactor: r.int16('replication_factor'),
      assignments: r.array((r) => (r.int32('partition_index'), r.array((r) => r.int32('broker_id'), 'broker_ids')), 'assignments').length,
      configs: r.array((r) => ({ name: r.string('config name'), value: r.nullableString('config value') }), 'configs'),
    }),
    'topics',
  );
  const timeoutMs = r.int32('timeout_ms');
  r.done('CreateTopics request');
  return { topics, timeoutMs };
}

/** The framed CreateTopics response. */
export function encodeCreateTopicsResponse(correlationId: number, topics: readonly { readonly name: string; readonly errorCode: number }[]): Buffer {
  const w = startResponse(correlationId, 64);
  w.array(topics, (w, t) => w.string(t.name).int16(t.errorCode));
  return finishResponse(w);
}
