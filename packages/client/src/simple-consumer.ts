/**
 * The simple consumer (SPEC §3): fetches from one broker by `(topic, partition, offset,
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
 */
import {
  CompressionCodec,
  decodeFetchResponse,
  decompressWrapper,
  decodeOffsetsResponse,
  encodeFetchRequest,
  encodeOffsetsRequest,
  ErrorCode,
  hasHeaderAttribute,
  iterateInnerMessageSet,
  iterateMessageSet,
  lengthFieldBytes,
  type Message,
  messageCodec,
  OffsetTime,
  ProtocolError,
  readMessageHeader,
  validateTopic,
} from '@klog/protocol';
import { Connection } from './connection.js';
import { DecompressedTooLargeError, KlogBrokerError, MessageTooLargeError, OffsetOutOfRangeError } from './errors.js';
import { sleep } from './sleep.js';

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
  /**
   * Most bytes one fetch may decompress (its gzip message sets together), the guard against
   * decompression bombs. A fetch stops before a wrapper that would go over it (the next fetch
   * starts there); a single wrapper larger than it is a {@link DecompressedTooLargeError}.
   * Default 4 × maxFetchBytes.
   */
  readonly maxDecompressedBytes?: number;
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
  /** Byte offset of the message in its partition (of its wrapper, for a message of a compressed set). */
  readonly offset: number;
  /**
   * Where to resume to get every message after this one: `offset + 4 + length`; for a message of
   * a compressed set, the wrapper's offset, or the wrapper's end for its last message.
   */
  readonly nextOffset: number;
  /** The application's bytes (the value; any metadata header split off): a view on the received or decompressed bytes, not a copy. */
  readonly payload: Buffer;
  /** The key stored in the message's metadata header, if any. */
  readonly key?: Buffer;
  /** The creation time (ms since the epoch) stored in the message's metadata header, if any. */
  readonly timestamp?: number;
  /** The producing host stored in the message's metadata header, if any. */
  readonly host?: string;
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

/** Fetches from one broker. Fine to share across callers; close it when done. */
export class SimpleConsumer {
  /** `host:port` of the broker. */
  readonly broker: string;
  /** The largest fetch this consumer makes, in bytes. */
  readonly maxFetchBytes: number;
  /** Most bytes one fetch decompresses. */
  readonly maxDecompressedBytes: number;
  private readonly connection: Connection;

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
  }

  /**
   * One FETCH request (SPEC §3).
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
    const res = await this.connection.request(encodeFetchRequest({ topic, partition, offset, maxBytes, maxWaitMs }), maxWaitMs);
    const where = { topic, partition, offset, broker: this.broker };
    const decoded = decodeFetchResponse(res.errorCode, res.body);
    if (decoded.errorCode === ErrorCode.OffsetOutOfRange) throw new OffsetOutOfRangeError(where, decoded.earliest, decoded.end);
    if (decoded.errorCode !== ErrorCode.None) throw new KlogBrokerError(decoded.errorCode, where);

    const set = decoded.messages;
    const messages: ConsumedMessage[] = [];
    let nextOffset = offset;
    /** Decompressed bytes left for this fetch. */
    let budget = this.maxDecompressedBytes;
    /** True when the fetch stopped before a wrapper that would go over the budget. */
    let overBudget = false;
    /** Messages of the whole messages decoded so far: what stays when the next turns out invalid. */
    let whole = 0;
    try {
      for (const m of iterateMessageSet(set, offset)) {
        const { message } = m;
        if ((message.attributes & (hasHeaderAttribute | CompressionCodec.Gzip | CompressionCodec.Snappy)) === 0) {
          messages.push({ offset: m.offset, nextOffset: m.nextOffset, payload: message.payload });
        } else if (messageCodec(message) === CompressionCodec.None) {
          messages.push(consumed(m.offset, m.nextOffset, message));
        } else {
          const inner = await decompressWrapper(message, budget);
          if (inner === undefined) {
            // Over the budget: stop before this wrapper, unless it is the first (then it can never be read).
            overBudget = messages.length > 0 || nextOffset > offset;
            if (overBudget) break;
            throw new DecompressedTooLargeError(topic, partition, m.offset, this.maxDecompressedBytes);
          }
          budget -= inner.length;
          let last: ConsumedMessage | undefined;
          for (const im of iterateInnerMessageSet(inner)) {
            if (last) messages.push(last);
            last = consumed(m.offset, m.offset, im);
          }
          if (last) messages.push({ ...last, nextOffset: m.nextOffset });
        }
        nextOffset = m.nextOffset;
        whole = messages.length;
      }
    } catch (e) {
      if (!(e instanceof ProtocolError)) throw e;
      // The valid messages before the invalid one are delivered; the next fetch, from the
      // invalid one, reports it.
      messages.length = whole;
      if (nextOffset > offset) return { messages, nextOffset, bytes: nextOffset - offset };
      throw new KlogBrokerError(ErrorCode.InvalidMessage, { ...where, offset: nextOffset }, `received an invalid message, not delivered: ${e.message}`);
    }
    const rest = nextOffset - offset;
    if (!overBudget && set.length - rest >= lengthFieldBytes) {
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
      if (r.nextOffset > offset) {
        // Only compressed sets with no message inside: nothing to hand out, move past them.
        offset = r.nextOffset;
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

/** A received message with its metadata header split off. @throws ProtocolError (InvalidMessage) for a bad header */
function consumed(offset: number, nextOffset: number, message: Pick<Message, 'attributes' | 'payload'>): ConsumedMessage {
  const { header, value } = readMessageHeader(message);
  if (header === undefined) return { offset, nextOffset, payload: value };
  return { offset, nextOffset, payload: value, ...header };
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
