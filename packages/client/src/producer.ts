/**
 * The producer (docs/design.md §5): sends records to the partitions of a topic over a static broker list,
 * batching them by count and by linger time into one message set per partition and one request
 * per broker.
 *
 * The partitions of a paper topic are numbered over the broker list: for each broker in list order,
 * its partitions of the topic (its METADATA answer), so with brokers A (2 partitions) and B (3),
 * partitions 0-1 are A's 0-1 and partitions 2-4 are B's 0-2. A replicated topic
 * (docs/replication.md §13) has its own partitions `0..N-1`: the producer asks a broker of the
 * list where they are led (TOPIC_METADATA), sends each partition's records to its leader, and
 * follows the leader when it moves (`NotLeaderForPartition` and the like are retried, in order,
 * within `retryTimeoutMs` and `maxRetries`).
 *
 * Batching, acknowledgements (`acks` 0, 1, 2), the bound on bytes in flight, message metadata
 * (`stampMetadata`) and compression (`compression: 'gzip'`) are the {@link ProducerPool}'s,
 * shared with {@link ZkProducer}.
 */
import { silentLogger } from '@klog/logger';
import { decodeMetadataResponse, encodeMetadataRequest, ErrorCode, validateTopic } from '@klog/protocol';
import { KlogBrokerError, KlogError } from './errors.js';
import { leaderRetryOptionsOf } from './leader-retry.js';
import { MetadataLeaderView } from './leader-view.js';
import { hashPartitioner, type Partitioner } from './partitioner.js';
import { type PartitionTarget, type PooledBroker, ProducerPool, type ProducerPoolOptions, type RecordFields, type SendOptions, toBuffer } from './producer-pool.js';
import { ReplicatedRouter } from './producer/replicated-router.js';

export { type Acks, type AcksOption, defaultBatchSize, defaultLingerMs, defaultMaxInFlightBytes, type RecordFields, type SendOptions } from './producer-pool.js';

/** One record to send: the {@link RecordFields} both producers take, and how to name a partition. */
export interface ProducerRecord extends RecordFields {
  /** The partition (0..N-1 over the broker list) to send to; overrides `key`. */
  readonly partition?: number;
}

/** Where a record went. */
export interface RecordMetadata {
  readonly topic: string;
  /** Partition number over the broker list (0..N-1); of a replicated topic, its partition (0..N-1). */
  readonly partition: number;
  /** Byte offset of the message in its partition; only with acks 1 or 2. */
  readonly offset?: number;
  /** Byte offset of the message after it (`offset + 4 + length`); only with acks 1 or 2. */
  readonly nextOffset?: number;
}

/** Options of a {@link Producer}: the broker list, plus the pool's batching and acknowledgement settings. */
export interface ProducerOptions extends ProducerPoolOptions {
  /** Brokers as `host:port,host:port` or an array of `host:port`. Their order numbers the partitions. */
  readonly brokerList: string | readonly string[];
  /** Picks the partition of a record with a key and no partition. Default {@link hashPartitioner}. */
  readonly partitioner?: Partitioner;
}

/** A broker address. */
export interface BrokerAddress {
  readonly host: string;
  readonly port: number;
}

/**
 * Parses a broker list, `host:port,host:port` (or an array of `host:port`).
 * @throws KlogError naming the entry that is not `host:port` with a port in 1-65535
 */
export function parseBrokerList(list: string | readonly string[]): BrokerAddress[] {
  const entries = (typeof list === 'string' ? list.split(',') : list).map((s) => s.trim()).filter((s) => s !== '');
  if (entries.length === 0) throw new KlogError('broker list is empty: expected host:port[,host:port...]');
  return entries.map(parseBrokerAddress);
}

/**
 * Parses one `host:port` (an IPv6 host in brackets: `[::1]:9092`).
 * @throws KlogError when it is not `host:port` with a port in 1-65535
 */
export function parseBrokerAddress(s: string): BrokerAddress {
  const m = /^(?:\[([^\]]+)\]|([^:\s]+)):(\d{1,5})$/.exec(s.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || port < 1 || port > 65535) throw new KlogError(`bad broker address ${JSON.stringify(s)}: expected host:port`);
  return { host: (m[1] ?? m[2])!, port };
}

/**
 * Sends records to a topic's partitions (docs/design.md §5). Share one Producer per process; close it when done.
 *
 * ```ts
 * const producer = new Producer({ brokerList: 'localhost:9092', acks: 1 });
 * const [meta] = await producer.send('events', [{ value: 'hello', key: 'user-1' }]);
 * await producer.close();
 * ```
 */
export class Producer {
  private readonly brokers: PooledBroker[];
  private readonly pool: ProducerPool;
  private readonly partitioner: Partitioner;
  private readonly logger: ProducerOptions['logger'];

  /** Partitions of each topic asked for so far, in order over the broker list. */
  private readonly topics = new Map<string, Promise<PartitionTarget<RecordMetadata>[]>>();
  /** Where the partitions of replicated topics are led (TOPIC_METADATA to the list). */
  private readonly leaders: MetadataLeaderView;
  private readonly router: ReplicatedRouter<RecordMetadata>;

  /** @throws KlogError when the broker list is empty or malformed, RangeError for a bad batchSize, lingerMs, acks, maxInFlightBytes or audit window */
  constructor(options: ProducerOptions) {
    const addresses = parseBrokerList(options.brokerList);
    this.pool = new ProducerPool(options, (topic, records) => this.send(topic, records));
    this.brokers = addresses.map(({ host, port }) => this.pool.broker(host, port));
    this.partitioner = options.partitioner ?? hashPartitioner;
    this.logger = options.logger;
    this.leaders = new MetadataLeaderView(() => this.brokers.map((b) => b.connection), options.logger);
    this.router = new ReplicatedRouter<RecordMetadata>({
      pool: this.pool,
      view: this.leaders,
      broker: (id) => {
        const a = this.leaders.address(id);
        return a && this.pool.broker(a.host, a.port);
      },
      meta: (topic, partition) => ({ topic, partition }),
      retry: leaderRetryOptionsOf(options),
      logger: options.logger ?? silentLogger,
    });
  }

  /** Retries of requests to replicated topics so far, every code together (docs/replication.md §13.2). */
  get leaderRetries(): number {
    return this.router.retries;
  }

  /** {@link leaderRetries} by the code each followed (−1: a lost connection); `describeRetries` words it. */
  get retriesByCode(): ReadonlyMap<number, number> {
    return this.router.retriesByCode;
  }

  /**
   * The number of partitions of `topic` over the broker list (asking each broker with a
   * METADATA request the first time; brokers create topics they do not know).
   * @throws KlogConnectionError when a broker cannot be reached, KlogBrokerError when one answers with an error
   */
  async partitionCount(topic: string): Promise<number> {
    const replicated = await this.leaders.topic(topic);
    if (replicated) return replicated.partitions.length;
    return (await this.partitionsOf(topic)).length;
  }

  /**
   * Whether `topic` is a replicated topic (docs/replication.md §13): a broker of the list
   * answered TOPIC_METADATA with its partitions.
   * @throws KlogConnectionError when no broker of the list answers
   */
  async isReplicated(topic: string): Promise<boolean> {
    return (await this.leaders.topic(topic)) !== undefined;
  }

  /**
   * Where each partition of `topic` over the broker list lives: its number (0..N-1), its broker's
   * `host:port`, and its number on that broker (what FETCH and OFFSETS name). Asks as
   * {@link partitionCount} does. For a replicated topic: each partition with a live leader, at
   * that leader.
   * @throws as {@link partitionCount}
   */
  async partitionBrokers(topic: string): Promise<{ readonly partition: number; readonly broker: string; readonly brokerPartition: number }[]> {
    const replicated = await this.leaders.topic(topic);
    if (replicated) {
      // A replicated partition is where its leader is now (its number is the same on every replica).
      return replicated.partitions.flatMap((p) => {
        const a = p.leader >= 0 ? this.leaders.address(p.leader) : undefined;
        return a ? [{ partition: p.partition, broker: `${a.host}:${a.port}`, brokerPartition: p.partition }] : [];
      });
    }
    return (await this.partitionsOf(topic)).map((t) => ({ partition: t.meta.partition, broker: t.broker.address, brokerPartition: t.brokerPartition }));
  }

  /**
   * Adds records to the batches of their partitions. With acks 0 resolves once every record is
   * in a batch (waiting first while {@link ProducerOptions.maxInFlightBytes} are batched or in
   * flight); with acks 1 or 2 resolves once every record is acknowledged, with its offset.
   * Records sent to one partition keep their order.
   * @returns one RecordMetadata per record, in the order given (with `settle: 'each'`, an Error for each failed record)
   * @throws ProtocolError (InvalidTopic) for a bad topic name; RangeError for a partition outside
   *   0..N-1, or a key or timestamp that cannot be stored (see ProducerPool.send); KlogConnectionError or KlogBrokerError from the metadata request, from an
   *   acknowledgement (acks 1-2), or (acks 0) a failure of an earlier fire-and-forget request
   */
  send(topic: string, records: readonly ProducerRecord[], options?: SendOptions & { settle?: 'all' }): Promise<RecordMetadata[]>;
  send(topic: string, records: readonly ProducerRecord[], options: SendOptions): Promise<Array<RecordMetadata | Error>>;
  async send(topic: string, records: readonly ProducerRecord[], options?: SendOptions): Promise<Array<RecordMetadata | Error>> {
    this.pool.checkOpen();
    validateTopic(topic);
    const replicated = await this.leaders.topic(topic);
    if (replicated) {
      return this.router.send(
        replicated,
        records,
        (r, i, n) => {
          const rec = r as ProducerRecord;
          if (rec.partition !== undefined) {
            if (!Number.isInteger(rec.partition) || rec.partition < 0 || rec.partition >= n) throw new RangeError(`record ${i}: partition ${rec.partition} of topic ${topic} is outside 0..${n - 1}`);
            return rec.partition;
          }
          return rec.key !== undefined ? this.partitioner(toBuffer(rec.key), n) : this.pool.keylessPartition(topic, n);
        },
        options?.settle === 'each',
      );
    }
    const partitions = await this.partitionsOf(topic);
    const n = partitions.length;
    // One pass for both arrays: at one request per record, this is per-record work too.
    const targets = new Array<PartitionTarget<RecordMetadata>>(records.length);
    const payloads = new Array<Buffer>(records.length);
    for (let i = 0; i < records.length; i++) {
      const r = records[i]!;
      if (r.partition !== undefined) {
        if (!Number.isInteger(r.partition) || r.partition < 0 || r.partition >= n) {
          throw new RangeError(`record ${i}: partition ${r.partition} of topic ${topic} is outside 0..${n - 1}`);
        }
        targets[i] = partitions[r.partition]!;
      } else if (r.key !== undefined) targets[i] = partitions[this.partitioner(toBuffer(r.key), n)]!;
      else targets[i] = partitions[this.pool.keylessPartition(topic, n)]!;
      payloads[i] = toBuffer(r.value);
    }
    return this.pool.send(targets, payloads, records, options?.settle === 'each');
  }

  /**
   * Sends every batch now and waits until every request is written (acks 0) or acknowledged (acks 1-2).
   * @throws the first failure of a fire-and-forget request since the last send or flush
   *   (KlogConnectionError); failures of acknowledged requests reject their send() instead
   */
  async flush(): Promise<void> {
    await this.pool.flush();
  }

  /**
   * Publishes the last audit counts (with `audit`), sends what is batched, waits for it as
   * {@link flush} does, and closes the connections. Later sends throw. Safe to call twice.
   * @throws what flush or the audit publish throws (the connections are closed all the same)
   */
  async close(): Promise<void> {
    await this.pool.close();
  }

  private partitionsOf(topic: string): Promise<PartitionTarget<RecordMetadata>[]> {
    let p = this.topics.get(topic);
    if (!p) {
      p = this.fetchPartitions(topic);
      this.topics.set(topic, p);
      // A failure is not cached: the next send asks again.
      p.catch(() => this.topics.delete(topic));
    }
    return p;
  }

  private async fetchPartitions(topic: string): Promise<PartitionTarget<RecordMetadata>[]> {
    const counts = await Promise.all(
      this.brokers.map(async (broker) => {
        const res = await broker.connection.request(encodeMetadataRequest([topic]));
        if (res.errorCode !== ErrorCode.None) throw new KlogBrokerError(res.errorCode, { topic, broker: broker.address }, 'metadata request failed');
        const entry = decodeMetadataResponse(res.body).find((t) => t.topic === topic);
        if (!entry) throw new KlogBrokerError(ErrorCode.Unknown, { topic, broker: broker.address }, 'metadata response does not name the topic');
        if (entry.errorCode !== ErrorCode.None) throw new KlogBrokerError(entry.errorCode, { topic, broker: broker.address });
        return entry.partitions;
      }),
    );
    const targets: PartitionTarget<RecordMetadata>[] = [];
    counts.forEach((count, i) => {
      for (let p = 0; p < count; p++) {
        targets.push({ broker: this.brokers[i]!, brokerPartition: p, meta: { topic, partition: targets.length } });
      }
    });
    if (targets.length === 0) throw new KlogError(`topic ${topic} has no partitions on any broker of the list`);
    this.logger?.debug({ topic, partitions: targets.length, perBroker: counts }, 'topic partitions');
    return targets;
  }
}
