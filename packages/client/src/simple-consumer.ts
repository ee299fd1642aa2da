/**
 * The simple consumer (SPEC §3): fetches from one broker by `(topic, partition, offset,
 * maxBytes)`, as in the paper; the consumer, not the broker, keeps track of its offset.
 *
 * Offsets are byte positions: a message at `offset` is followed by the message at
 * `offset + 4 + length`. A fetch returns the whole messages of the set the broker sent and drops
 * a trailing partial one; {@link SimpleConsumer.messages} follows the log, long-polls at its end,
 * and grows its fetch size when the next message is larger than it.
 */
import {
  decodeFetchResponse,
  decodeOffsetsResponse,
  encodeFetchRequest,
  encodeOffsetsRequest,
  ErrorCode,
  iterateMessageSet,
  lengthFieldBytes,
  OffsetTime,
  ProtocolError,
  validateTopic,
} from '@klog/protocol';
import { Connection } from './connection.js';
import { KlogBrokerError, MessageTooLargeError, OffsetOutOfRangeError } from './errors.js';

/** Options of a {@link SimpleConsumer}. */
export interface SimpleConsumerOptions {
  readonly host: string;
  readonly port: number;
  /** The largest fetch this consumer makes, in bytes; a message larger than this cannot be read. Default 16 MiB. */
  readonly maxFetchBytes?: number;
  /** Most ms to wait for a response, beyond any long-poll wait. Default 30,000. */
  readonly requestTimeoutMs?: number;
  /** Most ms to wait for a connection to open. Default 10,000. */
  readonly connectTimeoutMs?: number;
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

/** One message received. */
export interface ConsumedMessage {
  /** Byte offset of the message in its partition. */
  readonly offset: number;
  /** Byte offset of the next message: `offset + 4 + length`. */
  readonly nextOffset: number;
  /** The message body: a view on the received bytes, not a copy. */
  readonly payload: Buffer;
}

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
}

/** Default cap on one fetch, in bytes. */
export const defaultMaxFetchBytes = 16 * 1024 * 1024;
/** Default bytes per fetch of the iterators. */
export const defaultFetchBytes = 1024 * 1024;
/** Default long-poll wait of the iterators, in ms. */
export const defaultMaxWaitMs = 1000;
/** Default longest idle back-off of the iterators, in ms. */
export const defaultMaxIdleBackoffMs = 1000;
/** First idle back-off of the iterators, in ms. */
const minIdleBackoffMs = 10;

/** Fetches from one broker. Fine to share across callers; close it when done. */
export class SimpleConsumer {
  /** `host:port` of the broker. */
  readonly broker: string;
  /** The largest fetch this consumer makes, in bytes. */
  readonly maxFetchBytes: number;
  private readonly connection: Connection;

  /** @throws RangeError when maxFetchBytes is not a positive integer */
  constructor(options: SimpleConsumerOptions) {
    this.maxFetchBytes = options.maxFetchBytes ?? defaultMaxFetchBytes;
    if (!Number.isInteger(this.maxFetchBytes) || this.maxFetchBytes < 1 || this.maxFetchBytes > 0x7fffffff) {
      throw new RangeError(`maxFetchBytes ${this.maxFetchBytes} must be an integer in 1..2^31-1`);
    }
    this.connection = new Connection({
      host: options.host,
      port: options.port,
      requestTimeoutMs: options.requestTimeoutMs,
      connectTimeoutMs: options.connectTimeoutMs,
      maxResponseBytes: this.maxFetchBytes + 64,
    });
    this.broker = this.connection.address;
  }

  /**
   * One FETCH request (SPEC §3).
   * @returns the whole messages received and the offset to fetch next
   * @throws RangeError for maxBytes outside 1..maxFetchBytes or a negative offset;
   *   OffsetOutOfRangeError (with earliest and end) for an offset outside the partition;
   *   KlogBrokerError for any other error code, including InvalidMessageOffset (8) for an offset
   *   inside a message and InvalidMessage (2) for a message that fails its checks here;
   *   KlogConnectionError when the broker cannot be reached or does not answer in time
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
    const res = await this.connection.request(encodeFetchRequest({ topic, partition, offset, maxBytes, maxWaitMs }), maxWaitMs);
    const where = { topic, partition, offset, broker: this.broker };
    const decoded = decodeFetchResponse(res.errorCode, res.body);
    if (decoded.errorCode === ErrorCode.OffsetOutOfRange) throw new OffsetOutOfRangeError(where, decoded.earliest, decoded.end);
    if (decoded.errorCode !== ErrorCode.None) throw new KlogBrokerError(decoded.errorCode, where);

    const set = decoded.messages;
    const messages: ConsumedMessage[] = [];
    let nextOffset = offset;
    try {
      for (const m of iterateMessageSet(set, offset)) {
        messages.push({ offset: m.offset, nextOffset: m.nextOffset, payload: m.message.payload });
        nextOffset = m.nextOffset;
      }
    } catch (e) {
      if (!(e instanceof ProtocolError)) throw e;
      throw new KlogBrokerError(ErrorCode.InvalidMessage, { ...where, offset: nextOffset }, `received an invalid message, not delivered: ${e.message}`);
    }
    const rest = nextOffset - offset;
    if (set.length - rest >= lengthFieldBytes) {
      return { messages, nextOffset, bytes: set.length, partialMessageBytes: lengthFieldBytes + set.readInt32BE(rest) };
    }
    return { messages, nextOffset, bytes: set.length };
  }

  /**
   * An OFFSETS request: up to `maxOffsets` segment start offsets written before `time`, newest
   * first (SPEC §3, as Kafka 0.7).
   * @param time ms since the epoch, or −1 (OffsetTime.Latest: the log end) or −2 (OffsetTime.Earliest)
   * @throws KlogBrokerError for an error code, KlogConnectionError when the broker cannot be reached
   */
  async offsetsBefore(topic: string, partition: number, time: number, maxOffsets = 1): Promise<number[]> {
    validateTopic(topic);
    const res = await this.connection.request(encodeOffsetsRequest({ topic, partition, time, maxOffsets }));
    if (res.errorCode !== ErrorCode.None) throw new KlogBrokerError(res.errorCode, { topic, partition, broker: this.broker });
    return decodeOffsetsResponse(res.body);
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
   * which suits callers that write them out in bulk.
   */
  async *messageBatches(options: MessagesOptions): AsyncGenerator<ConsumedMessage[], void, undefined> {
    const { topic, partition, signal } = options;
    const fetchBytes = Math.min(options.fetchBytes ?? defaultFetchBytes, this.maxFetchBytes);
    const maxWaitMs = options.maxWaitMs ?? defaultMaxWaitMs;
    const maxIdleBackoffMs = options.maxIdleBackoffMs ?? defaultMaxIdleBackoffMs;
    let offset = options.offset;
    let size = fetchBytes;
    let backoffMs = 0;
    while (!signal?.aborted) {
      const started = Date.now();
      const r = await untilAborted(this.fetch({ topic, partition, offset, maxBytes: size, maxWaitMs }), signal);
      if (r === undefined) return;
      if (r.messages.length > 0) {
        offset = r.nextOffset;
        size = fetchBytes;
        backoffMs = 0;
        yield r.messages;
        continue;
      }
      // No whole message: either the next one is larger than the fetch size, or there is nothing new.
      const needed = r.partialMessageBytes ?? (r.bytes > 0 ? size + 1 : 0);
      if (needed > size) {
        if (size >= this.maxFetchBytes) throw new MessageTooLargeError(topic, partition, offset, needed, this.maxFetchBytes);
        while (size < needed && size < this.maxFetchBytes) size = Math.min(size * 2, this.maxFetchBytes);
        continue;
      }
      if (Date.now() - started < maxWaitMs || maxWaitMs === 0) {
        backoffMs = Math.min(Math.max(backoffMs * 2, minIdleBackoffMs), maxIdleBackoffMs);
        if (!(await sleep(backoffMs, signal))) return;
      }
    }
  }

  /** Closes the connection; requests in progress fail with KlogConnectionError. */
  async close(): Promise<void> {
    await this.connection.close();
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
        else reject(e as Error);
      },
    );
  });
}

/** Sleeps `ms`; resolves false early when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
