/**
 * The streams a group consumer hands to the application (the paper §3.2, docs/design.md §4): one bounded
 * queue of fetched chunks per stream, read by an async iterator that never ends on its own.
 *
 * A chunk is the messages of one fetch of one partition. Fetchers put chunks in and wait while
 * the queue is full (back-pressure); the iterator takes messages out one by one, and taking a
 * message is what consumes it: the partition's consumed offset becomes the message's
 * `nextOffset` at that moment (Kafka 0.7: a message is consumed when the iterator returns it).
 * That consumed offset is what the group consumer commits.
 */
import type { ConsumedMessage } from '../simple-consumer.js';

/**
 * One message received by a group consumer: the message as fetched (offsets, payload view,
 * metadata) and where it came from. Its `nextOffset` is what is committed once it is consumed,
 * so a commit never passes a compressed set not wholly handed out.
 */
export interface GroupMessage extends ConsumedMessage {
  readonly topic: string;
  /** Id of the broker that holds the partition; −1 for a replicated topic (docs/replication.md §14). */
  readonly brokerId: number;
  /** Partition number on that broker, or the replicated topic's partition `0..N-1`. */
  readonly partition: number;
}

/**
 * A stream of messages of one topic (docs/design.md §4). Its iterators wait for new messages and end only
 * when the consumer is closed; they throw when the consumer fails (a rebalance that ran out of
 * retries, a message larger than `maxFetchBytes`, a compressed set larger than `maxDecompressedBytes`). Several iterators over one stream share its
 * messages (each message goes to one of them).
 */
export type MessageStream = AsyncIterable<GroupMessage>;

/**
 * What the consumer knows of one partition it owns. `consumedOffset` is the offset after the
 * last message handed to the application (undefined until the start offset is known).
 */
export interface PartitionTopicInfo {
  readonly topic: string;
  /** The broker holding the partition; −1 for a replicated topic's (config.ts, `replicatedBrokerId`). */
  readonly brokerId: number;
  readonly partition: number;
  /**
   * A replicated partition: the broker its fetcher asks first (its leader at the rebalance, else
   * a live broker); the fetcher then follows the leader (docs/replication.md §14).
   */
  readonly fetchFrom?: number;
  /** The stream this partition feeds. */
  readonly queue: MessageQueue;
  /** Next offset to hand out: after the last message returned by an iterator. */
  consumedOffset: number | undefined;
  /** The offset last committed to ZooKeeper by this consumer (undefined: none yet). */
  committedOffset: number | undefined;
}

/** A fetched chunk: consecutive messages of one partition. */
interface Chunk {
  readonly info: PartitionTopicInfo;
  readonly messages: readonly ConsumedMessage[];
  /** Index of the next message to hand out. */
  next: number;
}

type Waiter = { resolve: (r: IteratorResult<GroupMessage>) => void; reject: (e: unknown) => void };

/** Default most chunks a stream queues before its fetchers wait (Kafka 0.7's `queuedchunks.max`). */
export const defaultQueuedChunksMax = 10;

/** The bounded queue behind one {@link MessageStream}. */
export class MessageQueue implements MessageStream {
  private chunks: Chunk[] = [];
  /** Iterators waiting for a message. */
  private readonly takers: Waiter[] = [];
  /** Fetchers waiting for room. */
  private roomWaiters: Array<() => void> = [];
  private ended = false;
  private error: unknown;

  /**
   * @param maxChunks most chunks queued before {@link put} waits (≥ 1)
   * @param mayHandOut whether messages may be handed out now (the consumer certainly still
   *   owns its partitions); while false, iterators wait
   */
  constructor(
    readonly topic: string,
    readonly index: number,
    private readonly maxChunks: number = defaultQueuedChunksMax,
    private readonly mayHandOut: () => boolean = () => true,
  ) {}

  /** Chunks queued now. */
  get size(): number {
    return this.chunks.length;
  }

  /**
   * Queues the messages of one fetch of `info`'s partition, waiting while the queue is full.
   * Resolves false (and queues nothing) when `signal` aborts first or the stream has ended.
   */
  async put(info: PartitionTopicInfo, messages: readonly ConsumedMessage[], signal: AbortSignal): Promise<boolean> {
    while (this.chunks.length >= this.maxChunks && !signal.aborted && !this.ended) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          signal.removeEventListener('abort', done);
          resolve();
        };
        this.roomWaiters.push(done);
        signal.addEventListener('abort', done, { once: true });
      });
    }
    if (signal.aborted || this.ended || messages.length === 0) return false;
    this.chunks.push({ info, messages, next: 0 });
    this.serve();
    return true;
  }

  /** Drops every queued message of the given partitions (all when `infos` is undefined); they were not handed out. */
  clear(infos?: ReadonlySet<PartitionTopicInfo>): void {
    this.chunks = infos === undefined ? [] : this.chunks.filter((c) => !infos.has(c.info));
    this.wakeRoom();
  }

  /** Ends the stream: waiting and later iterator calls finish (done). Queued messages are dropped. */
  end(): void {
    this.ended = true;
    this.chunks = [];
    this.wakeRoom();
    for (const t of this.takers.splice(0)) t.resolve({ done: true, value: undefined });
  }

  /** Fails the stream: waiting and later iterator calls throw `error`. */
  fail(error: unknown): void {
    if (this.ended || this.error !== undefined) return;
    this.error = error;
    this.chunks = [];
    this.wakeRoom();
    for (const t of this.takers.splice(0)) t.reject(error);
  }

  [Symbol.asyncIterator](): AsyncIterator<GroupMessage> {
    return {
      next: () => this.take(),
      return: async () => ({ done: true, value: undefined }),
    };
  }

  private take(): Promise<IteratorResult<GroupMessage>> {
    // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- what fail() was given, as is
    if (this.error !== undefined) return Promise.reject(this.error);
    if (this.ended) return Promise.resolve({ done: true, value: undefined });
    const m = this.takers.length === 0 && this.mayHandOut() ? this.shift() : undefined;
    if (m) return Promise.resolve({ done: false, value: m });
    return new Promise((resolve, reject) => {
      this.takers.push({ resolve, reject });
    });
  }

  /** Hands queued messages to waiting iterators. */
  private serve(): void {
    while (this.takers.length > 0 && this.mayHandOut()) {
      const m = this.shift();
      if (!m) return;
      this.takers.shift()!.resolve({ done: false, value: m });
    }
  }

  /** Takes the next message and marks it consumed; undefined when the queue is empty. */
  private shift(): GroupMessage | undefined {
    const chunk = this.chunks[0];
    if (!chunk) return undefined;
    const m = chunk.messages[chunk.next++]!;
    if (chunk.next >= chunk.messages.length) {
      this.chunks.shift();
      this.wakeRoom();
    }
    const { info } = chunk;
    info.consumedOffset = m.nextOffset;
    const g: GroupMessage = {
      topic: info.topic,
      brokerId: info.brokerId,
      partition: info.partition,
      offset: m.offset,
      nextOffset: m.nextOffset,
      payload: m.payload,
    };
    if (m.key === undefined && m.timestamp === undefined && m.host === undefined) return g;
    return {
      ...g,
      ...(m.key !== undefined && { key: m.key }),
      ...(m.timestamp !== undefined && { timestamp: m.timestamp }),
      ...(m.host !== undefined && { host: m.host }),
    };
  }

  private wakeRoom(): void {
    const waiters = this.roomWaiters;
    this.roomWaiters = [];
    for (const w of waiters) w();
  }
}
