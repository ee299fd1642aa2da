/**
 * Metadata (key 3), versions 1-4:
 *
 * ```
 * Metadata Request (Version: 1-3) => [topics]          topics => name string; a null array: every topic
 * Metadata Request (Version: 4) => [topics] allow_auto_topic_creation boolean
 *
 * Metadata Response (Version: 1) => [brokers] controller_id int32 [topics]
 * Metadata Response (Version: 2) => [brokers] cluster_id nullable_string controller_id int32 [topics]
 * Metadata Response (Version: 3-4) => throttle_time_ms int32 [brokers] cluster_id nullable_string controller_id int32 [topics]
 *   brokers => node_id int32 host string port int32 rack nullable_string
 *   topics => error_code int16 name string is_internal boolean [partitions]
 *     partitions => error_code int16 partition_index int32 leader_id int32 [replica_nodes int32] [isr_nodes int32]
 * ```
 */
import type { KafkaReader } from '../codec.js';
import { finishResponse, startResponse } from '../header.js';

/** A decoded Metadata request. */
export interface MetadataRequest {
  /** Topics asked for; null for every topic. */
  readonly topics: string[] | null;
  /** v4: whether unknown topics may be created (v1-3: true, as Kafka 0.10 did). */
  readonly allowAutoTopicCreation: boolean;
}

/** @throws KafkaProtocolError (InvalidRequest) for bytes that are not this layout */
export function decodeMetadataRequest(r: KafkaReader, version: number): MetadataRequest {
  const topics = r.nullableArray((r) => r.string('topic'), 'topics');
  const allowAutoTopicCreation = version >= 4 ? r.boolean() : true;
  r.done('Metadata request');
  return { topics, allowAutoTopicCreation };
}

/** A broker in a Metadata response. */
export interface MetadataBroker {
  readonly nodeId: number;
  readonly host: string;
  readonly port: number;
}

/** A partition in a Metadata response. */
export interface MetadataPartition {
  readonly errorCode: number;
  readonly partition: number;
  readonly leader: number;
  readonly replicas: readonly number[];
  readonly isr: readonly number[];
}

/** A topic in a Metadata response. */
export interface MetadataTopic {
  readonly errorCode: number;
  readonly name: string;
  readonly partitions: readonly MetadataPartition[];
}

/** What a Metadata response says. */
export interface MetadataResponse {
  readonly brokers: readonly MetadataBroker[];
  readonly clusterId: string | null;
  readonly controllerId: number;
  readonly topics: readonly MetadataTopic[];
}

/** The framed Metadata response of `version` (1-4). */
export function encodeMetadataResponse(correlationId: number, version: number, m: MetadataResponse): Buffer {
  const w = startResponse(correlationId, 256);
  if (version >= 3) w.int32(0);
  w.array(m.brokers, (w, b) => w.int32(b.nodeId).string(b.host).int32(b.port).string(null));
  if (version >= 2) w.string(m.clusterId);
  w.int32(m.controllerId);
  w.array(m.topics, (w, t) =>
    w
      .int16(t.errorCode)
      .string(t.name)
      .boolean(false)
      .array(t.partitions, (w, p) =>
        w
          .int16(p.errorCode)
          .int32(p.partition)
          .int32(p.leader)
          .array(p.replicas, (w, n) => w.int32(n))
          .array(p.isr, (w, n) => w.int32(n)),
      ),
  );
  return finishResponse(w);
}
