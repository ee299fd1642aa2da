/**
 * The producer with ZooKeeper discovery (docs/design.md §5): finds the brokers and partitions of a topic
 * in the registry (`/brokers/ids`, `/brokers/topics/<topic>/<brokerId>`, docs/design.md §4), follows
 * brokers and topics as they come and go, and sends each record straight to the broker that
 * holds its partition. Batching, acknowledgements, the bound on bytes in flight, message
 * metadata and compression are the {@link ProducerPool}'s, as for the {@link Producer} over a
 * static broker list.
 *
 * Partitions are the (brokerId, partition) pairs of the topic sorted by broker id, then
 * partition (the order of the paper's Algorithm 1):
 * - a record with a key goes to `list[partitioner(key, list.length)]` (the same CRC-32 hash
 *   as {@link Producer}), computed over the full list, brokers that are down included. When
 *   that partition's broker is down the send fails with {@link PartitionUnavailableError}
 *   rather than putting the key somewhere else: re-keying would silently break per-key order
 *   for every consumer of the topic. The caller decides whether to retry or to give up.
 * - a record without a key goes to the topic's sticky partition among the live ones (a batch's
 *   worth of records to one, then another, see `keylessPartitioning`); partitions of brokers
 *   that are down are skipped (a warning is logged when a broker goes, a note when it comes back).
 * - a record may name its partition (`brokerId` and `partition`); it must be live.
 *
 * The list remembers brokers this producer has seen holding the topic while they are down
 * (see {@link BrokerPartitionInfo}); a producer started while a broker is down numbers the
 * partitions without it, so keys map differently until the broker returns and producers
 * restart. Run brokers with stable ids and partition counts for key partitioning to hold.
 *
 * A topic no live broker holds is created: the producer sends a METADATA request for it to
 * every live broker (each creates it with its `num.partitions`) and waits until their
 * registrations appear in ZooKeeper. A broker that joins later is used for a topic once it
 * registers that topic (topics created after it joined, or one it was asked for); the
 * producer does not spread an existing topic onto it, since that would move keys.
 */
import { AckLevel, decodeProduceAckResponse, encodeProduceAckRequest, ErrorCode, validateTopic } from '@klog/protocol';
import { type Logger, silentLogger } from '@klog/logger';
import { type BrokerInfo, ZkClient } from '@klog/zk-registry';
import { BrokerPartitionInfo, type BrokerPartitionState, type TopicPartitionsView } from './broker-partition-info.js';
import { KlogBrokerError, KlogError } from './errors.js';
import { leaderRetryOptionsOf, type LeaderRetryOptions } from './leader-retry.js';
import { ZkLeaderView, type ReplicatedTopicLeaders } from './leader-view.js';
import { hashPartitioner, type Partitioner } from './partitioner.js';
import { type PartitionTarget, type PooledBroker, ProducerPool, type ProducerPoolOptions, type RecordFields, type SendOptions, toBuffer } from './producer-pool.js';
import { ReplicatedRouter } from './producer/replicated-router.js';

/** One record to send: the {@link RecordFields} both producers take, and how to name a partition. */
export interface ZkProducerRecord extends RecordFields {
  /** Paper topic, with `partition`: send to this broker's partition; overrides `key`. Not for a replicated topic. */
  readonly brokerId?: number;
  /** Paper topic: with `brokerId`, the partition number on that broker. Replicated topic: the partition `0..N-1`. */
  readonly partition?: number;
}

/** Where a record went: the broker and its partition, as consumers of a group see them. */
export interface ZkRecordMetadata {
  readonly topic: string;
  /** Paper topic: the broker holding the partition. Replicated topic: the leader that acknowledged it (acks 0: the leader it went to). */
  readonly brokerId: number;
  /** Paper topic: the partition number on the broker. Replicated topic: the partition `0..N-1`. */
  readonly partition: number;
  /** Byte offset of the message in its partition; only with acks 1 or 2. */
  readonly offset?: number;
  /** Byte offset of the message after it (`offset + 4 + length`); only with acks 1 or 2. */
  readonly nextOffset?: number;
}

/** Options of a {@link ZkProducer}. */
export interface ZkProducerOptions extends Omit<ProducerPoolOptions, 'logger'> {
  /** ZooKeeper connect string `host:port[,host:port...][/chroot]`. */
  readonly zookeeper: string;
  /** Picks the partition of a record with a key. Default {@link hashPartitioner}. */
  readonly partitioner?: Partitioner;
  /** ZooKeeper session timeout in ms. Default 6000. */
  readonly zkSessionTimeoutMs?: number;
  /** Most ms to wait for the first ZooKeeper session. Default 10,000. */
  readonly zkConnectTimeoutMs?: number;
  /** Most ms to wait for a new topic's registrations to appear after asking the brokers to create it. Default 10,000. */
  readonly topicCreateTimeoutMs?: number;
  /** pino-compatible; receives ZooKeeper, broker and produce events. */
  readonly logger?: Logger;
}

/** A keyed or named partition whose broker is down (see the file comment for why the send fails). */
export class PartitionUnavailableError extends KlogError {
  override readonly name: string = 'PartitionUnavailableError';
  constructor(
    readonly topic: string,
    readonly brokerId: number,
    readonly partition: number,
    reason: string,
  ) {
    super(`topic ${topic} partition ${brokerId}-${partition}: ${reason}`);
  }
}

/** Default most ms to wait for a new topic's registrations. */
export const defaultTopicCreateTimeoutMs = 10_000;

/** Targets of a topic's partitions, parallel to the view's list; undefined where the broker is down. */
interface Route {
  readonly view: TopicPartitionsView;
  readonly targets: readonly (PartitionTarget<ZkRecordMetadata> | undefined)[];
  /** Indexes of live partitions in `view.partitions`. */
  readonly live: readonly number[];
}

/**
 * Sends records to a topic's partitions found in ZooKeeper (docs/design.md §5). Share one per process;
 * close it when done.
 *
 * ```ts
 * const producer = new ZkProducer({ zookeeper: 'localhost:2181/klog', acks: 1 });
 * const [meta] = await producer.send('events', [{ value: 'hello', key: 'user-1' }]);
 * // meta: { topic: 'events', brokerId: 1, partition: 0, offset: 0, nextOffset: 15 }
 * await producer.close();
 * ```
 */
export class ZkProducer {
  private readonly pool: ProducerPool;
  private readonly partitioner: Partitioner;
  private readonly logger: Logger;
  private readonly zookeeper: string;
  private readonly zkSessionTimeoutMs: number | undefined;
  private readonly zkConnectTimeoutMs: number | undefined;
  private readonly topicCreateTimeoutMs: number;
  private readonly retry: LeaderRetryOptions;

  /** The ZooKeeper session and the watches on it, opened on first use. */
  private started: Promise<{ zk: ZkClient; info: BrokerPartitionInfo; leaders: ZkLeaderView }> | undefined;
  /** Sends to replicated topics (docs/replication.md §13.2); made with the session. */
  private router: ReplicatedRouter<ZkRecordMetadata> | undefined;
  /** The pooled connection of each live broker, by id. */
  private readonly pooled = new Map<number, PooledBroker>();
  /** Routes by topic, dropped on every registry change and rebuilt on the next send. */
  private routes = new Map<string, Route>();
  /** Topics being looked up or created, so concurrent sends share the work. */
  private readonly topicReady = new Map<string, Promise<void>>();
  private closing = false;

  /** @throws ZkError for a malformed connect string; RangeError for a bad batchSize, lingerMs, acks, maxInFlightBytes or audit window */
  constructor(options: ZkProducerOptions) {
    this.logger = options.logger ?? silentLogger;
    this.pool = new ProducerPool({ ...options, logger: this.logger }, (topic, records) => this.send(topic, records));
    this.partitioner = options.partitioner ?? hashPartitioner;
    this.zookeeper = options.zookeeper;
    this.zkSessionTimeoutMs = options.zkSessionTimeoutMs;
    this.zkConnectTimeoutMs = options.zkConnectTimeoutMs;
    this.topicCreateTimeoutMs = options.topicCreateTimeoutMs ?? defaultTopicCreateTimeoutMs;
    this.retry = leaderRetryOptionsOf(options);
  }

  /** The live brokers as this producer sees them (`/brokers/ids`), by ascending id. */
  async brokers(): Promise<BrokerInfo[]> {
    const { info } = await this.start();
    return [...info.brokers().values()].sort((a, b) => a.id - b.id);
  }

  /**
   * Every (broker, partition) of `topic` known to this producer, sorted by broker id then
   * partition, with whether it is live. Creates the topic when no live broker holds it.
   * @throws KlogError when no broker is alive; ZkError when ZooKeeper cannot be reached
   */
  async partitions(topic: string): Promise<BrokerPartitionState[]> {
    validateTopic(topic);
    const { info } = await this.start();
    await this.ensureTopic(topic, info);
    return [...info.view(topic)!.partitions];
  }

  /**
   * Adds records to the batches of their partitions (see the file comment for how a partition
   * is chosen). With acks 0 resolves once every record is batched; with acks 1 or 2 once every
   * record is acknowledged, with its offsets. Records sent to one partition keep their order.
   * Nothing of a call is sent when one of its records cannot be placed.
   * @returns one ZkRecordMetadata per record, in the order given (with `settle: 'each'`, an Error for each failed record, see SendOptions)
   * @throws ProtocolError (InvalidTopic) for a bad topic name; PartitionUnavailableError for a
   *   keyed or named record whose partition's broker is down; RangeError for a named partition
   *   the topic does not have, or a key or timestamp that cannot be stored (see ProducerPool.send); KlogError when no partition of the topic is live;
   *   KlogConnectionError or KlogBrokerError from an acknowledgement (acks 1-2), or (acks 0)
   *   a failure of an earlier fire-and-forget request
   */
  send(topic: string, records: readonly ZkProducerRecord[], options?: SendOptions & { settle?: 'all' }): Promise<ZkRecordMetadata[]>;
  send(topic: string, records: readonly ZkProducerRecord[], options: SendOptions): Promise<Array<ZkRecordMetadata | Error>>;
  async send(topic: string, records: readonly ZkProducerRecord[], options?: SendOptions): Promise<Array<ZkRecordMetadata | Error>> {
    this.pool.checkOpen();
    validateTopic(topic);
    const { info, leaders } = await this.start();
    const replicated = await leaders.topic(topic);
    if (replicated) return this.sendReplicated(replicated, records, options?.settle === 'each');
    await this.ensureTopic(topic, info);
    const route = this.route(topic, info);
    const list = route.view.partitions;
    const targets = records.map((r, i) => {
      if (r.brokerId !== undefined || r.partition !== undefined) {
        const index = list.findIndex((p) => p.brokerId === r.brokerId && p.partition === r.partition);
        if (index < 0) {
          throw new RangeError(`record ${i}: topic ${topic} has no partition ${String(r.brokerId)}-${String(r.partition)} (brokerId and partition go together)`);
        }
        return this.liveTarget(route, index, 'its broker is down');
      }
      if (r.key !== undefined) {
        return this.liveTarget(route, this.partitioner(toBuffer(r.key), list.length), 'the broker of the key\'s partition is down; the record is not re-keyed');
      }
      if (route.live.length === 0) {
        throw new KlogError(`topic ${topic}: no live partition (its brokers ${[...new Set(list.map((p) => p.brokerId))].join(', ')} are down)`);
      }
      return route.targets[route.live[this.pool.keylessPartition(topic, route.live.length)]!]!;
    });
    return this.pool.send(
      targets,
      records.map((r) => toBuffer(r.value)),
      records,
      options?.settle === 'each',
    );
  }

  /** Retries of requests to replicated topics so far, every code together (docs/replication.md §13.2). */
  get leaderRetries(): number {
    return this.router?.retries ?? 0;
  }

  /** {@link leaderRetries} by the code each followed (−1: a lost connection); `describeRetries` words it. */
  get retriesByCode(): ReadonlyMap<number, number> {
    return this.router?.retriesByCode ?? new Map<number, number>();
  }

  /** A replicated topic: partitions 0..N-1, each to its leader, following leader changes. */
  private sendReplicated(leaders: ReplicatedTopicLeaders, records: readonly ZkProducerRecord[], each: boolean): Promise<Array<ZkRecordMetadata | Error>> {
    const { topic } = leaders;
    return this.router!.send(
      leaders,
      records,
      (r, i, n) => {
        const rec = r as ZkProducerRecord;
        if (rec.brokerId !== undefined) throw new RangeError(`record ${i}: topic ${topic} is replicated: name its partition (0..${n - 1}) without a brokerId`);
        if (rec.partition !== undefined) {
          if (!Number.isInteger(rec.partition) || rec.partition < 0 || rec.partition >= n) throw new RangeError(`record ${i}: partition ${rec.partition} of topic ${topic} is outside 0..${n - 1}`);
          return rec.partition;
        }
        return rec.key !== undefined ? this.partitioner(toBuffer(rec.key), n) : this.pool.keylessPartition(topic, n);
      },
      each,
    );
  }

  /**
   * Sends every batch now and waits until every request is written (acks 0) or acknowledged (acks 1-2).
   * @throws the first failure of a fire-and-forget request since the last send or flush
   */
  async flush(): Promise<void> {
    await this.pool.flush();
  }

  /**
   * Publishes the last audit counts (with `audit`), sends what is batched, waits for it as
   * {@link flush} does, closes the broker connections and the ZooKeeper session. Later sends
   * throw. Safe to call twice.
   * @throws what flush or the audit publish throws (everything is closed all the same)
   */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    try {
      await this.pool.close();
    } finally {
      const started = this.started;
      if (started) {
        const s = await started.catch(() => undefined);
        // In order: the watches and their running callbacks, then the session they read through.
        await s?.leaders.close();
        await s?.info.close();
        await s?.zk.close();
      }
    }
  }

  private start(): Promise<{ zk: ZkClient; info: BrokerPartitionInfo; leaders: ZkLeaderView }> {
    if (!this.started) {
      this.started = (async () => {
        const zk = await ZkClient.connect(this.zookeeper, {
          logger: this.logger,
          ...(this.zkSessionTimeoutMs !== undefined ? { sessionTimeoutMs: this.zkSessionTimeoutMs } : {}),
          ...(this.zkConnectTimeoutMs !== undefined ? { connectTimeoutMs: this.zkConnectTimeoutMs } : {}),
        });
        const info = new BrokerPartitionInfo(zk, this.logger);
        info.on('change', () => this.onChange(info));
        try {
          await info.start();
        } catch (error) {
          await info.close();
          await zk.close();
          throw error;
        }
        if (this.closing) {
          await info.close();
          await zk.close();
          throw new KlogError('producer is closed');
        }
        const leaders = new ZkLeaderView(zk, () => info.brokers(), this.logger);
        this.router = new ReplicatedRouter<ZkRecordMetadata>({
          pool: this.pool,
          view: leaders,
          broker: (id) => {
            const b = info.brokers().get(id);
            return b && this.pooledBroker(b);
          },
          meta: (topic, partition, leader) => ({ topic, brokerId: leader, partition }),
          retry: this.retry,
          logger: this.logger,
        });
        return { zk, info, leaders };
      })();
      // A failure is not cached: the next send connects again.
      this.started.catch(() => {
        this.started = undefined;
      });
    }
    return this.started;
  }

  /** Registry changed: retire connections of brokers that left or moved, drop routes. */
  private onChange(info: BrokerPartitionInfo): void {
    const live = info.brokers();
    for (const [id, broker] of this.pooled) {
      const now = live.get(id);
      if (!now || `${now.host}:${now.port}` !== broker.address) {
        this.pooled.delete(id);
        this.pool.retire(broker);
      }
    }
    this.routes = new Map();
  }

  private pooledBroker(info: BrokerInfo): PooledBroker {
    let b = this.pooled.get(info.id);
    if (!b) {
      b = this.pool.broker(info.host, info.port);
      this.pooled.set(info.id, b);
    }
    return b;
  }

  private route(topic: string, info: BrokerPartitionInfo): Route {
    const cached = this.routes.get(topic);
    if (cached) return cached;
    const view = info.view(topic)!;
    const brokers = info.brokers();
    const live: number[] = [];
    const targets = view.partitions.map((p, i) => {
      const broker = p.live ? brokers.get(p.brokerId) : undefined;
      if (!broker) return undefined;
      live.push(i);
      return { broker: this.pooledBroker(broker), brokerPartition: p.partition, meta: { topic, brokerId: p.brokerId, partition: p.partition } };
    });
    const route = { view, targets, live };
    this.routes.set(topic, route);
    return route;
  }

  private liveTarget(route: Route, index: number, reason: string): PartitionTarget<ZkRecordMetadata> {
    const target = route.targets[index];
    if (target) return target;
    const p = route.view.partitions[index]!;
    throw new PartitionUnavailableError(route.view.topic, p.brokerId, p.partition, reason);
  }

  /** Watches the topic; creates it on the live brokers when none holds it. */
  private ensureTopic(topic: string, info: BrokerPartitionInfo): Promise<void> {
    const view = info.view(topic);
    if (view && view.registeredBrokerIds.length > 0) return Promise.resolve();
    let p = this.topicReady.get(topic);
    if (!p) {
      p = (async () => {
        await info.watchTopic(topic);
        if (info.view(topic)!.registeredBrokerIds.length === 0) await this.createTopic(topic, info);
      })().finally(() => this.topicReady.delete(topic));
      this.topicReady.set(topic, p);
    }
    return p;
  }

  /** Asks every live broker to create the topic (an empty acknowledged produce) and waits for their registrations. */
  private async createTopic(topic: string, info: BrokerPartitionInfo): Promise<void> {
    const brokers = [...info.brokers().values()];
    if (brokers.length === 0) throw new KlogError(`topic ${topic}: no live broker is registered in ZooKeeper at ${this.zookeeper}`);
    this.logger.info({ topic, brokers: brokers.map((b) => b.id) }, 'creating topic on the live brokers');
    const answered: number[] = [];
    const failures: Error[] = [];
    await Promise.all(
      brokers.map(async (b) => {
        const broker = this.pooledBroker(b);
        try {
          // An empty acknowledged produce to partition 0 creates the topic (METADATA never does).
          const empty = { topic, partition: 0, messages: Buffer.alloc(0) };
          const res = await broker.connection.request(encodeProduceAckRequest({ acks: AckLevel.Appended, partitions: [empty] }));
          if (res.errorCode !== ErrorCode.None) throw new KlogBrokerError(res.errorCode, { topic, broker: broker.address }, 'produce request failed');
          const entry = decodeProduceAckResponse(res.body).find((t) => t.topic === topic);
          if (!entry || entry.errorCode !== ErrorCode.None) {
            throw new KlogBrokerError(entry?.errorCode ?? ErrorCode.Unknown, { topic, broker: broker.address }, 'could not create the topic');
          }
          answered.push(b.id);
        } catch (error) {
          this.logger.warn({ topic, brokerId: b.id, err: (error as Error).message }, 'broker did not create the topic');
          failures.push(error as Error);
        }
      }),
    );
    if (answered.length === 0) throw failures[0] ?? new KlogError(`topic ${topic}: no broker created it`);
    const registered = (): number[] => info.view(topic)?.registeredBrokerIds.filter((id) => answered.includes(id)) ?? [];
    const deadline = Date.now() + this.topicCreateTimeoutMs;
    while (registered().length < answered.length && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.max(0, deadline - Date.now()));
        function done(): void {
          clearTimeout(timer);
          info.off('change', done);
          resolve();
        }
        info.on('change', done);
      });
    }
    const got = registered();
    if (got.length === 0) {
      throw new KlogError(
        `topic ${topic}: brokers ${answered.join(', ')} answered for it but did not register it in ZooKeeper within ${this.topicCreateTimeoutMs} ms (are they running in cluster mode?)`,
      );
    }
    if (got.length < answered.length) {
      this.logger.warn({ topic, registered: got, asked: answered }, 'not every broker registered the new topic in time; using those that did');
    }
  }
}
