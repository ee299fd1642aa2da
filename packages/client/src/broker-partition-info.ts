/**
 * What a producer knows of the cluster from ZooKeeper (SPEC §4, §5): the live brokers
 * (`/brokers/ids`) and, for each topic it sends to, the brokers holding it and how many
 * partitions each has (`/brokers/topics/<topic>/<brokerId>`), kept current by watches.
 *
 * A broker that goes takes its ephemeral registrations with it. This view remembers the
 * partition count it last saw for each broker of a topic, so the topic's full partition list
 * (sorted by broker id, then partition) does not shrink while a broker is down: its
 * partitions are only marked down, which is what keeps key partitioning stable across a
 * broker restart. The memory lasts as long as the view; a fresh view starts from what is
 * registered at that moment.
 */
import { EventEmitter } from 'node:events';
import type { Logger } from '@klog/logger';
import { type BrokerInfo, BrokerRegistry, type BrokerPartition, type ZkClient, type ZkWatch } from '@klog/zk-registry';

/** One (broker, partition) of a topic and whether it can be sent to now. */
export interface BrokerPartitionState extends BrokerPartition {
  /** The broker is in `/brokers/ids` and holds the topic in `/brokers/topics/<topic>`. */
  readonly live: boolean;
}

/** The partitions of one topic as last seen, immutable (replaced on every change). */
export interface TopicPartitionsView {
  readonly topic: string;
  /** Every (broker, partition) seen for the topic, live or not, sorted by broker id then partition. */
  readonly partitions: readonly BrokerPartitionState[];
  /** Ids of the brokers registered as holding the topic right now, ascending. */
  readonly registeredBrokerIds: readonly number[];
}

interface TopicWatch {
  readonly watch: ZkWatch;
  /** Last partition count seen per broker, kept after the broker's registration goes. */
  readonly counts: Map<number, number>;
  /** Brokers registered under `/brokers/topics/<topic>` now. */
  registered: readonly number[];
  /** Brokers of this topic reported down (for a warning when they go and a note when they return). */
  readonly down: Set<number>;
}

/**
 * Watches `/brokers/ids` and the `/brokers/topics/<topic>` of each topic asked for. Emits
 * `change` (no arguments) after every update of either.
 */
export class BrokerPartitionInfo extends EventEmitter {
  private readonly registry: BrokerRegistry;
  /** Live brokers by id; replaced as a whole on every change. */
  private liveBrokers: ReadonlyMap<number, BrokerInfo> = new Map();
  private brokersWatch: ZkWatch | undefined;
  private readonly topics = new Map<string, TopicWatch>();
  private closed = false;
  /** Watch callbacks running now (each reads ZooKeeper): close() waits for them before the session may close. */
  private readonly running = new Set<Promise<void>>();

  constructor(
    zk: ZkClient,
    private readonly logger: Logger,
  ) {
    super();
    this.registry = new BrokerRegistry(zk, { logger });
  }

  /** Starts watching the live brokers; resolves once they have been read. */
  async start(): Promise<void> {
    if (this.brokersWatch) return this.brokersWatch.ready;
    this.brokersWatch = this.registry.watchBrokerIds(this.tracked(async (ids) => {
      const next = new Map<number, BrokerInfo>();
      for (const id of ids) {
        if (this.closed) return;
        const info = await this.registry.getBroker(id);
        if (info) next.set(id, info);
      }
      if (this.closed) return;
      const before = this.liveBrokers;
      this.liveBrokers = next;
      for (const [id, info] of next) {
        const was = before.get(id);
        if (!was) this.logger.info({ brokerId: id, host: info.host, port: info.port }, 'broker joined');
        else if (was.host !== info.host || was.port !== info.port) this.logger.info({ brokerId: id, host: info.host, port: info.port }, 'broker moved');
      }
      for (const id of before.keys()) if (!next.has(id)) this.logger.info({ brokerId: id }, 'broker left');
      this.update();
    }));
    return this.brokersWatch.ready;
  }

  /** The live brokers, by id. */
  brokers(): ReadonlyMap<number, BrokerInfo> {
    return this.liveBrokers;
  }

  /** Starts watching `topic` (once) and resolves once its registrations have been read. */
  async watchTopic(topic: string): Promise<void> {
    let t = this.topics.get(topic);
    if (!t) {
      const counts = new Map<number, number>();
      const state: { t?: TopicWatch } = {};
      const watch = this.registry.watchTopicBrokers(topic, this.tracked(async () => {
        if (this.closed) return;
        // Read the counts too: a broker may re-register with another count.
        const now = await this.registry.topicPartitions(topic);
        if (this.closed) return;
        for (const { brokerId, partitions } of now) counts.set(brokerId, partitions);
        if (state.t) state.t.registered = now.map((c) => c.brokerId);
        this.update();
      }));
      t = { watch, counts, registered: [], down: new Set() };
      state.t = t;
      this.topics.set(topic, t);
    }
    await t.watch.ready;
  }

  /** The partitions of a watched topic as last seen; undefined for a topic not watched. */
  view(topic: string): TopicPartitionsView | undefined {
    const t = this.topics.get(topic);
    if (!t) return undefined;
    const registered = new Set(t.registered);
    const partitions: BrokerPartitionState[] = [];
    for (const brokerId of [...t.counts.keys()].sort((a, b) => a - b)) {
      const live = registered.has(brokerId) && this.liveBrokers.has(brokerId);
      for (let partition = 0; partition < t.counts.get(brokerId)!; partition++) partitions.push({ brokerId, partition, live });
    }
    return { topic, partitions, registeredBrokerIds: t.registered };
  }

  /**
   * Stops every watch, and resolves once the watch callbacks that were running have finished
   * their ZooKeeper reads: only then may the session close (else a read of a callback fails
   * with ZkClosedError, logged as a failed callback).
   */
  async close(): Promise<void> {
    this.closed = true;
    this.brokersWatch?.close();
    for (const t of this.topics.values()) t.watch.close();
    this.topics.clear();
    this.removeAllListeners();
    await Promise.allSettled([...this.running]);
  }

  /** `callback`, counted in {@link running} while it runs. */
  private tracked<A extends unknown[]>(callback: (...args: A) => Promise<void>): (...args: A) => Promise<void> {
    return (...args) => {
      const run = callback(...args);
      this.running.add(run);
      return run.finally(() => this.running.delete(run));
    };
  }

  /** Logs brokers of a topic going down or coming back, then emits `change`. */
  private update(): void {
    if (this.closed) return;
    for (const [topic, t] of this.topics) {
      const registered = new Set(t.registered);
      for (const brokerId of t.counts.keys()) {
        const live = registered.has(brokerId) && this.liveBrokers.has(brokerId);
        if (!live && !t.down.has(brokerId)) {
          t.down.add(brokerId);
          this.logger.warn(
            { topic, brokerId, partitions: t.counts.get(brokerId) },
            'broker is down: its partitions of the topic are skipped until it returns',
          );
        } else if (live && t.down.delete(brokerId)) {
          this.logger.info({ topic, brokerId }, 'broker is back: its partitions of the topic are used again');
        }
      }
    }
    this.emit('change');
  }
}
