/**
 * The simple consumer (docs/design.md §3): fetches from one broker by `(topic, partition, offset,
 * maxBytes)`, as in the paper; the consumer, not the broker, keeps track of its offset.
 *
 * Offsets are byte positions: a message at `offset` is followed by the message at
 * `offset + 4 + length`. A fetch returns the whole messages of the set the broker sent and drops
 * a trailing partial one; {@link SimpleConsumer.messages} follows the log, long-polls at its end,
 * and grows its fetch size when the next message is larger than it.
 *
 * Messages are handed out as the application wrote them (docs/format.md §2a-§2b): a metadata
 * header is split off into `key`, `timestamp` and `host`, and a gzip wrapper is decompressed
 * into its inner messages. Every inner message has the wrapper's offset; its `nextOffset` is
 * the wrapper's offset too, except for the last inner message, whose `nextOffset` is the
 * wrapper's end. Resuming from a `nextOffset` therefore never skips a message: after a part of
 * a wrapper it starts at the wrapper again and hands out the whole of it (at-least-once).
 * Decompression is capped by `maxDecompressedBytes` per fetch, against decompression bombs.
 *
 * The fast path: a fetch's message set is read by the protocol's one message-set walker
 * (`readMessageSet`): one pass over its headers and one CRC pass over its bytes, and each
 * message's payload is a view on the received buffer, not a copy. {@link SimpleConsumer.messageBatches} keeps up to
 * `prefetch` fetches ready ahead of the batch the caller is working through: the next fetch is
 * on its way while the caller works.
 */
import {
  decodeFetchResponse,
  decodeMetadataResponse,
  decodeOffsetsResponse,
  encodeFetchRequest,
  encodeMetadataRequest,
  encodeOffsetsRequest,
  ErrorCode,
  type LogMessage,
  OffsetTime,
  readMessageSet,
  validateTopic,
} from '@klog/protocol';
import type { Logger } from '@klog/logger';
import { Connection } from './connection.js';
import { LeaderConnections } from './leader-connections.js';
import type { LeaderRetryOptions } from './leader-retry.js';
import { DecompressedTooLargeError, KlogBrokerError, MessageTooLargeError, OffsetOutOfRangeError, UnknownTopicError } from './errors.js';
import { sleep } from './sleep.js';
import { Backoff } from '@klog/retry';

/**
 * Options of a {@link SimpleConsumer}. On a replicated topic (docs/replication.md §13) its
 * requests go to each partition's leader, retried across leader changes within `retryTimeoutMs`
 * and `maxRetries`.
 */
export interface SimpleConsumerOptions extends LeaderRetryOptions {
  readonly host: string;
  readonly port: number;
  /** The largest fetch this consumer makes, in bytes; a message larger than this cannot be read. Default 16 MiB. */
  readonly maxFetchBytes?: number;
  /** Most ms to wait for a response, beyond any long-poll wait. Default 30,000. */
  readonly requestTimeoutMs?: number;
  /** Most ms to wait for a connection to open. Default 10,000. */
  readonly connectTimeoutMs?: number;
  /**
   * Most bytes one fetch may decompress (its gzip message sets together), the guard against
   * decompression bombs. A fetch stops before a wrapper that would go over it (the next fetch
   * starts there); a single wrapper larger than it is a {@link DecompressedTooLargeError}.
   * Default 4 × maxFetchBytes.
   */
  readonly maxDecompressedBytes?: number;
  /** Hears of leader changes ridden through on replicated topics (one warn line each). */
  readonly logger?: Logger;
}

/** A fetch of `(topic, partition, offset, maxBytes)`. */
export interface FetchOptions {
  readonly topic: string;
  readonly partition: number;
  /** Byte offset of the first message wanted; must be a message boundary in `[earliest, end]`. */
  readonly offset: number;
  /** Most bytes of message set to receive, 1..maxFetchBytes. */
  readonly maxBytes: number;
  /** (klog long poll) Most ms the broker may wait for data when `offset` is the log end. Default 0: answer at once. */
  readonly maxWaitMs?: number;
}

/** One message received: offset, next offset, value and metadata, as the message-set iterator reads it (docs/format.md §2a-§2b). */
export type ConsumedMessage = LogMessage;

/** What a fetch returned. */
export interface FetchResult {
  /** The whole messages received, in log order. */
  readonly messages: ConsumedMessage[];
  /** Offset to fetch next: after the last whole message, or the requested offset when there is none. */
  readonly nextOffset: number;
  /** Bytes of message set received (whole messages and any trailing partial one). */
  readonly bytes: number;
  /**
   * Size in bytes (length field included) of the trailing partial message that was dropped,
   * when the response ended inside one and its length field was received.
   */
  readonly partialMessageBytes?: number;
}

/** Options of {@link SimpleConsumer.messages} and {@link SimpleConsumer.messageBatches}. */
export interface MessagesOptions {
  readonly topic: string;
  readonly partition: number;
  /** Byte offset to start at (a message boundary). */
  readonly offset: number;
  /** Bytes per fetch; grown (doubling, up to maxFetchBytes) for one larger message, then back. Default 1 MiB. */
  readonly fetchBytes?: number;
  /** Long-poll wait per fetch at the log end, in ms. Default 1000. 0 polls, backing off while idle. */
  readonly maxWaitMs?: number;
  /** Longest sleep between fetches while idle when the broker answers empty at once, in ms. Default 1000. */
  readonly maxIdleBackoffMs?: number;
  /** Ends the iteration (without an error) when aborted. */
  readonly signal?: AbortSignal;
  /**
   * Fetches kept ready ahead of the batch the caller is working through ({@link
   * SimpleConsumer.messageBatches}) while the partition has more than a fetch's worth of data
   * (the last fetch came back full): at most this many fetched responses wait, so at most
   * `prefetch + 1` fetched buffers (each up to the fetch size) are held at once, the one being
   * handed out included. Near the log end, and with 0, a fetch is made only when the caller asks
   * for the next batch, so no long poll waits ahead on the connection. Default 1.
   */
  readonly prefetch?: number;
}

/** Default cap on one fetch, in bytes. */
export const defaultMaxFetchBytes = 16 * 1024 * 1024;
/** Default maxDecompressedBytes, as a multiple of maxFetchBytes. */
export const defaultDecompressedBytesPerFetchByte = 4;
/** Default bytes per fetch of the iterators. */
export const defaultFetchBytes = 1024 * 1024;
/** Default long-poll wait of the iterators, in ms. */
export const defaultMaxWaitMs = 1000;
/** Default longest idle back-off of the iterators, in ms. */
export const defaultMaxIdleBackoffMs = 1000;
/** First idle back-off of the iterators, in ms. */
const minIdleBackoffMs = 10;
/** Default fetches kept ready by the iterators. */
export const defaultPrefetch = 1;

/** Fetches from one broker. Fine to share across callers; close it when done. */
export class SimpleConsumer {
  /** `host:port` of the broker. */
  readonly broker: string;
  /** The largest fetch this consumer makes, in bytes. */
  readonly maxFetchBytes: number;
  /** Most bytes one fetch decompresses. */
  readonly maxDecompressedBytes: number;
  private readonly connection: Connection;
  /** Requests of replicated partitions go to their leaders (leader-connections.ts). */
  private readonly leaders: LeaderConnections;

  /** @throws RangeError when maxFetchBytes or maxDecompressedBytes is not a positive integer */
  constructor(options: SimpleConsumerOptions) {
    this.maxFetchBytes = options.maxFetchBytes ?? defaultMaxFetchBytes;
    if (!Number.isInteger(this.maxFetchBytes) || this.maxFetchBytes < 1 || this.maxFetchBytes > 0x7fffffff) {
      throw new RangeError(`maxFetchBytes ${this.maxFetchBytes} must be an integer in 1..2^31-1`);
    }
    this.maxDecompressedBytes = options.maxDecompressedBytes ?? defaultDecompressedBytesPerFetchByte * this.maxFetchBytes;
    if (!Number.isSafeInteger(this.maxDecompressedBytes) || this.maxDecompressedBytes < 1) {
      throw new RangeError(`maxDecompressedBytes ${this.maxDecompressedBytes} must be a positive integer`);
    }
    this.connection = new Connection({
      host: options.host,
      port: options.port,
      requestTimeoutMs: options.requestTimeoutMs,
      connectTimeoutMs: options.connectTimeoutMs,
      maxResponseBytes: this.maxFetchBytes + 64,
    });
    this.broker = this.connection.address;
    this.leaders = new LeaderConnections(this.connection, { ...options, maxResponseBytes: this.maxFetchBytes + 64 });
  }

  /** Retries of requests to replicated topics so far, every code together (docs/replication.md §13.2). */
  get leaderRetries(): number {
    return this.leaders.retries;
  }

  /** {@link leaderRetries} by the code each followed (−1: a lost connection); `describeRetries` words it. */
  get retriesByCode(): ReadonlyMap<number, number> {
    return this.leaders.retriesByCode;
  }

  /**
   * One FETCH request (docs/design.md §3).
   * @returns the whole messages received and the offset to fetch next
   * @throws RangeError for maxBytes outside 1..maxFetchBytes or a negative offset;
   *   OffsetOutOfRangeError (with earliest and end) for an offset outside the partition;
   *   KlogBrokerError for any other error code, including InvalidMessageOffset (8) for an offset
   *   inside a message and InvalidMessage (2) for a message that fails its checks here (length,
   *   magic, CRC, metadata header, a compressed set that does not decompress or holds an invalid
   *   message, an unsupported codec); DecompressedTooLargeError when the first compressed set
   *   decompresses to more than maxDecompressedBytes; KlogConnectionError when the broker
   *   cannot be reached or does not answer in time
   */
  async fetch(f: FetchOptions): Promise<FetchResult> {
    const { topic, partition, offset, maxBytes } = f;
    const maxWaitMs = f.maxWaitMs ?? 0;
    validateTopic(topic);
    if (!Number.isInteger(maxBytes) || maxBytes < 1 || maxBytes > this.maxFetchBytes) {
      throw new RangeError(`fetch size ${maxBytes} must be an integer in 1..${this.maxFetchBytes} (maxFetchBytes)`);
    }
    if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`offset ${offset} must be a non-negative integer`);
    if (!Number.isInteger(partition) || partition < 0) throw new RangeError(`partition ${partition} must be a non-negative integer`);
    const frame = encodeFetchRequest({ topic, partition, offset, maxBytes, maxWaitMs });
    const { decoded, where } = await this.leaders.run(topic, partition, async (c) => {
      const res = await c.request(frame, maxWaitMs);
      const at = { topic, partition, offset, broker: c.address };
      const d = decodeFetchResponse(res.errorCode, res.body);
      if (d.errorCode === ErrorCode.OffsetOutOfRange) throw new OffsetOutOfRangeError(at, d.earliest, d.end);
      if (d.errorCode !== ErrorCode.None) throw new KlogBrokerError(d.errorCode, at);
      return { decoded: d, where: at };
    });

    const read = await readMessageSet(decoded.messages, { baseOffset: offset, maxDecompressedBytes: this.maxDecompressedBytes });
    const { messages, nextOffset, stop } = read;
    const bytes = decoded.messages.length;
    if (stop === undefined) return { messages, nextOffset, bytes };
    if (stop.kind === 'partial') return stop.size === undefined ? { messages, nextOffset, bytes } : { messages, nextOffset, bytes, partialMessageBytes: stop.size };
    if (stop.kind === 'overBudget') {
      // Stop before this wrapper, unless it is the first (then it can never be read).
      if (nextOffset > offset) return { messages, nextOffset, bytes };
      throw new DecompressedTooLargeError(topic, partition, stop.offset, this.maxDecompressedBytes);
    }
    // The valid messages before the invalid one are delivered; the next fetch, from the
    // invalid one, reports it.
    if (nextOffset > offset) return { messages, nextOffset, bytes: nextOffset - offset };
    throw new KlogBrokerError(ErrorCode.InvalidMessage, where, `received an invalid message, not delivered: invalid message at offset ${stop.offset}: ${stop.reason}`);
  }

  /**
   * A {@link fetch} that returns at least one whole message whenever the partition has one at
   * `offset`: while the next message is larger than the fetch size, the size is doubled (up to
   * maxFetchBytes) and the fetch made again (docs/design.md §3). The one place a fetch size grows.
   * @returns the fetch's result and the fetch size that got it (`maxBytes`); `messages` is empty
   *   only when there is nothing new at `offset` (or only compressed sets with no message inside:
   *   then `nextOffset` is past them)
   * @throws MessageTooLargeError when the next message is larger than maxFetchBytes, and what
   *   {@link fetch} throws
   */
  async fetchWhole(f: FetchOptions): Promise<FetchResult & { readonly maxBytes: number }> {
    let size = f.maxBytes;
    for (;;) {
      const r = await this.fetch({ ...f, maxBytes: size });
      if (r.messages.length > 0 || r.nextOffset > f.offset) return { ...r, maxBytes: size };
      const needed = r.partialMessageBytes ?? (r.bytes > 0 ? size + 1 : 0);
      if (needed <= size) return { ...r, maxBytes: size };
      if (size >= this.maxFetchBytes) throw new MessageTooLargeError(f.topic, f.partition, f.offset, needed, this.maxFetchBytes);
      while (size < needed && size < this.maxFetchBytes) size = Math.min(size * 2, this.maxFetchBytes);
    }
  }

  /**
   * An OFFSETS request: up to `maxOffsets` segment start offsets written before `time`, newest
   * first (docs/design.md §3, as Kafka 0.7).
   * @param time ms since the epoch, or −1 (OffsetTime.Latest: the log end) or −2 (OffsetTime.Earliest)
   * @throws KlogBrokerError for an error code, KlogConnectionError when the broker cannot be reached
   */
  async offsetsBefore(topic: string, partition: number, time: number, maxOffsets = 1): Promise<number[]> {
    validateTopic(topic);
    const frame = encodeOffsetsRequest({ topic, partition, time, maxOffsets });
    return this.leaders.run(topic, partition, async (c) => {
      const res = await c.request(frame);
      if (res.errorCode !== ErrorCode.None) throw new KlogBrokerError(res.errorCode, { topic, partition, broker: c.address });
      return decodeOffsetsResponse(res.body);
    });
  }

  /**
   * The topics the broker holds, with their partition counts (a METADATA listing, docs/format.md
   * §12); creates none.
   * @throws KlogBrokerError for an error code, KlogConnectionError when the broker cannot be reached
   */
  async topics(): Promise<Map<string, number>> {
    const res = await this.connection.request(encodeMetadataRequest([]));
    if (res.errorCode !== ErrorCode.None) throw new KlogBrokerError(res.errorCode, { broker: this.broker }, 'topic listing failed');
    return new Map(decodeMetadataResponse(res.body).map((t) => [t.topic, t.partitions]));
  }

  /**
   * Checks that the broker holds `partition` of `topic` (fetches and OFFSETS answer a missing one
   * as empty), or that `topic` is replicated with that partition (docs/replication.md §13.1).
   * @throws UnknownTopicError naming the topics (or partitions) it has; as {@link topics}
   */
  async checkPartition(topic: string, partition: number): Promise<void> {
    const topics = await this.topics();
    const count = topics.get(topic) ?? (await this.leaders.replicatedPartitionCount(topic));
    const where = `on broker ${this.broker}`;
    if (count === undefined) throw new UnknownTopicError(topic, [...topics.keys()].sort(), undefined, where);
    if (partition >= count) throw new UnknownTopicError(topic, [...topics.keys()].sort(), { asked: String(partition), count }, where);
  }

  /** The partition's earliest offset (the start of its oldest segment). @throws as offsetsBefore */
  async earliestOffset(topic: string, partition: number): Promise<number> {
    return (await this.offsetsBefore(topic, partition, OffsetTime.Earliest, 1))[0] ?? 0;
  }

  /** The partition's end offset: where the next message will be, and the end of what fetches can see. @throws as offsetsBefore */
  async latestOffset(topic: string, partition: number): Promise<number> {
    return (await this.offsetsBefore(topic, partition, OffsetTime.Latest, 1))[0] ?? 0;
  }

  /**
   * Follows a partition from `offset`, yielding every message in order, waiting for new ones at
   * the log end (long poll, or a growing back-off up to maxIdleBackoffMs when the broker answers
   * empty at once). It never fetches in a tight loop and never skips a message: when the next
   * message is larger than the fetch size it doubles the fetch size (up to maxFetchBytes) and
   * fetches it again. Ends when `signal` aborts.
   * @throws MessageTooLargeError when the next message is larger than maxFetchBytes, and what
   *   {@link fetch} throws (OffsetOutOfRangeError, KlogBrokerError, KlogConnectionError)
   */
  async *messages(options: MessagesOptions): AsyncGenerator<ConsumedMessage, void, undefined> {
    for await (const batch of this.messageBatches(options)) yield* batch;
  }

  /**
   * As {@link messages}, but yields the messages of each fetch together (never an empty batch),
   * which suits callers that write them out in bulk. While the log is ahead, up to `prefetch`
   * fetches (default 1) are made ahead of the batch the caller is working through, so at most
   * `prefetch + 1` fetched buffers are held (see {@link MessagesOptions.prefetch}); an error of
   * a fetch ahead is thrown once the batches before it have been handed out.
   * @throws RangeError for a prefetch that is not an integer ≥ 0, and what {@link messages} throws
   */
  async *messageBatches(options: MessagesOptions): AsyncGenerator<ConsumedMessage[], void, undefined> {
    const prefetch = options.prefetch ?? defaultPrefetch;
    if (!Number.isInteger(prefetch) || prefetch < 0) throw new RangeError(`prefetch ${prefetch} must be an integer ≥ 0`);
    if (prefetch === 0) {
      yield* this.fetchBatches(options, options.signal);
      return;
    }
    const stop = new AbortController();
    const signal = options.signal === undefined ? stop.signal : AbortSignal.any([options.signal, stop.signal]);
    const ahead = new FetchQueue(prefetch);
    const last = { full: false };
    const batches = this.fetchBatches(options, signal, last);
    void (async () => {
      while (await ahead.room(signal, last.full)) {
        const r = await batches.next();
        if (r.done) return;
        ahead.put(r.value);
      }
      await batches.return(undefined);
    })().then(
      () => ahead.end(),
      (e: unknown) => ahead.fail(e),
    );
    try {
      for (;;) {
        const batch = await ahead.take();
        if (batch === undefined || options.signal?.aborted) return;
        yield batch;
      }
    } finally {
      stop.abort(); // the fetch loop ends; a fetch in flight is left to finish on its own
    }
  }

  /**
   * The fetch loop of {@link messageBatches}, one fetch per batch asked for. Before each batch
   * it sets `last.full`: whether the fetch that made it came back with all the bytes asked for
   * (so the log likely goes on past it).
   */
  private async *fetchBatches(
    options: MessagesOptions,
    signal: AbortSignal | undefined,
    last?: { full: boolean },
  ): AsyncGenerator<ConsumedMessage[], void, undefined> {
    const { topic, partition } = options;
    const fetchBytes = Math.min(options.fetchBytes ?? defaultFetchBytes, this.maxFetchBytes);
    const maxWaitMs = options.maxWaitMs ?? defaultMaxWaitMs;
    const maxIdleBackoffMs = options.maxIdleBackoffMs ?? defaultMaxIdleBackoffMs;
    let offset = options.offset;
    const idleBackoff = new Backoff({ initialMs: Math.min(minIdleBackoffMs, maxIdleBackoffMs), maxMs: maxIdleBackoffMs, jitter: 0 });
    while (!signal?.aborted) {
      const started = Date.now();
      const r = await untilAborted(this.fetchWhole({ topic, partition, offset, maxBytes: fetchBytes, maxWaitMs }), signal);
      if (r === undefined) return;
      if (r.messages.length > 0) {
        if (last) last.full = r.bytes >= r.maxBytes;
        offset = r.nextOffset;
        idleBackoff.reset();
        yield r.messages;
        continue;
      }
      if (r.nextOffset > offset) {
        // Only compressed sets with no message inside: nothing to hand out, move past them.
        offset = r.nextOffset;
        continue;
      }
      // Nothing new at the log end.
      if (Date.now() - started < maxWaitMs || maxWaitMs === 0) {
        if (!(await sleep(idleBackoff.next(), signal))) return;
      }
    }
  }

  /** Closes the connections; requests in progress fail with KlogConnectionError. */
  async close(): Promise<void> {
    await this.leaders.close();
    await this.connection.close();
  }
}

/**
 * The batches fetched ahead of the caller of {@link SimpleConsumer.messageBatches}: the fetch
 * loop waits for {@link room} before each fetch, so at most `capacity` batches are queued or
 * being fetched at once; then the end, or the error that stopped the loop.
 */
class FetchQueue {
  private readonly batches: ConsumedMessage[][] = [];
  private ended = false;
  private error: { readonly value: unknown } | undefined;
  /** The caller waiting for a batch, and the fetch loop waiting for room. */
  private taker: (() => void) | undefined;
  private roomWaiter: (() => void) | undefined;

  constructor(private readonly capacity: number) {}

  /**
   * Resolves true once the loop may fetch, false once `signal` aborts: ahead (`eager`) once
   * fewer than `capacity` batches are queued, otherwise once none is and the caller waits for one.
   */
  async room(signal: AbortSignal, eager: boolean): Promise<boolean> {
    while (!signal.aborted && (eager ? this.batches.length >= this.capacity : this.batches.length > 0 || this.taker === undefined)) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          signal.removeEventListener('abort', done);
          this.roomWaiter = undefined;
          resolve();
        };
        this.roomWaiter = done;
        signal.addEventListener('abort', done, { once: true });
      });
    }
    return !signal.aborted;
  }

  put(batch: ConsumedMessage[]): void {
    this.batches.push(batch);
    this.wakeTaker();
  }

  end(): void {
    this.ended = true;
    this.wakeTaker();
  }

  fail(error: unknown): void {
    this.error = { value: error };
    this.wakeTaker();
  }

  /** The next batch; undefined once the loop has ended; throws the loop's error after the batches before it. */
  async take(): Promise<ConsumedMessage[] | undefined> {
    for (;;) {
      const batch = this.batches.shift();
      if (batch !== undefined) {
        this.roomWaiter?.();
        return batch;
      }
      if (this.error !== undefined) throw this.error.value;
      if (this.ended) return undefined;
      const waiting = new Promise<void>((resolve) => (this.taker = resolve));
      this.roomWaiter?.(); // a loop that waits for the caller to ask may fetch now
      await waiting;
    }
  }

  private wakeTaker(): void {
    const t = this.taker;
    this.taker = undefined;
    t?.();
  }
}

/** Resolves with what `p` resolves to, or with undefined once `signal` aborts (a later failure of `p` is then ignored). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal | undefined): Promise<T | undefined> {
  if (!signal) return p;
  if (signal.aborted) {
    p.catch(() => {});
    return Promise.resolve(undefined);
  }
  return new Promise<T | undefined>((resolve, reject) => {
    const onAbort = (): void => {
      p.catch(() => {});
      resolve(undefined);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        if (signal.aborted) resolve(undefined);
        else reject(e);
      },
    );
  });
}
