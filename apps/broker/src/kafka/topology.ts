/**
 * The cluster as Kafka clients see it (docs/kafka-protocol.md, "Partitions"): the brokers with
 * a Kafka listener, and each topic's partitions numbered over the brokers that hold it, sorted
 * by broker id, each broker's partitions in order (the order of the paper's Algorithm 1). The
 * leader of a Kafka partition is the broker that holds it. A standalone broker is a cluster of
 * one whose Kafka partitions are its own.
 */
import { BrokerRegistry, KafkaListenerRegistry, allPartitions, type BrokerPartition, type TopicBrokerPartitions, type ZkClient } from '@klog/zk-registry';
import type { LogManager } from '@klog/storage';

/** How long a topic's partition numbering read from ZooKeeper is reused, in ms. */
const cacheMs = 1000;

/** A broker as Metadata lists it. */
export interface KafkaBroker {
  readonly nodeId: number;
  readonly host: string;
  readonly port: number;
}

/** Brokers and partition numbering, from ZooKeeper in cluster mode. */
export class KafkaTopology {
  private readonly cache = new Map<string, { at: number; partitions: BrokerPartition[] }>();
  private readonly registry: BrokerRegistry | undefined;
  private readonly listeners: KafkaListenerRegistry | undefined;

  constructor(
    private readonly logs: LogManager,
    /** This broker, as Kafka clients reach it. */
    readonly self: KafkaBroker,
    zk: ZkClient | undefined,
    /** The replicated topics' names as last seen (the broker's metadata cache); none when standalone. */
    private readonly replicatedTopics: () => readonly string[] = () => [],
  ) {
    this.registry = zk && new BrokerRegistry(zk);
    this.listeners = zk && new KafkaListenerRegistry(zk);
    logs.onTopicCreated((topic) => this.cache.delete(topic));
  }

  /** True in cluster mode. */
  get clustered(): boolean {
    return this.registry !== undefined;
  }

  /** The live brokers with a Kafka listener, by id (this one always among them). */
  async brokers(): Promise<KafkaBroker[]> {
    if (this.listeners === undefined) return [this.self];
    const out = (await this.listeners.list()).map((l) => ({ nodeId: l.brokerId, host: l.host, port: l.port }));
    if (!out.some((b) => b.nodeId === this.self.nodeId)) out.push(this.self);
    return out.sort((a, b) => a.nodeId - b.nodeId);
  }

  /** Every topic known: this broker's, and in cluster mode every registered one, replicated topics included. */
  async topics(): Promise<string[]> {
    const names = new Set(this.logs.topics().keys());
    if (this.registry !== undefined) for (const t of await this.registry.listTopics()) names.add(t);
    for (const t of this.replicatedTopics()) names.add(t);
    return [...names].sort();
  }

  /**
   * A paper topic's Kafka partitions: entry `k` is Kafka partition `k`, held by broker `brokerId`
   * as its klog partition `partition`. Empty for a topic no live broker holds, and for a
   * replicated topic (whose Kafka partitions are its own, docs/kafka-protocol.md "Partitions").
   */
  async partitions(topic: string): Promise<readonly BrokerPartition[]> {
    const local = this.logs.partitionCount(topic);
    if (this.registry === undefined) return local === undefined ? [] : allPartitions([{ brokerId: this.self.nodeId, partitions: local }]);
    const hit = this.cache.get(topic);
    if (hit !== undefined && Date.now() - hit.at < cacheMs) return hit.partitions;
    const counts: TopicBrokerPartitions[] = (await this.registry.topicPartitions(topic)).filter((c) => c.brokerId !== this.self.nodeId);
    if (local !== undefined) counts.push({ brokerId: this.self.nodeId, partitions: local });
    const partitions = allPartitions(counts);
    this.cache.set(topic, { at: Date.now(), partitions });
    return partitions;
  }
}
