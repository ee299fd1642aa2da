/**
 * The producer pool (SPEC §5): one connection per broker and the batches waiting for it. Both
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
 */
import { hostname } from 'node:os';
import {
  compressionCodecOf,
  type CompressionType,
  decodeProduceAckResponse,
  encodeMessageSet,
  encodeMessageSetWithHeaders,
  entrySizeInBytes,
  ErrorCode,
  gzipMessageSet,
  maxHeaderFieldBytes,
  maxPartitionsPerRequest,
  type MessageHeader,
  messageSizeInBytes,
  multiProduceRequestBytes,
  type PartitionMessages,
  produceAckRequestBytes,
  singleSetMultiProduceRequestBytes,
  TopicNameCache,
  writeMultiProduceMessageRequest,
  writeMultiProduceRequest,
  writeProduceAckRequest,
} from '@klog/protocol';
import type { Logger } from '@klog/logger';
import { AuditCounter, type AuditCounterOptions, type AuditOptions } from './audit/audit-counter.js';
import { Connection, maxSlabFrameBytes, type WrittenCallback } from './connection.js';
import { KlogBrokerError, KlogError } from './errors.js';

/** 0: fire-and-forget (no response); 1: answered once appended; 2: answered once appended and flushed. */
export type Acks = 0 | 1 | 2;


/** Default messages per batch. */
export const defaultBatchSize = 200;
/** Default linger time in ms. */
export const defaultLingerMs = 5;
/** Default bound on bytes batched or in flight. */
export const defaultMaxInFlightBytes = 32 * 1024 * 1024;

/** Batching and acknowledgement settings shared by both producers. */
export interface ProducerPoolOptions {
  /** Messages per broker that trigger sending its batch at once. Default 200. */
  readonly batchSize?: number;
  /** Most ms a message waits in a batch before the batch is sent. Default 5. */
  readonly lingerMs?: number;
  /** Acknowledgement level, see {@link Acks}. Default 0. */
  readonly acks?: Acks;
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

/** What the pool reads of a record besides its value (both producers' records have these fields). */
export interface RecordFields {
  /** Stored in the header with stampMetadata; a string is its UTF-8. */
  readonly key?: Buffer | string;
  /** Creation time in ms since the epoch, stored with stampMetadata. Default: the time of the send call. */
  readonly timestamp?: number;
  /** The producing host, stored with stampMetadata (e.g. a copied message's origin). Default: metadataHost. */
  readonly host?: string;
}

/** What the pool knows of a record's partition: at least its topic and a partition number for messages. */
export interface PartitionMeta {
  readonly topic: string;
  /** The partition number the producer reports (over the broker list, or on the broker). */
  readonly partition: number;
}

/** A record's result: its partition's meta plus, with acks 1 or 2, its offsets. */
export type SendResult<M extends PartitionMeta> = M & {
  /** Byte offset of the message in its partition; only with acks 1 or 2. */
  readonly offset?: number;
  /** Byte offset of the message after it (`offset + 4 + length`); only with acks 1 or 2. */
  readonly nextOffset?: number;
};

/** A broker of the pool: its connection and the batches waiting for it. */
export interface PooledBroker {
  /** `host:port`. */
  readonly address: string;
  readonly connection: Connection;
}

/** Where one record goes: a partition of a pooled broker, and what to report about it. */
export interface PartitionTarget<M extends PartitionMeta> {
  readonly broker: PooledBroker;
  /** Partition number on the broker (what the request names). */
  readonly brokerPartition: number;
  readonly meta: M;
}

/** One send() call waiting for its acknowledgements. */
interface SendCall {
  readonly results: unknown[];
  remaining: number;
  settled: boolean;
  readonly resolve: (r: unknown[]) => void;
  readonly reject: (e: Error) => void;
}

/** A record of a SendCall placed in a partition batch. */
interface Placement {
  readonly call: SendCall;
  readonly index: number;
  /** Bytes before this message in the batch's message set. */
  readonly position: number;
  /** Bytes of this message, length field included. */
  readonly size: number;
}

/**
 * The messages batched for one partition of one broker; also the block of the request that
 * carries them (`partition` and `payloads` are what the request writers read).
 */
interface PartitionBatch {
  readonly topic: string;
  /** Partition number on the broker (the partition the request names). */
  readonly partition: number;
  /** Reported in results and errors. */
  readonly meta: PartitionMeta;
  readonly payloads: Buffer[];
  /** Headers parallel to `payloads`; undefined while no message of the batch has one. */
  headers: Array<MessageHeader | undefined> | undefined;
  /** Encoded bytes of `payloads` (uncompressed). */
  bytes: number;
  readonly placements: Placement[];
}

interface BrokerState extends PooledBroker {
  /** Batches by `topic\0brokerPartition`. */
  readonly batches: Map<string, PartitionBatch>;
  /** The batches of `batches`, in the order they were opened. */
  batchList: PartitionBatch[];
  /** The target of the last record batched and its batch: most records follow one to the same partition. */
  lastTarget: PartitionTarget<PartitionMeta> | undefined;
  lastBatch: PartitionBatch | undefined;
  /** Messages in `batches`. */
  batchedMessages: number;
  /**
   * Fires when the oldest batched message may have waited lingerMs; armed when a message is
   * batched and none is armed, and left armed when its batches go out full (re-armed for the
   * batches opened since, or let go when there are none), so a batch costs no timer of its own.
   */
  lingerTimer: NodeJS.Timeout | undefined;
  /** `Date.now()` when the first message of the current batches was batched. */
  oldestBatchedAt: number;
  /** Requests to this broker handed to its connection and not yet settled. */
  requestsInFlight: number;
  /** Bytes of each message sent alone (see ProducerPool.sendAlone) and not yet written, oldest first. */
  readonly aloneBytes: SizeQueue;
  /** The written callback of every message sent alone: settles the oldest of them. */
  readonly aloneWritten: WrittenCallback;
  /** Resolved when `requestsInFlight` drops to 0. */
  idleWaiters: Array<() => void>;
  /** Set by retire(): no longer routed to; closes once its requests settle. */
  retired: boolean;
  /** With compression: resolves once the last compressed request is written (keeps requests in order). */
  writeChain: Promise<void>;
}

/** Connections, batches and acknowledgements for a producer (see the file comment). */
export class ProducerPool {
  readonly acks: Acks;
  private readonly batchSize: number;
  private readonly lingerMs: number;
  private readonly maxInFlightBytes: number;
  private readonly requestTimeoutMs: number | undefined;
  private readonly connectTimeoutMs: number | undefined;
  private readonly logger: Logger | undefined;
  private readonly stampMetadata: boolean;
  private readonly metadataHost: string;
  /** Codec of the wrapper (0: no compression). */
  private readonly codec: number;
  /**
   * Each message is a request of its own, written at once and settled by the write alone
   * (batchSize 1, acks 0, no compression): {@link sendAlone} writes it without a batch.
   */
  private readonly sendsAlone: boolean;
  /** The topic name last found valid by {@link sendAlone}'s request writer. */
  private readonly topicNames = new TopicNameCache();

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
   * @throws RangeError for a bad batchSize, lingerMs, acks, maxInFlightBytes, compression,
   *   metadataHost or audit window, or `audit` without `publish`
   */
  constructor(options: ProducerPoolOptions, publish?: AuditCounterOptions['send']) {
    this.batchSize = options.batchSize ?? defaultBatchSize;
    this.lingerMs = options.lingerMs ?? defaultLingerMs;
    this.acks = options.acks ?? 0;
    this.maxInFlightBytes = options.maxInFlightBytes ?? defaultMaxInFlightBytes;
    this.requestTimeoutMs = options.requestTimeoutMs;
    this.connectTimeoutMs = options.connectTimeoutMs;
    this.logger = options.logger;
    this.stampMetadata = options.stampMetadata === true || options.audit !== undefined;
    this.metadataHost = options.metadataHost ?? hostname();
    this.codec = compressionCodecOf(options.compression ?? 'none');
    this.sendsAlone = this.batchSize === 1 && this.acks === 0 && this.codec === 0;
    if (Buffer.byteLength(this.metadataHost, 'utf8') > maxHeaderFieldBytes) {
      throw new RangeError(`metadataHost of ${Buffer.byteLength(this.metadataHost, 'utf8')} bytes is over ${maxHeaderFieldBytes}`);
    }
    if (!Number.isInteger(this.batchSize) || this.batchSize < 1) throw new RangeError(`batchSize ${this.batchSize} must be an integer ≥ 1`);
    if (!Number.isFinite(this.lingerMs) || this.lingerMs < 0) throw new RangeError(`lingerMs ${this.lingerMs} must be ≥ 0`);
    if (this.acks !== 0 && this.acks !== 1 && this.acks !== 2) throw new RangeError(`acks ${String(this.acks)} must be 0, 1 or 2`);
    if (!(this.maxInFlightBytes > 0)) throw new RangeError(`maxInFlightBytes ${this.maxInFlightBytes} must be > 0`);
    if (options.audit !== undefined && publish === undefined) throw new RangeError('audit needs a publish function');
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
        aloneWritten: (err) => this.aloneWritten(state, err),
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
    stopLinger(b);
    const closing = whenIdle(b)
      .then(() => b.connection.close())
      .finally(() => this.closing.delete(closing));
    this.closing.add(closing);
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
   * @param records parallel to `payloads`: each record's key and timestamp (written with stampMetadata)
   * @throws RangeError (before anything is batched) for a key or host over 65535 bytes or a
   *   timestamp that is not a safe integer with stampMetadata, or a timestamp or host without it; KlogError when
   *   the pool closes meanwhile; KlogBrokerError or KlogConnectionError from an
   *   acknowledgement (acks 1-2)
   */
  async send<M extends PartitionMeta>(
    targets: readonly PartitionTarget<M>[],
    payloads: readonly Buffer[],
    records: readonly RecordFields[],
  ): Promise<SendResult<M>[]> {
    const headers = this.headersOf(records);
    let call: SendCall | undefined;
    let acked: Promise<unknown[]> | undefined;
    if (this.acks !== 0 && payloads.length > 0) {
      acked = new Promise<unknown[]>((resolve, reject) => {
        call = { results: new Array<unknown>(payloads.length), remaining: payloads.length, settled: false, resolve, reject };
      });
    }
    for (let i = 0; i < payloads.length; i++) {
      while (this.inFlightBytes >= this.maxInFlightBytes) await this.waitForRoom();
      if (this.isClosed) throw new KlogError('producer closed while sending');
      this.append(targets[i]!, payloads[i]!, headers?.[i], call, i);
    }
    const results = acked ? ((await acked) as SendResult<M>[]) : targets.map((t) => t.meta);
    // With audit every record has a header (stamping is on); the counter skips the audit topic.
    if (this.audit) for (let i = 0; i < targets.length; i++) this.audit.count(targets[i]!.meta.topic, headers![i]!.timestamp!);
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
      for (const b of this.brokers.values()) stopLinger(b);
      for (const w of this.roomWaiters.splice(0)) w();
      await Promise.all([...this.brokers.values()].map((b) => b.connection.close()));
      await Promise.allSettled([...this.closing]);
    }
  }

  /** The header of each record with stampMetadata, else undefined (checking that no record has a timestamp). */
  private headersOf(records: readonly RecordFields[]): MessageHeader[] | undefined {
    if (!this.stampMetadata) {
      const i = records.findIndex((r) => r.timestamp !== undefined || r.host !== undefined);
      if (i >= 0) throw new RangeError(`record ${i}: a timestamp or host is stored only with stampMetadata`);
      return undefined;
    }
    const now = Date.now();
    return records.map((r, i) => {
      const key = r.key === undefined ? undefined : toBuffer(r.key);
      if (key !== undefined && key.length > maxHeaderFieldBytes) throw new RangeError(`record ${i}: key of ${key.length} bytes is over ${maxHeaderFieldBytes}`);
      const timestamp = r.timestamp ?? now;
      if (!Number.isSafeInteger(timestamp)) throw new RangeError(`record ${i}: timestamp ${timestamp} must be an integer (ms since the epoch)`);
      const host = r.host ?? this.metadataHost;
      if (r.host !== undefined && Buffer.byteLength(host, 'utf8') > maxHeaderFieldBytes) throw new RangeError(`record ${i}: host of over ${maxHeaderFieldBytes} bytes`);
      return key === undefined ? { timestamp, host } : { key, timestamp, host };
    });
  }

  private append(target: PartitionTarget<PartitionMeta>, payload: Buffer, header: MessageHeader | undefined, call: SendCall | undefined, index: number): void {
    // Every PooledBroker is a BrokerState made by broker().
    const b = target.broker as BrokerState;
    if (this.sendsAlone && b.batchedMessages === 0) {
      this.sendAlone(b, target, payload, header);
      return;
    }
    let batch = b.lastTarget === target ? b.lastBatch : undefined;
    if (batch === undefined) {
      const key = `${target.meta.topic}\0${target.brokerPartition}`;
      batch = b.batches.get(key);
      if (!batch) {
        batch = {
          topic: target.meta.topic,
          partition: target.brokerPartition,
          meta: target.meta,
          payloads: [],
          headers: undefined,
          bytes: 0,
          placements: [],
        };
        b.batches.set(key, batch);
        b.batchList.push(batch);
      }
      b.lastTarget = target;
      b.lastBatch = batch;
    }
    const size = header === undefined ? messageSizeInBytes(payload.length) : entrySizeInBytes({ value: payload, header });
    if (call) batch.placements.push({ call, index, position: batch.bytes, size });
    if (header !== undefined) (batch.headers ??= new Array<MessageHeader | undefined>(batch.payloads.length)).push(header);
    else batch.headers?.push(undefined);
    batch.payloads.push(payload);
    batch.bytes += size;
    if (b.batchedMessages++ === 0) b.oldestBatchedAt = Date.now();
    this.inFlightBytes += size;
    // A retired broker gets no linger: its batch goes (and fails) at once.
    if (b.retired || b.batchedMessages >= this.batchSize) this.sendBatches(b);
    else if (!b.lingerTimer) b.lingerTimer = setTimeout(() => this.lingerUp(b), this.lingerMs);
  }

  /**
   * Sends one message as a request of its own, straight into the connection's outgoing slab:
   * what {@link sendBatches} does for a batch of one message, without the batch, its arrays
   * and the request's blocks, which at one request per message cost more than the request.
   * Only when nothing is batched for the broker (so requests keep the order of their records).
   */
  private sendAlone(b: BrokerState, target: PartitionTarget<PartitionMeta>, payload: Buffer, header: MessageHeader | undefined): void {
    const size = header === undefined ? messageSizeInBytes(payload.length) : entrySizeInBytes({ value: payload, header });
    this.inFlightBytes += size;
    this.requestsInFlight++;
    b.requestsInFlight++;
    const c = b.connection;
    let frame: Buffer | undefined;
    let at = 0;
    let bytes: number;
    try {
      const topic = target.meta.topic;
      bytes = singleSetMultiProduceRequestBytes(topic, size, this.topicNames);
      // Written in place in the connection's slab: a Buffer per frame would cost more than most frames' bytes.
      if (bytes <= maxSlabFrameBytes) {
        at = c.reserveFrame(bytes);
        writeMultiProduceMessageRequest(c.frameSlab, at, topic, target.brokerPartition, payload, header, size);
      } else {
        frame = c.allocFrame(bytes);
        writeMultiProduceMessageRequest(frame, 0, topic, target.brokerPartition, payload, header, size);
      }
    } catch (err) {
      // As in sendPlain: the record was checked before; a failure here is a bug, reported as the request's.
      this.failed(b, noBatches, err as Error);
      queueMicrotask(() => this.settled(b, size));
      return;
    }
    // One callback for every message sent alone, not a closure each: the connection calls
    // back its frames in the order they were queued, so the oldest size is this frame's.
    b.aloneBytes.push(size);
    if (frame === undefined) c.sendReservedFrame(at, bytes, b.aloneWritten);
    else c.sendFrame(frame, b.aloneWritten);
  }

  /**
   * A message sent alone is written, or failed. When the connection fails, the frames it had
   * not yet handed to the socket are called back before those it had, so their sizes may be
   * settled against one another: the same total, once every frame is called back.
   */
  private aloneWritten(b: BrokerState, err: Error | undefined): void {
    if (err) this.failed(b, noBatches, err);
    this.settled(b, b.aloneBytes.shift());
  }

  /** The linger timer fired: send what waited lingerMs, or wait for the rest of it (see BrokerState.lingerTimer). */
  private lingerUp(b: BrokerState): void {
    b.lingerTimer = undefined;
    if (b.batchedMessages === 0) return;
    const waitMs = b.oldestBatchedAt + this.lingerMs - Date.now();
    if (waitMs > 0) b.lingerTimer = setTimeout(() => this.lingerUp(b), waitMs);
    else this.sendBatches(b);
  }

  /** Sends the broker's batches, one request per at most 32767 partitions. */
  private sendBatches(broker: BrokerState): void {
    if (broker.batchList.length === 0) return;
    const batches = broker.batchList;
    broker.batchList = [];
    broker.batches.clear();
    broker.lastTarget = undefined;
    broker.lastBatch = undefined;
    broker.batchedMessages = 0;
    if (batches.length <= maxPartitionsPerRequest) this.sendRequest(broker, batches);
    else for (let i = 0; i < batches.length; i += maxPartitionsPerRequest) this.sendRequest(broker, batches.slice(i, i + maxPartitionsPerRequest));
  }

  private sendRequest(broker: BrokerState, batches: PartitionBatch[]): void {
    let bytes = 0;
    for (const b of batches) bytes += b.bytes;
    this.requestsInFlight++;
    broker.requestsInFlight++;
    if (this.codec === 0) {
      this.sendPlain(broker, batches, bytes);
      return;
    }
    const settled = (): void => this.settled(broker, bytes);
    const sets: PartitionMessages[] = batches.map((b) => ({
      topic: b.topic,
      partition: b.partition,
      messages:
        b.headers === undefined ? encodeMessageSet(b.payloads) : encodeMessageSetWithHeaders(b.payloads.map((value, i) => ({ value, header: b.headers![i] }))),
    }));
    // Compress in parallel, write in order: each request is written once the one before it is.
    const ready = Promise.all(sets.map(async (s) => ({ ...s, messages: await gzipMessageSet(s.messages) })));
    const issued = broker.writeChain.then(() => ready).then((r) => ({ done: this.write(broker, batches, r, true) }));
    broker.writeChain = issued.then(
      () => undefined,
      () => undefined,
    );
    issued.then((r) => r.done).then(settled, (e: Error) => {
      this.failed(broker, batches, e);
      settled();
    });
  }

  /**
   * Writes an uncompressed request straight into the connection's outgoing slab: the
   * payloads go from the batches (which are the request's blocks) into the frame (see the file
   * comment). Settles the request's `bytes` once it is written (acks 0) or answered (acks
   * 1-2), failed or not.
   */
  private sendPlain(broker: BrokerState, batches: PartitionBatch[], bytes: number): void {
    let frame: Buffer;
    try {
      const setBytes: number[] = [];
      if (this.acks === 0) {
        frame = broker.connection.allocFrame(multiProduceRequestBytes(batches, setBytes));
        writeMultiProduceRequest(frame, 0, batches, setBytes);
      } else {
        frame = broker.connection.allocFrame(produceAckRequestBytes(batches, setBytes));
        writeProduceAckRequest(frame, 0, this.acks, batches, setBytes);
      }
    } catch (err) {
      // Records were checked before they were batched; this is a bug, reported where the records are.
      this.failed(broker, batches, err as Error);
      queueMicrotask(() => this.settled(broker, bytes));
      return;
    }
    if (this.acks === 0) {
      broker.connection.sendFrame(frame, (err) => {
        if (err) this.failed(broker, batches, err);
        this.settled(broker, bytes);
      });
      return;
    }
    this.acknowledged(broker, batches, broker.connection.request(frame)).then(
      () => this.settled(broker, bytes),
      (e: Error) => {
        this.failed(broker, batches, e);
        this.settled(broker, bytes);
      },
    );
  }

  /** Writes a request of ready message sets (compressed ones); resolves once written (acks 0) or answered and settled (acks 1-2). */
  private write(broker: BrokerState, batches: PartitionBatch[], ready: PartitionMessages[], compressed: boolean): Promise<void> {
    const setBytes: number[] = [];
    if (this.acks === 0) {
      const frame = broker.connection.allocFrame(multiProduceRequestBytes(ready, setBytes));
      writeMultiProduceRequest(frame, 0, ready, setBytes);
      return broker.connection.send(frame);
    }
    const frame = broker.connection.allocFrame(produceAckRequestBytes(ready, setBytes));
    writeProduceAckRequest(frame, 0, this.acks, ready, setBytes);
    return this.acknowledged(broker, batches, broker.connection.request(frame), compressed);
  }

  /** Settles the send() calls of an acknowledged request's records from its response. */
  private async acknowledged(broker: BrokerState, batches: PartitionBatch[], response: ReturnType<Connection['request']>, compressed = false): Promise<void> {
    const res = await response;
    settleAcks(broker.address, batches, compressed, res.errorCode, () => decodeProduceAckResponse(res.body));
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
    for (const b of batches) for (const p of b.placements) failCall(p.call, e);
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

/** The batches of a request that has none (a message sent alone): with acks 0, failed() reads no batch. */
const noBatches: readonly PartitionBatch[] = [];

/** A first-in first-out queue of numbers in a ring that doubles when full: no object per entry. */
class SizeQueue {
  private ring = new Float64Array(64);
  private head = 0;
  private count = 0;

  push(n: number): void {
    if (this.count === this.ring.length) {
      const next = new Float64Array(this.ring.length * 2);
      next.set(this.ring.subarray(this.head));
      next.set(this.ring.subarray(0, this.head), this.ring.length - this.head);
      this.ring = next;
      this.head = 0;
    }
    this.ring[(this.head + this.count) & (this.ring.length - 1)] = n;
    this.count++;
  }

  /** The oldest number, removed; 0 when empty. */
  shift(): number {
    if (this.count === 0) return 0;
    const n = this.ring[this.head]!;
    this.head = (this.head + 1) & (this.ring.length - 1);
    this.count--;
    return n;
  }
}

/** Resolves (or rejects) the send() calls of an acknowledged request's records. */
function settleAcks(
  address: string,
  batches: readonly PartitionBatch[],
  compressed: boolean,
  errorCode: number,
  decode: () => ReturnType<typeof decodeProduceAckResponse>,
): void {
  if (errorCode !== ErrorCode.None) {
    for (const b of batches) {
      const e = new KlogBrokerError(errorCode, { topic: b.topic, partition: b.meta.partition, broker: address }, 'produce rejected');
      for (const p of b.placements) failCall(p.call, e);
    }
    return;
  }
  let results;
  try {
    results = decode();
  } catch (err) {
    const e = new KlogBrokerError(ErrorCode.Unknown, { broker: address }, `undecodable produce acknowledgement: ${(err as Error).message}`);
    for (const b of batches) for (const p of b.placements) failCall(p.call, e);
    return;
  }
  const byPartition = new Map(results.map((r) => [`${r.topic}\0${r.partition}`, r]));
  for (const b of batches) {
    const r = byPartition.get(`${b.topic}\0${b.partition}`);
    const where = { topic: b.topic, partition: b.meta.partition, broker: address };
    if (!r || r.errorCode !== ErrorCode.None) {
      const e = r
        ? new KlogBrokerError(r.errorCode, where, 'produce rejected')
        : new KlogBrokerError(ErrorCode.Unknown, where, 'acknowledgement does not name the partition');
      for (const p of b.placements) failCall(p.call, e);
      continue;
    }
    b.placements.forEach((p, i) => {
      if (p.call.settled) return;
      // A wrapper's records all sit at its offset; only the last one moves past it (see the file comment).
      const offset = compressed ? r.offset : r.offset + p.position;
      const nextOffset = compressed ? (i === b.placements.length - 1 ? r.nextOffset : r.offset) : offset + p.size;
      p.call.results[p.index] = { ...b.meta, offset, nextOffset };
      if (--p.call.remaining === 0) {
        p.call.settled = true;
        p.call.resolve(p.call.results);
      }
    });
  }
}

function failCall(call: SendCall, e: Error): void {
  if (call.settled) return;
  call.settled = true;
  call.reject(e);
}

/** Disarms a broker's linger timer (nothing is batched for it, or nothing will be sent). */
function stopLinger(b: BrokerState): void {
  if (b.lingerTimer) clearTimeout(b.lingerTimer);
  b.lingerTimer = undefined;
}

/** Resolves once `o` has no request in flight. */
function whenIdle(o: { requestsInFlight: number; idleWaiters: Array<() => void> }): Promise<void> {
  if (o.requestsInFlight === 0) return Promise.resolve();
  return new Promise((resolve) => o.idleWaiters.push(resolve));
}

/** A payload or key as bytes: a string is its UTF-8. */
export function toBuffer(v: Buffer | string): Buffer {
  return typeof v === 'string' ? Buffer.from(v, 'utf8') : v;
}
