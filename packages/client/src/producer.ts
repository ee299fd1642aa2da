/**
 * The producer (SPEC §5): sends records to the partitions of a topic over a static broker list,
 * batching them by count and by linger time into one message set per partition and one request
 * per broker.
 *
 * The partitions of a topic are numbered over the broker list: for each broker in list order,
 * its partitions of the topic (its METADATA answer), so with brokers A (2 partitions) and B (3),
 * partitions 0-1 are A's 0-1 and partitions 2-4 are B's 0-2.
 *
 * Acknowledgements (`acks`): 0 sends MULTIPRODUCE requests, which get no response, as in the
 * paper; 1 and 2 send PRODUCE_ACK requests, answered once the broker appended the messages (1)
 * or appended and flushed them (2), and report each record's offset.
 */
import {
  type AckLevelValue,
  decodeMetadataResponse,
  decodeProduceAckResponse,
  encodeMessageSet,
  encodeMetadataRequest,
  encodeMultiProduceRequest,
  encodeProduceAckRequest,
  ErrorCode,
  messageSizeInBytes,
  type PartitionMessages,
  validateTopic,
} from '@klog/protocol';
import { Connection } from './connection.js';
import { KlogBrokerError, KlogError } from './errors.js';
import { hashPartitioner, type Partitioner, randomPartition } from './partitioner.js';

/** One record to send. */
export interface ProducerRecord {
  /** The message payload; a string is sent as its UTF-8 bytes. */
  readonly value: Buffer | string;
  /** Chooses the partition through the producer's partitioner when `partition` is absent. Not stored in the message. */
  readonly key?: Buffer | string;
  /** The partition (0..N-1 over the broker list) to send to; overrides `key`. */
  readonly partition?: number;
}

/** Where a record went. */
export interface RecordMetadata {
  readonly topic: string;
  /** Partition number over the broker list (0..N-1). */
  readonly partition: number;
  /** Byte offset of the message in its partition; only with acks 1 or 2. */
  readonly offset?: number;
  /** Byte offset of the message after it (`offset + 4 + length`); only with acks 1 or 2. */
  readonly nextOffset?: number;
}

/** 0: fire-and-forget (no response); 1: answered once appended; 2: answered once appended and flushed. */
export type Acks = 0 | 1 | 2;

/** The subset of a pino logger the client uses. */
export interface Logger {
  debug(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

/** Options of a {@link Producer}. */
export interface ProducerOptions {
  /** Brokers as `host:port,host:port` or an array of `host:port`. Their order numbers the partitions. */
  readonly brokerList: string | readonly string[];
  /** Messages per broker that trigger sending its batch at once. Default 200. */
  readonly batchSize?: number;
  /** Most ms a message waits in a batch before the batch is sent. Default 5. */
  readonly lingerMs?: number;
  /** Acknowledgement level, see {@link Acks}. Default 0. */
  readonly acks?: Acks;
  /** Picks the partition of a record with a key and no partition. Default {@link hashPartitioner}. */
  readonly partitioner?: Partitioner;
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
  readonly logger?: Logger;
}

/** Default messages per batch. */
export const defaultBatchSize = 200;
/** Default linger time in ms. */
export const defaultLingerMs = 5;
/** Default bound on bytes batched or in flight. */
export const defaultMaxInFlightBytes = 32 * 1024 * 1024;
/** Most partitions in one MULTIPRODUCE or PRODUCE_ACK request (an int16 count). */
const maxPartitionsPerRequest = 32767;

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

/** One send() call waiting for its acknowledgements. */
interface SendCall {
  readonly results: RecordMetadata[];
  remaining: number;
  settled: boolean;
  readonly resolve: (r: RecordMetadata[]) => void;
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

/** The messages batched for one partition of one broker. */
interface PartitionBatch {
  readonly topic: string;
  /** Partition number on the broker. */
  readonly brokerPartition: number;
  /** Partition number over the broker list. */
  readonly partition: number;
  readonly payloads: Buffer[];
  /** Encoded bytes of `payloads`. */
  bytes: number;
  readonly placements: Placement[];
}

interface Broker {
  readonly address: string;
  readonly connection: Connection;
  /** Batches by `topic\0brokerPartition`. */
  batches: Map<string, PartitionBatch>;
  /** Messages in `batches`. */
  batchedMessages: number;
  /** Sends `batches` when the linger time is up; set while batches is not empty. */
  lingerTimer: NodeJS.Timeout | undefined;
}

/** A partition over the broker list: which broker, and its number there. */
interface PartitionRef {
  readonly broker: Broker;
  readonly brokerPartition: number;
}

/**
 * Sends records to a topic's partitions (SPEC §5). Share one Producer per process; close it when done.
 *
 * ```ts
 * const producer = new Producer({ brokerList: 'localhost:9092', acks: 1 });
 * const [meta] = await producer.send('events', [{ value: 'hello', key: 'user-1' }]);
 * await producer.close();
 * ```
 */
export class Producer {
  private readonly brokers: Broker[];
  private readonly batchSize: number;
  private readonly lingerMs: number;
  private readonly acks: Acks;
  private readonly partitioner: Partitioner;
  private readonly maxInFlightBytes: number;
  private readonly logger: Logger | undefined;

  /** Partitions of each topic asked for so far, in order over the broker list. */
  private readonly topics = new Map<string, Promise<PartitionRef[]>>();
  /** Bytes batched or in flight (see maxInFlightBytes). */
  private inFlightBytes = 0;
  /** Callers of send() waiting for inFlightBytes to drop. */
  private roomWaiters: Array<() => void> = [];
  /** Requests written and not yet settled. */
  private readonly outstanding = new Set<Promise<void>>();
  /** A failure of a fire-and-forget send, reported by the next send() or flush(). */
  private asyncError: Error | undefined;
  private closed = false;

  /** @throws KlogError when the broker list is empty or malformed, RangeError for a bad batchSize, lingerMs, acks or maxInFlightBytes */
  constructor(options: ProducerOptions) {
    this.brokers = parseBrokerList(options.brokerList).map(({ host, port }) => ({
      address: `${host}:${port}`,
      connection: new Connection({ host, port, requestTimeoutMs: options.requestTimeoutMs, connectTimeoutMs: options.connectTimeoutMs }),
      batches: new Map(),
      batchedMessages: 0,
      lingerTimer: undefined,
    }));
    this.batchSize = options.batchSize ?? defaultBatchSize;
    this.lingerMs = options.lingerMs ?? defaultLingerMs;
    this.acks = options.acks ?? 0;
    this.partitioner = options.partitioner ?? hashPartitioner;
    this.maxInFlightBytes = options.maxInFlightBytes ?? defaultMaxInFlightBytes;
    this.logger = options.logger;
    if (!Number.isInteger(this.batchSize) || this.batchSize < 1) throw new RangeError(`batchSize ${this.batchSize} must be an integer ≥ 1`);
    if (!Number.isFinite(this.lingerMs) || this.lingerMs < 0) throw new RangeError(`lingerMs ${this.lingerMs} must be ≥ 0`);
    if (this.acks !== 0 && this.acks !== 1 && this.acks !== 2) throw new RangeError(`acks ${String(this.acks)} must be 0, 1 or 2`);
    if (!(this.maxInFlightBytes > 0)) throw new RangeError(`maxInFlightBytes ${this.maxInFlightBytes} must be > 0`);
  }

  /**
   * The number of partitions of `topic` over the broker list (asking each broker with a
   * METADATA request the first time; brokers create topics they do not know).
   * @throws KlogConnectionError when a broker cannot be reached, KlogBrokerError when one answers with an error
   */
  async partitionCount(topic: string): Promise<number> {
    return (await this.partitionsOf(topic)).length;
  }

  /**
   * Adds records to the batches of their partitions. With acks 0 resolves once every record is
   * in a batch (waiting first while {@link ProducerOptions.maxInFlightBytes} are batched or in
   * flight); with acks 1 or 2 resolves once every record is acknowledged, with its offset.
   * Records sent to one partition keep their order.
   * @returns one RecordMetadata per record, in the order given
   * @throws ProtocolError (InvalidTopic) for a bad topic name; RangeError for a partition outside
   *   0..N-1; KlogConnectionError or KlogBrokerError from the metadata request, from an
   *   acknowledgement (acks 1-2), or (acks 0) a failure of an earlier fire-and-forget request
   */
  async send(topic: string, records: readonly ProducerRecord[]): Promise<RecordMetadata[]> {
    if (this.closed) throw new KlogError('producer is closed');
    this.throwAsyncError();
    validateTopic(topic);
    const partitions = await this.partitionsOf(topic);
    const n = partitions.length;
    const chosen = records.map((r, i) => {
      if (r.partition !== undefined) {
        if (!Number.isInteger(r.partition) || r.partition < 0 || r.partition >= n) {
          throw new RangeError(`record ${i}: partition ${r.partition} of topic ${topic} is outside 0..${n - 1}`);
        }
        return r.partition;
      }
      if (r.key !== undefined) return this.partitioner(toBuffer(r.key), n);
      return randomPartition(n);
    });

    let call: SendCall | undefined;
    let acked: Promise<RecordMetadata[]> | undefined;
    if (this.acks !== 0 && records.length > 0) {
      acked = new Promise<RecordMetadata[]>((resolve, reject) => {
        call = { results: new Array<RecordMetadata>(records.length), remaining: records.length, settled: false, resolve, reject };
      });
    }
    for (let i = 0; i < records.length; i++) {
      while (this.inFlightBytes >= this.maxInFlightBytes) await this.waitForRoom();
      if (this.closed) throw new KlogError('producer closed while sending');
      const partition = chosen[i]!;
      this.append(topic, partition, partitions[partition]!, toBuffer(records[i]!.value), call, i);
    }
    if (acked) return acked;
    return chosen.map((partition) => ({ topic, partition }));
  }

  /**
   * Sends every batch now and waits until every request is written (acks 0) or acknowledged (acks 1-2).
   * @throws the first failure of a fire-and-forget request since the last send or flush
   *   (KlogConnectionError); failures of acknowledged requests reject their send() instead
   */
  async flush(): Promise<void> {
    for (const b of this.brokers) this.sendBatches(b);
    while (this.outstanding.size > 0) await Promise.allSettled([...this.outstanding]);
    this.throwAsyncError();
  }

  /**
   * Sends what is batched, waits for it as {@link flush} does, and closes the connections.
   * Later sends throw. Safe to call twice.
   * @throws what flush throws (the connections are closed all the same)
   */
  async close(): Promise<void> {
    if (this.closed) return;
    try {
      await this.flush();
    } finally {
      this.closed = true;
      for (const w of this.roomWaiters.splice(0)) w();
      await Promise.all(this.brokers.map((b) => b.connection.close()));
    }
  }

  private throwAsyncError(): void {
    const e = this.asyncError;
    if (e) {
      this.asyncError = undefined;
      throw e;
    }
  }

  private partitionsOf(topic: string): Promise<PartitionRef[]> {
    let p = this.topics.get(topic);
    if (!p) {
      p = this.fetchPartitions(topic);
      this.topics.set(topic, p);
      // A failure is not cached: the next send asks again.
      p.catch(() => this.topics.delete(topic));
    }
    return p;
  }

  private async fetchPartitions(topic: string): Promise<PartitionRef[]> {
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
    const refs: PartitionRef[] = [];
    counts.forEach((count, i) => {
      for (let p = 0; p < count; p++) refs.push({ broker: this.brokers[i]!, brokerPartition: p });
    });
    if (refs.length === 0) throw new KlogError(`topic ${topic} has no partitions on any broker of the list`);
    this.logger?.debug({ topic, partitions: refs.length, perBroker: counts }, 'topic partitions');
    return refs;
  }

  private append(topic: string, partition: number, ref: PartitionRef, payload: Buffer, call: SendCall | undefined, index: number): void {
    const broker = ref.broker;
    const key = `${topic}\0${ref.brokerPartition}`;
    let batch = broker.batches.get(key);
    if (!batch) {
      batch = { topic, brokerPartition: ref.brokerPartition, partition, payloads: [], bytes: 0, placements: [] };
      broker.batches.set(key, batch);
    }
    const size = messageSizeInBytes(payload.length);
    if (call) batch.placements.push({ call, index, position: batch.bytes, size });
    batch.payloads.push(payload);
    batch.bytes += size;
    broker.batchedMessages++;
    this.inFlightBytes += size;
    if (broker.batchedMessages >= this.batchSize) this.sendBatches(broker);
    else if (!broker.lingerTimer) broker.lingerTimer = setTimeout(() => this.sendBatches(broker), this.lingerMs);
  }

  /** Sends the broker's batches, one request per at most 32767 partitions. */
  private sendBatches(broker: Broker): void {
    if (broker.lingerTimer) clearTimeout(broker.lingerTimer);
    broker.lingerTimer = undefined;
    if (broker.batches.size === 0) return;
    const batches = [...broker.batches.values()];
    broker.batches = new Map();
    broker.batchedMessages = 0;
    for (let i = 0; i < batches.length; i += maxPartitionsPerRequest) {
      this.sendRequest(broker, batches.slice(i, i + maxPartitionsPerRequest));
    }
  }

  private sendRequest(broker: Broker, batches: PartitionBatch[]): void {
    const sets: PartitionMessages[] = batches.map((b) => ({
      topic: b.topic,
      partition: b.brokerPartition,
      messages: encodeMessageSet(b.payloads),
    }));
    const bytes = batches.reduce((n, b) => n + b.bytes, 0);
    const done =
      this.acks === 0
        ? broker.connection.send(encodeMultiProduceRequest(sets)).catch((e: Error) => {
            this.logger?.warn({ broker: broker.address, err: e.message }, 'produce request failed');
            this.asyncError ??= e;
          })
        : broker.connection
            .request(encodeProduceAckRequest({ acks: this.acks as AckLevelValue, partitions: sets }))
            .then((res) => settleAcks(broker.address, batches, res.errorCode, () => decodeProduceAckResponse(res.body)))
            .catch((e: Error) => {
              for (const b of batches) for (const p of b.placements) failCall(p.call, e);
            });
    const tracked = done.finally(() => {
      this.outstanding.delete(tracked);
      this.release(bytes);
    });
    this.outstanding.add(tracked);
  }

  private waitForRoom(): Promise<void> {
    // Batched bytes count as in flight: send them so that room can appear.
    for (const b of this.brokers) this.sendBatches(b);
    return new Promise((resolve) => this.roomWaiters.push(resolve));
  }

  private release(bytes: number): void {
    this.inFlightBytes -= bytes;
    if (this.inFlightBytes < this.maxInFlightBytes) for (const w of this.roomWaiters.splice(0)) w();
  }
}

/** Resolves (or rejects) the send() calls of an acknowledged request's records. */
function settleAcks(
  address: string,
  batches: readonly PartitionBatch[],
  errorCode: number,
  decode: () => ReturnType<typeof decodeProduceAckResponse>,
): void {
  if (errorCode !== ErrorCode.None) {
    for (const b of batches) {
      const e = new KlogBrokerError(errorCode, { topic: b.topic, partition: b.partition, broker: address }, 'produce rejected');
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
    const r = byPartition.get(`${b.topic}\0${b.brokerPartition}`);
    const where = { topic: b.topic, partition: b.partition, broker: address };
    if (!r || r.errorCode !== ErrorCode.None) {
      const e = r
        ? new KlogBrokerError(r.errorCode, where, 'produce rejected')
        : new KlogBrokerError(ErrorCode.Unknown, where, 'acknowledgement does not name the partition');
      for (const p of b.placements) failCall(p.call, e);
      continue;
    }
    for (const p of b.placements) {
      if (p.call.settled) continue;
      const offset = r.offset + p.position;
      p.call.results[p.index] = { topic: b.topic, partition: b.partition, offset, nextOffset: offset + p.size };
      if (--p.call.remaining === 0) {
        p.call.settled = true;
        p.call.resolve(p.call.results);
      }
    }
  }
}

function failCall(call: SendCall, e: Error): void {
  if (call.settled) return;
  call.settled = true;
  call.reject(e);
}

function toBuffer(v: Buffer | string): Buffer {
  return typeof v === 'string' ? Buffer.from(v, 'utf8') : v;
}
