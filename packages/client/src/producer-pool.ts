/**
 * The producer pool (docs/design.md §5): one connection per broker and the batches waiting for it. Both
 * producers ({@link Producer} over a static broker list, {@link ZkProducer} over the ZooKeeper
 * registry) decide which partition of which broker a record goes to, then hand it here; the
 * pool batches records by count and linger time into one message set per partition and one
 * request per broker, bounds the bytes batched or in flight, and settles acknowledgements.
 *
 * Acknowledgements (`acks`): 0 sends MULTIPRODUCE requests, which get no response, as in the
 * paper; 1 and 2 send PRODUCE_ACK requests, answered once the broker appended the messages (1)
 * or appended and flushed them (2), and report each record's offset.
 *
 * Metadata (`stampMetadata`, docs/format.md §2a): each message carries the record's key, its
 * creation time and this host in a header. Off by default: a plain message is 10 bytes of
 * overhead and readable by any Kafka 0.7 client.
 *
 * Audit (`audit`, docs/audit.md): metadata is stamped, every record is counted by its stored
 * creation time once `send` resolved (acks 0: batched; acks 1-2: acknowledged), and the counts
 * are published (tier `producer`) through the producer's own send, on a timer and on close.
 *
 * Compression (`compression: 'gzip'`, docs/format.md §2b): each partition's batch becomes one
 * gzip wrapper message, compressed in zlib's thread pool; requests to a broker still go out in
 * the order their batches were sent. Every record of a wrapper is acknowledged with the
 * wrapper's offset, and `nextOffset` is the wrapper's offset except for its last record, whose
 * `nextOffset` is the wrapper's end (what a consumer reports for the same messages).
 *
 * The fast path (no compression): a batch keeps references to its payloads, and sending it
 * writes the request frame once, into the connection's outgoing slab, with every payload
 * copied straight into place and its CRC computed there (no message set is built first).
 * Requests are pipelined: the connection queues them and hands those of one event-loop turn
 * to the socket in one write, while {@link ProducerPoolOptions.maxInFlightBytes} bounds what
 * is batched or written and not yet done.
 *
 * The parts, as kafkajs splits its producer: this file keeps the brokers, the bytes and
 * requests in flight, flush and close; `producer/record-accumulator.ts` batches (batch size,
 * linger); `producer/request-sender.ts` frames the requests, one path per kind;
 * `producer/acknowledgements.ts` settles the send() calls from the responses (and sends again
 * the records of a set rejected for another record's size); `producer/metadata-stamp.ts` makes
 * the headers.
 */
import { hostname } from 'node:os';
import { compressionCodecOf, type CompressionType, entrySizeInBytes, type MessageHeader, messageSizeInBytes } from '@klog/protocol';
import { AuditCounter, type AuditCounterOptions, type AuditOptions } from './audit/audit-counter.js';
import { Connection } from './connection.js';
import { KlogError } from './errors.js';
import { checkLeaderRetryOptions, type LeaderRetryOptions } from './leader-retry.js';
import { type KeylessPartitioning, randomPartition, StickyPartitioner } from './partitioner.js';
import { failBatches, newSendCall } from './producer/acknowledgements.js';
import { checkMetadataHost, type StampedFields, stampHeaders } from './producer/metadata-stamp.js';
import { RecordAccumulator } from './producer/record-accumulator.js';
import { RequestSender } from './producer/request-sender.js';
import {
  type Acks,
  type AcksOption,
  type BrokerState,
  type Logger,
  type PartitionBatch,
  type PartitionMeta,
  type PartitionTarget,
  type PooledBroker,
  parseAcksOption,
  type SendCall,
  type SendResult,
  SizeQueue,
} from './producer/types.js';

export {
  type Acks,
  type AcksOption,
  type Logger,
  type PartitionMeta,
  type PartitionTarget,
  type PooledBroker,
  type RecordFields,
  type SendOptions,
  type SendResult,
  toBuffer,
} from './producer/types.js';

/** Default messages per batch. */
export const defaultBatchSize = 200;
/** Default linger time in ms. */
export const defaultLingerMs = 5;
/** Default bound on bytes batched or in flight. */
export const defaultMaxInFlightBytes = 32 * 1024 * 1024;

/**
 * Batching and acknowledgement settings shared by both producers, and the bounds of their
 * retries across leader changes on replicated topics (`retryTimeoutMs`, `maxRetries`,
 * docs/replication.md §13.2).
 */
export interface ProducerPoolOptions extends LeaderRetryOptions {
  /** Messages per broker that trigger sending its batch at once. Default 200. */
  readonly batchSize?: number;
  /**
   * Most ms a message waits in a batch before the batch is sent. Default 5. 0: a batch goes at
   * the end of the event-loop turn that batched its first message (the records sent in one turn
   * go together), without waiting for a timer.
   */
  readonly lingerMs?: number;
  /**
   * Where records with neither partition nor key go (docs/design.md §5): `'sticky'`, `batchSize`
   * of them to one partition, then to another ({@link StickyPartitioner}); `'random'`, a random
   * partition per record. Default `'sticky'`.
   */
  readonly keylessPartitioning?: KeylessPartitioning;
  /** Acknowledgement level, see {@link Acks}; `'all'` is −1. Default 0. */
  readonly acks?: AcksOption;
  /**
   * Most bytes of encoded messages in batches or in flight (not yet handed to the operating
   * system with acks 0, not yet acknowledged with acks 1-2); `send` waits while they are
   * above it. Default 32 MiB.
   */
  readonly maxInFlightBytes?: number;
  /** Most ms to wait for an acknowledgement or a metadata response. Default 30,000. */
  readonly requestTimeoutMs?: number;
  /** Most ms to wait for a connection to open. Default 10,000. */
  readonly connectTimeoutMs?: number;
  /**
   * Write a metadata header in every message (docs/format.md §2a): the record's key (when it
   * has one), its creation time (the record's `timestamp`, else the time of the send call) and
   * {@link metadataHost}. Default false: plain messages, as a Kafka 0.7 client writes them.
   */
  readonly stampMetadata?: boolean;
  /** With stampMetadata: the host name written in each message. Default `os.hostname()`. */
  readonly metadataHost?: string;
  /**
   * `'gzip'`: send each partition's batch as one gzip message set (docs/format.md §2b);
   * consumers decompress it. Default `'none'`.
   */
  readonly compression?: CompressionType;
  /**
   * Count the records sent per topic and window of creation time and publish the counts to the
   * audit topic (docs/audit.md; tier `producer`). Turns `stampMetadata` on: the creation time
   * counted is the one stored in each message.
   */
  readonly audit?: AuditOptions;
  readonly logger?: Logger;
}

/** Connections, batches and acknowledgements for a producer (see the file comment). */
export class ProducerPool {
  readonly acks: Acks;
  private readonly maxInFlightBytes: number;
  private readonly requestTimeoutMs: number | undefined;
  private readonly connectTimeoutMs: number | undefined;
  private readonly logger: Logger | undefined;
  private readonly stampMetadata: boolean;
  private readonly metadataHost: string;
  /**
   * Each message is a request of its own, written at once and settled by the write alone
   * (batchSize 1, acks 0, no compression): RequestSender.sendAlone writes it without a batch.
   */
  private readonly sendsAlone: boolean;
  private readonly accumulator: RecordAccumulator;
  private readonly sender: RequestSender;
  /** The sticky partitions, with `keylessPartitioning: 'sticky'`. */
  private readonly sticky: StickyPartitioner | undefined;

  /** Brokers by address. */
  private readonly brokers = new Map<string, BrokerState>();
  /** Bytes batched or in flight (see maxInFlightBytes). */
  private inFlightBytes = 0;
  /** Callers of send() waiting for inFlightBytes to drop. */
  private roomWaiters: Array<() => void> = [];
  /** Requests handed to a connection and not yet settled, all brokers (also retired ones). */
  private requestsInFlight = 0;
  /** Resolved when `requestsInFlight` drops to 0. */
  private idleWaiters: Array<() => void> = [];
  /** Connections of retired brokers being closed. */
  private readonly closing = new Set<Promise<void>>();
  /** A failure of a fire-and-forget send, reported by the next send() or flush(). */
  private asyncError: Error | undefined;
  /**
   * Fire-and-forget requests that failed after `asyncError` and were not logged one by one: a
   * lost connection fails every request queued on it, which with one message per request is
   * one per message.
   */
  private failedUnlogged = 0;
  private isClosed = false;
  /** Counts for the audit, with the `audit` option. */
  private readonly audit: AuditCounter | undefined;

  /**
   * @param publish with `audit`: sends the audit messages to the audit topic (the producer's own send)
   * @throws RangeError for a bad batchSize, lingerMs, keylessPartitioning, acks, maxInFlightBytes, compression,
   *   metadataHost or audit window, or `audit` without `publish`
   */
  constructor(options: ProducerPoolOptions, publish?: AuditCounterOptions['send']) {
    const batchSize = options.batchSize ?? defaultBatchSize;
    const lingerMs = options.lingerMs ?? defaultLingerMs;
    this.acks = parseAcksOption(options.acks);
    this.maxInFlightBytes = options.maxInFlightBytes ?? defaultMaxInFlightBytes;
    this.requestTimeoutMs = options.requestTimeoutMs;
    this.connectTimeoutMs = options.connectTimeoutMs;
    this.logger = options.logger;
    this.stampMetadata = options.stampMetadata === true || options.audit !== undefined;
    this.metadataHost = options.metadataHost ?? hostname();
    const codec = compressionCodecOf(options.compression ?? 'none');
    this.sendsAlone = batchSize === 1 && this.acks === 0 && codec === 0;
    checkMetadataHost(this.metadataHost);
    if (!Number.isInteger(batchSize) || batchSize < 1) throw new RangeError(`batchSize ${batchSize} must be an integer ≥ 1`);
    if (!Number.isFinite(lingerMs) || lingerMs < 0) throw new RangeError(`lingerMs ${lingerMs} must be ≥ 0`);
    if (!(this.maxInFlightBytes > 0)) throw new RangeError(`maxInFlightBytes ${this.maxInFlightBytes} must be > 0`);
    if (options.audit !== undefined && publish === undefined) throw new RangeError('audit needs a publish function');
    checkLeaderRetryOptions(options);
    const keyless = options.keylessPartitioning ?? 'sticky';
    if (keyless !== 'sticky' && keyless !== 'random') throw new RangeError(`keylessPartitioning ${String(keyless)} must be 'sticky' or 'random'`);
    this.sticky = keyless === 'sticky' ? new StickyPartitioner(batchSize) : undefined;
    this.accumulator = new RecordAccumulator(batchSize, lingerMs, (b) => this.sendBatches(b));
    this.sender = new RequestSender(this.acks, codec, {
      started: (b) => {
        this.requestsInFlight++;
        b.requestsInFlight++;
      },
      failed: (b, batches, e) => this.failed(b, batches, e),
      settled: (b, bytes) => this.settled(b, bytes),
      resend: (batch, indexes) => this.resend(batch, indexes),
    });
    this.audit =
      options.audit &&
      new AuditCounter({
        ...options.audit,
        tier: 'producer',
        host: options.audit.host ?? this.metadataHost,
        send: publish!,
        onPublishError: (err) => this.logger?.warn({ err }, 'publishing audit counts failed; retrying at the next interval'),
      });
    this.audit?.start();
  }

  /** True once {@link close} started. */
  get closed(): boolean {
    return this.isClosed;
  }

  /** The pooled broker at `host:port`, opened (lazily, on first request) when new. */
  broker(host: string, port: number): PooledBroker {
    const address = `${host}:${port}`;
    let b = this.brokers.get(address);
    if (!b) {
      const state: BrokerState = {
        address,
        connection: new Connection({ host, port, requestTimeoutMs: this.requestTimeoutMs, connectTimeoutMs: this.connectTimeoutMs }),
        batches: new Map(),
        batchList: [],
        lastTarget: undefined,
        lastBatch: undefined,
        batchedMessages: 0,
        lingerTimer: undefined,
        oldestBatchedAt: 0,
        requestsInFlight: 0,
        aloneBytes: new SizeQueue(),
        aloneWritten: (err) => this.sender.aloneWritten(state, err),
        idleWaiters: [],
        retired: false,
        writeChain: Promise.resolve(),
      };
      b = state;
      this.brokers.set(address, b);
    }
    return b;
  }

  /**
   * Takes a broker out of the pool (it left the cluster): what is batched for it is sent at
   * once (and fails if it is gone), and its connection closes once its requests settle. A
   * later {@link broker} call for the same address opens a new one.
   */
  retire(broker: PooledBroker): void {
    const b = this.brokers.get(broker.address);
    if (b !== broker || !b) return;
    this.brokers.delete(b.address);
    b.retired = true;
    this.sendBatches(b);
    this.accumulator.stopLinger(b);
    const closing = whenIdle(b)
      .then(() => b.connection.close())
      .finally(() => this.closing.delete(closing));
    this.closing.add(closing);
  }

  /**
   * The partition in `[0, numPartitions)` of the next record of `topic` with neither partition
   * nor key (docs/design.md §5): the topic's sticky partition, or a random one with
   * `keylessPartitioning: 'random'`. Both producers and the replicated router ask here.
   * @param numPartitions partitions to choose from (ZkProducer: its live ones), ≥ 1
   */
  keylessPartition(topic: string, numPartitions: number): number {
    return this.sticky ? this.sticky.partition(topic, numPartitions) : randomPartition(numPartitions);
  }

  /** Throws (once) the failure of an earlier fire-and-forget request, if any, and a KlogError when closed. */
  checkOpen(): void {
    if (this.isClosed) throw new KlogError('producer is closed');
    this.throwAsyncError();
  }

  /** Throws `asyncError` (once), first logging how many more requests failed with it unlogged. */
  private throwAsyncError(): void {
    const e = this.asyncError;
    if (!e) return;
    if (this.failedUnlogged > 0) this.logger?.warn({ requests: this.failedUnlogged }, 'more produce requests failed after the first');
    this.asyncError = undefined;
    this.failedUnlogged = 0;
    throw e;
  }

  /**
   * Adds each payload to the batch of its target. With acks 0 resolves once every record is
   * in a batch (waiting first while maxInFlightBytes are batched or in flight), with each
   * target's meta; with acks 1 or 2 resolves once every record is acknowledged, with its
   * offsets. Records to one partition keep their order.
   * @param records parallel to `payloads`: each record's key, timestamp and host (written with stampMetadata)
   * @param each acks 1-2: settle per record, resolving once every record is acknowledged or
   *   failed, a failed record's result being its error (KlogBrokerError, KlogConnectionError),
   *   instead of rejecting at the first failure
   * @throws RangeError (before anything is batched) for a key or host over 65535 bytes or a
   *   timestamp that is not a safe integer with stampMetadata, or a timestamp or host without it; KlogError when
   *   the pool closes meanwhile; KlogBrokerError (RecordTooLargeError for a record over the
   *   broker's max.message.bytes) or KlogConnectionError from an acknowledgement (acks 1-2)
   */
  async send<M extends PartitionMeta>(
    targets: readonly PartitionTarget<M>[],
    payloads: readonly Buffer[],
    records: readonly StampedFields[],
    each = false,
  ): Promise<Array<SendResult<M> | Error>> {
    const headers = stampHeaders(records, this.stampMetadata, this.metadataHost, Date.now());
    let call: SendCall | undefined;
    let acked: Promise<unknown[]> | undefined;
    if (this.acks !== 0 && payloads.length > 0) ({ call, done: acked } = newSendCall(payloads.length, each));
    for (let i = 0; i < payloads.length; i++) {
      while (this.inFlightBytes >= this.maxInFlightBytes) await this.waitForRoom();
      if (this.isClosed) throw new KlogError('producer closed while sending');
      this.append(targets[i]!, payloads[i]!, headers?.[i], call, i);
    }
    const results = acked ? ((await acked) as Array<SendResult<M> | Error>) : targets.map((t) => t.meta);
    // With audit every record has a header (stamping is on); the counter skips the audit topic.
    if (this.audit) {
      for (let i = 0; i < targets.length; i++) if (!(results[i] instanceof Error)) this.audit.count(targets[i]!.meta.topic, headers![i]!.timestamp!);
    }
    return results;
  }

  /**
   * Sends every batch now and waits until every request is written (acks 0) or acknowledged (acks 1-2).
   * @throws the first failure of a fire-and-forget request since the last send or flush
   *   (KlogConnectionError); failures of acknowledged requests reject their send() instead
   */
  async flush(): Promise<void> {
    for (const b of this.brokers.values()) this.sendBatches(b);
    while (this.requestsInFlight > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    this.throwAsyncError();
  }

  /**
   * Publishes the last audit counts (with `audit`), sends what is batched, waits for it as
   * {@link flush} does, and closes the connections. Later sends throw. Safe to call twice.
   * @throws what the audit publish or flush throws (the connections are closed all the same)
   */
  async close(): Promise<void> {
    if (this.isClosed) return;
    try {
      try {
        await this.audit?.close();
      } finally {
        await this.flush();
      }
    } finally {
      this.isClosed = true;
      for (const b of this.brokers.values()) this.accumulator.stopLinger(b);
      for (const w of this.roomWaiters.splice(0)) w();
      await Promise.all([...this.brokers.values()].map((b) => b.connection.close()));
      await Promise.allSettled([...this.closing]);
    }
  }


  private append(target: PartitionTarget<PartitionMeta>, payload: Buffer, header: MessageHeader | undefined, call: SendCall | undefined, index: number): void {
    // Every PooledBroker is a BrokerState made by broker().
    const b = target.broker as BrokerState;
    const size = header === undefined ? messageSizeInBytes(payload.length) : entrySizeInBytes({ value: payload, header });
    this.inFlightBytes += size;
    if (this.sendsAlone && b.batchedMessages === 0) this.sender.sendAlone(b, target.meta.topic, target.brokerPartition, payload, header, size);
    else this.accumulator.append(b, target, payload, header, size, call, index);
  }

  /**
   * Batches again the records `indexes` of a batch rejected for another record's size (see
   * producer/acknowledgements.ts): to the same partition, behind what is batched for it now.
   */
  private resend(batch: PartitionBatch, indexes: readonly number[]): void {
    if (this.isClosed) {
      failBatches([batch], new KlogError('producer closed while sending'));
      return;
    }
    for (const i of indexes) {
      const p = batch.placements[i]!;
      this.append(batch.target, batch.payloads[i]!, batch.headers?.[i], p.call, p.index);
    }
  }

  /** Sends the broker's batches, if any. */
  private sendBatches(b: BrokerState): void {
    const batches = this.accumulator.take(b);
    if (batches.length > 0) this.sender.sendBatches(b, batches);
  }

  /** A request failed: with acks 0 the error waits for the next send or flush; with acks 1-2 its records' send() calls reject. */
  private failed(broker: BrokerState, batches: readonly PartitionBatch[], e: Error): void {
    if (this.acks === 0) {
      if (this.asyncError === undefined) {
        this.logger?.warn({ broker: broker.address, err: e.message }, 'produce request failed');
        this.asyncError = e;
      } else this.failedUnlogged++;
      return;
    }
    failBatches(batches, e);
  }

  /** A request of `bytes` batched bytes is done (written, answered or failed). */
  private settled(broker: BrokerState, bytes: number): void {
    this.release(bytes);
    // Checked before splice(0): every request settles here, and an empty splice is still a new array.
    if (--broker.requestsInFlight === 0 && broker.idleWaiters.length > 0) for (const w of broker.idleWaiters.splice(0)) w();
    if (--this.requestsInFlight === 0 && this.idleWaiters.length > 0) for (const w of this.idleWaiters.splice(0)) w();
  }

  private waitForRoom(): Promise<void> {
    // Batched bytes count as in flight: send them so that room can appear.
    for (const b of this.brokers.values()) this.sendBatches(b);
    return new Promise((resolve) => this.roomWaiters.push(resolve));
  }

  private release(bytes: number): void {
    this.inFlightBytes -= bytes;
    if (this.inFlightBytes < this.maxInFlightBytes && this.roomWaiters.length > 0) for (const w of this.roomWaiters.splice(0)) w();
  }
}

/** Resolves once `o` has no request in flight. */
function whenIdle(o: { requestsInFlight: number; idleWaiters: Array<() => void> }): Promise<void> {
  if (o.requestsInFlight === 0) return Promise.resolve();
  return new Promise((resolve) => o.idleWaiters.push(resolve));
}
