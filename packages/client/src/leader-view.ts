/**
 * Where each partition of a replicated topic is led, as a client sees it (docs/replication.md
 * §13.1), beside {@link BrokerPartitionInfo} (which knows the paper's topics):
 *
 * - {@link ZkLeaderView}, for clients with ZooKeeper (`ZkProducer`, `GroupConsumer`, the mirror
 *   maker): the topic definition and each partition's state node, read through
 *   `ReplicatedTopicRegistry` and watched, with the broker addresses of `/brokers/ids`;
 * - {@link MetadataLeaderView}, for clients with a broker list (`Producer`, `SimpleConsumer`):
 *   TOPIC_METADATA (type 21) to the brokers of the list, the first that answers.
 *
 * Both answer from what they last read ({@link LeaderView.cached}, no I/O) and read again on
 * {@link LeaderView.refresh}, which a client calls when a broker answered `NotLeaderForPartition`
 * or the like (§13.2). A view is at most one notification (or one refresh) behind; a client sent
 * to a broker that no longer leads is told so and refreshes.
 */
import { EventEmitter } from 'node:events';
import { type Logger, silentLogger } from '@klog/logger';
import { decodeTopicMetadataResponse, encodeTopicMetadataRequest, ErrorCode } from '@klog/protocol';
import { BrokerRegistry, type BrokerInfo, ReplicatedTopicRegistry, type ZkClient, type ZkWatch } from '@klog/zk-registry';
import type { Connection } from './connection.js';
import { KlogBrokerError, KlogError } from './errors.js';

/** One partition of a replicated topic: its leader (−1 while offline), epoch, replicas and ISR. */
export interface PartitionLeadership {
  readonly partition: number;
  readonly leader: number;
  readonly leaderEpoch: number;
  readonly replicas: readonly number[];
  readonly isr: readonly number[];
}

/** A replicated topic as last seen: its partitions `0..N-1` (index = partition). Immutable, replaced on change. */
export interface ReplicatedTopicLeaders {
  readonly topic: string;
  readonly partitions: readonly PartitionLeadership[];
}

/** A broker's address, by id, as the view knows it. */
export interface LeaderAddress {
  readonly brokerId: number;
  readonly host: string;
  readonly port: number;
}

/** What both views answer (see the file comment). */
export interface LeaderView {
  /**
   * The topic's leaders, read the first time it is asked for; undefined when the topic is not
   * replicated (a paper topic, or none).
   * @throws ZkError or KlogConnectionError when nothing can be read
   */
  topic(topic: string): Promise<ReplicatedTopicLeaders | undefined>;
  /** What was last read for `topic`, without I/O; undefined when not read yet or not replicated. */
  cached(topic: string): ReplicatedTopicLeaders | undefined;
  /** The address of broker `brokerId` as last seen; undefined when it is not live. */
  address(brokerId: number): LeaderAddress | undefined;
  /** Reads `topic`'s leaders again (after a client was told the leader moved). */
  refresh(topic: string): Promise<void>;
  /**
   * Calls `listener` after each update of `topic` the view learns of unasked (a ZooKeeper
   * watch); returns the function that stops it. The broker-list view learns only on
   * {@link refresh} and never calls it.
   */
  onChange(topic: string, listener: () => void): () => void;
  close(): Promise<void>;
}

/**
 * The one read of `topic` in flight or done, from `reads`; starts `load` when there is none. A
 * read that fails is forgotten, so the next call reads again.
 */
function pendingRead<T>(reads: Map<string, Promise<T>>, topic: string, load: () => Promise<T>): Promise<T> {
  let p = reads.get(topic);
  if (!p) {
    p = load();
    reads.set(topic, p);
    p.catch(() => reads.delete(topic));
  }
  return p;
}

/**
 * The ZooKeeper view: definitions and partition states through `ReplicatedTopicRegistry`, broker
 * addresses from `/brokers/ids`. Emits `change` after every update of a topic it holds.
 */
export class ZkLeaderView extends EventEmitter implements LeaderView {
  private readonly registry: ReplicatedTopicRegistry;
  private readonly brokerRegistry: BrokerRegistry;
  private readonly topics = new Map<string, Promise<ReplicatedTopicLeaders | undefined>>();
  private readonly last = new Map<string, ReplicatedTopicLeaders>();
  private readonly watches = new Map<string, ZkWatch[]>();
  private closed = false;

  /**
   * @param brokers the live brokers as the client already watches them (BrokerPartitionInfo's), or
   *   undefined to read `/brokers/ids` on each {@link refresh}
   */
  constructor(
    zk: ZkClient,
    private readonly brokers?: () => ReadonlyMap<number, BrokerInfo>,
    private readonly logger: Logger = silentLogger,
  ) {
    super();
    this.registry = new ReplicatedTopicRegistry(zk, { logger });
    this.brokerRegistry = new BrokerRegistry(zk, { logger });
  }

  private ownBrokers: ReadonlyMap<number, BrokerInfo> = new Map();

  topic(topic: string): Promise<ReplicatedTopicLeaders | undefined> {
    return pendingRead(this.topics, topic, () => this.read(topic, true));
  }

  cached(topic: string): ReplicatedTopicLeaders | undefined {
    return this.last.get(topic);
  }

  address(brokerId: number): LeaderAddress | undefined {
    const b = (this.brokers?.() ?? this.ownBrokers).get(brokerId);
    return b && { brokerId, host: b.host, port: b.port };
  }

  async refresh(topic: string): Promise<void> {
    if (!this.brokers) this.ownBrokers = new Map((await this.brokerRegistry.listBrokers()).map((b) => [b.id, b]));
    const fresh = this.read(topic, false);
    this.topics.set(topic, fresh);
    await fresh;
  }

  onChange(topic: string, listener: () => void): () => void {
    const onTopic = (t: string): void => {
      if (t === topic) listener();
    };
    this.on('change', onTopic);
    return () => this.off('change', onTopic);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const ws of this.watches.values()) for (const w of ws) w.close();
    this.watches.clear();
    this.removeAllListeners();
  }

  private async read(topic: string, watch: boolean): Promise<ReplicatedTopicLeaders | undefined> {
    if (!this.brokers && this.ownBrokers.size === 0) this.ownBrokers = new Map((await this.brokerRegistry.listBrokers()).map((b) => [b.id, b]));
    const definition = await this.registry.readDefinition(topic);
    if (!definition) {
      this.last.delete(topic);
      return undefined;
    }
    const n = definition.partitions.length;
    const states = await this.registry.readPartitionStates(topic);
    const partitions: PartitionLeadership[] = [];
    for (let p = 0; p < n; p++) {
      const s = states.get(p)?.state;
      const replicas = definition.partitions[p] ?? [];
      partitions.push({ partition: p, leader: s?.leader ?? -1, leaderEpoch: s?.leaderEpoch ?? -1, replicas, isr: s?.isr ?? [] });
    }
    const leaders = { topic, partitions };
    this.last.set(topic, leaders);
    if (watch && !this.watches.has(topic) && !this.closed) this.watch(topic, n);
    return leaders;
  }

  /** Watches each partition's state node: a change replaces that partition in the view. */
  private watch(topic: string, n: number): void {
    const ws: ZkWatch[] = [];
    for (let p = 0; p < n; p++) {
      ws.push(
        this.registry.watchPartitionState(topic, p, (node) => {
          const s = node?.state;
          const cur = this.last.get(topic);
          if (this.closed || !cur) return;
          const partitions = [...cur.partitions];
          const before = partitions[p]!;
          partitions[p] = { ...before, leader: s?.leader ?? -1, leaderEpoch: s?.leaderEpoch ?? -1, isr: s?.isr ?? [] };
          if (before.leader !== partitions[p]!.leader) this.logger.info({ topic, partition: p, from: before.leader, to: partitions[p]!.leader }, 'partition leader changed');
          this.last.set(topic, { topic, partitions });
          this.emit('change', topic);
        }),
      );
    }
    this.watches.set(topic, ws);
  }
}

/** The broker-list view: TOPIC_METADATA to the brokers of the list, in turn, until one answers. */
export class MetadataLeaderView implements LeaderView {
  private readonly topics = new Map<string, Promise<ReplicatedTopicLeaders | undefined>>();
  private readonly last = new Map<string, ReplicatedTopicLeaders>();
  private brokers = new Map<number, LeaderAddress>();
  /** The broker of the list asked first next time (the last that answered). */
  private next = 0;

  /** @param connections the connections to the brokers of the list (owned by the client) */
  constructor(
    private readonly connections: () => readonly Connection[],
    private readonly logger: Logger = silentLogger,
  ) {}

  topic(topic: string): Promise<ReplicatedTopicLeaders | undefined> {
    return pendingRead(this.topics, topic, () => this.ask(topic));
  }

  cached(topic: string): ReplicatedTopicLeaders | undefined {
    return this.last.get(topic);
  }

  address(brokerId: number): LeaderAddress | undefined {
    return this.brokers.get(brokerId);
  }

  async refresh(topic: string): Promise<void> {
    const fresh = this.ask(topic);
    this.topics.set(topic, fresh);
    await fresh;
  }

  onChange(): () => void {
    return () => {};
  }

  async close(): Promise<void> {}

  /**
   * Asks the brokers of the list in turn; the first answer counts.
   * @throws the last failure when none answers
   */
  private async ask(topic: string): Promise<ReplicatedTopicLeaders | undefined> {
    const list = this.connections();
    if (list.length === 0) throw new KlogError('no broker to ask for metadata');
    let lastError: unknown;
    for (let i = 0; i < list.length; i++) {
      const at = (this.next + i) % list.length;
      const c = list[at]!;
      try {
        const res = await c.request(encodeTopicMetadataRequest([topic]));
        if (res.errorCode !== ErrorCode.None) throw new KlogBrokerError(res.errorCode, { topic, broker: c.address }, 'topic metadata request failed');
        const answer = decodeTopicMetadataResponse(res.errorCode, res.body);
        this.next = at;
        this.brokers = new Map(answer.brokers.map((b) => [b.brokerId, { brokerId: b.brokerId, host: b.host, port: b.port }]));
        const entry = answer.topics.find((t) => t.topic === topic);
        if (!entry || entry.errorCode === ErrorCode.NotReplicatedTopic) {
          this.last.delete(topic);
          return undefined;
        }
        if (entry.errorCode !== ErrorCode.None) throw new KlogBrokerError(entry.errorCode, { topic, broker: c.address });
        const partitions = [...entry.partitions]
          .sort((a, b) => a.partition - b.partition)
          .map((p) => ({ partition: p.partition, leader: p.leader, leaderEpoch: p.leaderEpoch, replicas: p.replicas, isr: p.isr }));
        const leaders = { topic, partitions };
        this.last.set(topic, leaders);
        return leaders;
      } catch (error) {
        // A broker that does not know TOPIC_METADATA (an older klog) answers UnknownRequestType: the topic is a paper one there.
        if (error instanceof KlogBrokerError && error.code === ErrorCode.UnknownRequestType) return undefined;
        this.logger.debug({ topic, broker: c.address, err: (error as Error).message }, 'topic metadata request failed; asking the next broker');
        lastError = error;
      }
    }
    throw lastError;
  }
}
