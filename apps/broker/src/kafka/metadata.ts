/**
 * Metadata and CreateTopics (docs/kafka-protocol.md, "Partitions"). Metadata lists the brokers
 * with a Kafka listener and each topic's Kafka partitions: a paper topic's with their leader (the
 * broker that holds it; replicas and ISR are that broker alone), a replicated topic's `0..N-1`
 * as they are, from the broker's metadata cache (docs/replication.md §13.1): leader, replica
 * list and ISR, LEADER_NOT_AVAILABLE with leader -1 for an offline partition. A topic nobody has
 * is created on this broker with `num.partitions` partitions when the request allows it (v1-3
 * always, v4 when allow_auto_topic_creation is set), as a klog produce creates one; a replicated
 * topic's name never is. CreateTopics creates a paper topic on this broker with the partition
 * count asked for.
 */
import {
  KafkaErrorCode,
  decodeCreateTopicsRequest,
  decodeMetadataRequest,
  encodeCreateTopicsResponse,
  encodeMetadataResponse,
  type KafkaReader,
  type MetadataTopic,
  type RequestHeader,
} from '@klog/kafka-protocol';
import type { MetadataCache } from '../replication/metadata-cache.js';
import type { KafkaContext } from './context.js';
import { kafkaErrorOf } from './partitions.js';

/** Most partitions CreateTopics makes for one topic (each is a directory and an open segment file). */
export const maxCreatePartitions = 1000;

/** The cluster id Metadata v2+ reports. */
export const kafkaClusterId = 'klog';

/** Handles a Metadata request. */
export async function handleKafkaMetadata(k: KafkaContext, h: RequestHeader, r: KafkaReader): Promise<Buffer> {
  const req = decodeMetadataRequest(r, h.apiVersion);
  const names = req.topics ?? (await k.topology.topics());
  const topics: MetadataTopic[] = [];
  for (const name of names) topics.push(await describeTopic(k, name, req.topics !== null && req.allowAutoTopicCreation));
  const brokers = await k.topology.brokers();
  return encodeMetadataResponse(h.correlationId, h.apiVersion, {
    brokers,
    clusterId: kafkaClusterId,
    controllerId: brokers[0]?.nodeId ?? k.topology.self.nodeId,
    topics: withListedLeaders(topics, new Set(brokers.map((b) => b.nodeId))),
  });
}

/**
 * Marks every partition whose leader has no Kafka listener (a broker started without
 * `--kafka-port`, so absent from Metadata's broker list) LEADER_NOT_AVAILABLE with leader -1, as
 * Kafka answers a partition whose leader lacks the listener (docs/kafka-protocol.md,
 * "Partitions"): a client then waits and asks again instead of sending to a broker it cannot
 * reach.
 * @param listed node ids of the brokers with a Kafka listener
 */
export function withListedLeaders(topics: readonly MetadataTopic[], listed: ReadonlySet<number>): MetadataTopic[] {
  const served = (p: MetadataTopic['partitions'][number]): boolean => p.leader < 0 || listed.has(p.leader);
  return topics.map((t) =>
    t.partitions.every(served)
      ? t
      : { ...t, partitions: t.partitions.map((p) => (served(p) ? p : { ...p, errorCode: KafkaErrorCode.LeaderNotAvailable, leader: -1 })) },
  );
}

async function describeTopic(k: KafkaContext, name: string, create: boolean): Promise<MetadataTopic> {
  const replicated = k.broker.metadataCache?.partitions(name);
  if (replicated !== undefined) return describeReplicated(name, replicated);
  try {
    let parts = await k.topology.partitions(name);
    // Kafka's own rule: a Metadata request creates a topic only under auto.create.topics.enable,
    // and only within max.partitions (createTopic refuses past it).
    if (parts.length === 0 && create && k.broker.config.autoCreateTopics) {
      await k.broker.logs.createTopic(name);
      parts = await k.topology.partitions(name);
    }
    if (parts.length === 0) return { errorCode: KafkaErrorCode.UnknownTopicOrPartition, name, partitions: [] };
    return {
      errorCode: KafkaErrorCode.None,
      name,
      partitions: parts.map((bp, i) => ({ errorCode: KafkaErrorCode.None, partition: i, leader: bp.brokerId, replicas: [bp.brokerId], isr: [bp.brokerId] })),
    };
  } catch (err) {
    return { errorCode: kafkaErrorOf(err), name, partitions: [] };
  }
}

/** A replicated topic's partitions as they are: each one's leader, replica list and ISR as last seen in ZooKeeper. */
function describeReplicated(name: string, partitions: NonNullable<ReturnType<MetadataCache['partitions']>>): MetadataTopic {
  return {
    errorCode: KafkaErrorCode.None,
    name,
    partitions: partitions.map(({ replicas, state }, partition) => {
      const leader = state?.leader ?? -1;
      return { errorCode: leader === -1 ? KafkaErrorCode.LeaderNotAvailable : KafkaErrorCode.None, partition, leader, replicas, isr: state?.isr ?? [] };
    }),
  };
}

/** Handles a CreateTopics request. */
export async function handleKafkaCreateTopics(k: KafkaContext, h: RequestHeader, r: KafkaReader): Promise<Buffer> {
  const req = decodeCreateTopicsRequest(r);
  const out: { name: string; errorCode: number }[] = [];
  for (const t of req.topics) out.push({ name: t.name, errorCode: await createTopic(k, t) });
  return encodeCreateTopicsResponse(h.correlationId, out);
}

async function createTopic(k: KafkaContext, t: { name: string; numPartitions: number; replicationFactor: number; assignments: number }): Promise<number> {
  if (t.assignments > 0) return KafkaErrorCode.InvalidReplicaAssignment;
  if (t.replicationFactor !== 1 && t.replicationFactor !== -1) return KafkaErrorCode.InvalidReplicationFactor;
  if (t.numPartitions === 0 || t.numPartitions < -1 || t.numPartitions > maxCreatePartitions) return KafkaErrorCode.InvalidPartitions;
  try {
    if (k.broker.replicas.isReplicatedTopic(t.name) || (await k.topology.partitions(t.name)).length > 0) return KafkaErrorCode.TopicAlreadyExists;
    await k.broker.logs.createTopic(t.name, t.numPartitions === -1 ? k.broker.config.numPartitions : t.numPartitions);
    return KafkaErrorCode.None;
  } catch (err) {
    return kafkaErrorOf(err);
  }
}
