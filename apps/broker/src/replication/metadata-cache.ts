/**
 * The broker's metadata cache (docs/replication.md §13.1): every replicated topic's definition
 * and every partition's state, watched in ZooKeeper, and the live brokers' addresses, to answer
 * TOPIC_METADATA (§6.6) and to tell a replicated topic's name from a free one before a produce
 * auto-creates a paper topic (§3). It is at most one ZooKeeper notification behind; the broker
 * never takes its roles from it (§3.2).
 */
import { ErrorCode, type ReplicatedPartitionMetadata, type ReplicatedTopicMetadata, type TopicMetadataResponse } from '@klog/protocol';
import { BrokerRegistry, ReplicatedTopicRegistry, type BrokerInfo, type PartitionState, type TopicDefinition, type ZkClient, type ZkWatch } from '@klog/zk-registry';
import type { Logger } from 'pino';

interface CachedTopic {
  readonly definition: TopicDefinition;
  readonly states: (PartitionState | undefined)[];
  readonly watches: ZkWatch[];
}

/** What the cache watches; {@link MetadataCache.close} stops it. */
export class MetadataCache {
  readonly #topics = new Map<string, CachedTopic>();
  #brokers: BrokerInfo[] = [];
  readonly #watches: ZkWatch[];
  readonly #registry: ReplicatedTopicRegistry;
  #closed = false;

  /** Resolves once the definitions and the brokers have been read once. */
  readonly ready: Promise<void>;

  constructor(zk: ZkClient, logger: Logger) {
    this.#registry = new ReplicatedTopicRegistry(zk, { logger });
    const brokers = new BrokerRegistry(zk, { logger });
    this.#watches = [
      this.#registry.watchDefinitions((definitions) => this.#onDefinitions(definitions)),
      brokers.watchBrokerIds(async () => {
        this.#brokers = await brokers.listBrokers();
      }),
    ];
    this.ready = Promise.all(this.#watches.map((w) => w.ready)).then(() => {});
  }

  #onDefinitions(definitions: ReadonlyMap<string, TopicDefinition>): void {
    if (this.#closed) return;
    for (const [topic, cached] of this.#topics) {
      if (definitions.get(topic)?.id === cached.definition.id) continue;
      for (const w of cached.watches) w.close();
      this.#topics.delete(topic);
    }
    for (const [topic, definition] of definitions) {
      if (this.#topics.has(topic)) continue;
      const cached: CachedTopic = { definition, states: definition.partitions.map(() => undefined), watches: [] };
      this.#topics.set(topic, cached);
      definition.partitions.forEach((_, p) => {
        cached.watches.push(
          this.#registry.watchPartitionState(topic, p, (node) => {
            cached.states[p] = node?.state;
          }),
        );
      });
    }
  }

  /** True when `topic`'s node holds a replicated topic's definition, as last seen. */
  isReplicated(topic: string): boolean {
    return this.#topics.has(topic);
  }

  /** How many replicated topics the cache knows. */
  get topicCount(): number {
    return this.#topics.size;
  }

  /** The replicated topics as last seen, sorted. */
  topics(): string[] {
    return [...this.#topics.keys()].sort();
  }

  /** How many partitions a replicated topic has (its definition's `0..N-1`); undefined for any other topic. */
  partitionCount(topic: string): number | undefined {
    return this.#topics.get(topic)?.definition.partitions.length;
  }

  /**
   * Every partition of a replicated topic as last seen: its replica list (preferred leader
   * first) and its state (leader, leader epoch, ISR; undefined until read); undefined for any
   * other topic. For the Kafka listener's Metadata (docs/kafka-protocol.md, "Partitions").
   */
  partitions(topic: string): { readonly replicas: readonly number[]; readonly state: PartitionState | undefined }[] | undefined {
    const cached = this.#topics.get(topic);
    return cached?.definition.partitions.map((replicas, p) => ({ replicas, state: cached.states[p] }));
  }

  /** The state of a partition as last seen; undefined when unknown. */
  partitionState(topic: string, partition: number): PartitionState | undefined {
    return this.#topics.get(topic)?.states[partition];
  }

  /** The TOPIC_METADATA answer for `topics` (§6.6): the live brokers, and per topic its partitions or NotReplicatedTopic. */
  topicMetadata(topics: readonly string[]): TopicMetadataResponse {
    const out: ReplicatedTopicMetadata[] = topics.map((topic) => {
      const cached = this.#topics.get(topic);
      if (cached === undefined) return { topic, errorCode: ErrorCode.NotReplicatedTopic, partitions: [] };
      const partitions: ReplicatedPartitionMetadata[] = cached.definition.partitions.map((replicas, partition) => {
        const state = cached.states[partition];
        const leader = state?.leader ?? -1;
        return {
          partition,
          errorCode: leader === -1 ? ErrorCode.LeaderNotAvailable : ErrorCode.None,
          leader,
          leaderEpoch: state?.leaderEpoch ?? -1,
          replicas,
          isr: state?.isr ?? [],
        };
      });
      return { topic, errorCode: ErrorCode.None, partitions };
    });
    return { errorCode: ErrorCode.None, brokers: this.#brokers.map((b) => ({ brokerId: b.id, host: b.host, port: b.port })), topics: out };
  }

  /** Stops every watch. */
  close(): void {
    this.#closed = true;
    for (const w of this.#watches) w.close();
    for (const t of this.#topics.values()) for (const w of t.watches) w.close();
    this.#topics.clear();
  }
}
