/**
 * The fetcher of a group consumer (the paper §3.2, SPEC §3-§4): one per broker, pulling the
 * partitions the consumer owns on that broker into their streams' queues.
 *
 * Each owned partition is followed with long-poll FETCH requests on a connection of its own: a
 * broker answers the requests of one connection in order, so a long poll on one partition
 * would otherwise hold back the others. A partition fetches only when its stream's queue has
 * room (back-pressure). A broker that cannot be reached is retried with a growing delay, so its
 * partitions pause until it returns (or until a rebalance moves them). OffsetOutOfRange applies
 * the `autoOffsetReset` policy once, with a warning; a second one in a row pauses the partition
 * until the next rebalance instead of looping.
 */
import type { Logger } from '@klog/logger';
import { DecompressedTooLargeError, KlogConnectionError, MessageTooLargeError, OffsetOutOfRangeError } from '../errors.js';
import { SimpleConsumer } from '../simple-consumer.js';
import type { PartitionTopicInfo } from './message-stream.js';
import { sleep } from '../sleep.js';
import { type OffsetReset, resetOffset, resetOffsetWithin } from './offset-reset.js';
import { Backoff } from '@klog/retry';


/** Settings of a {@link BrokerFetcher}. */
export interface FetcherOptions {
  /** Bytes per fetch; grown for one larger message up to `maxFetchBytes`. */
  readonly fetchBytes: number;
  /** Largest fetch, in bytes. */
  readonly maxFetchBytes: number;
  /** Most bytes one fetch decompresses. */
  readonly maxDecompressedBytes: number;
  /** Long-poll wait per fetch at the log end, in ms. */
  readonly maxWaitMs: number;
  readonly autoOffsetReset: OffsetReset;
  readonly logger: Logger;
  /** Called with an error the application must see (a message larger than maxFetchBytes, a compressed set over maxDecompressedBytes). */
  readonly onFatal: (info: PartitionTopicInfo, error: Error) => void;
  /** Called when OffsetOutOfRange moved a partition's fetch position (see {@link OffsetResetEvent}). */
  readonly onOffsetReset?: ((event: OffsetResetEvent) => void) | undefined;
}

/**
 * A fetch position that OffsetOutOfRange moved: `from` was outside the partition's
 * `[earliest, end]` (deleted by retention when below `earliest`) and fetching goes on at `to`
 * (undefined when the broker did not say; the fetcher then asks for the reset offset).
 */
export interface OffsetResetEvent {
  readonly topic: string;
  readonly brokerId: number;
  readonly partition: number;
  readonly from: number;
  readonly to: number | undefined;
  readonly earliest: number | undefined;
  readonly end: number | undefined;
}

/** Delays between fetch retries, in ms: from 100, doubling, at most 2000, jittered. */
const fetchRetryBackoff = { initialMs: 100, maxMs: 2000 } as const;

/** Fetches the owned partitions of one broker until stopped. */
export class BrokerFetcher {
  private readonly abort = new AbortController();
  private readonly consumers: SimpleConsumer[] = [];
  private running: Promise<void> | undefined;

  constructor(
    readonly broker: { readonly id: number; readonly host: string; readonly port: number },
    readonly partitions: readonly PartitionTopicInfo[],
    private readonly options: FetcherOptions,
  ) {}

  /** Starts one fetch loop per partition. */
  start(): void {
    this.running = Promise.all(this.partitions.map((p) => this.follow(p))).then(() => undefined);
  }

  /** Stops fetching at once: no chunk is queued after this returns. The promise resolves when the loops are over and the connections closed. */
  stop(): Promise<void> {
    this.abort.abort();
    const closing = this.consumers.map((c) => c.close().catch(() => {}));
    return Promise.all([this.running, ...closing]).then(() => undefined);
  }

  private async follow(info: PartitionTopicInfo): Promise<void> {
    const { signal } = this.abort;
    const { logger } = this.options;
    const where = { topic: info.topic, brokerId: info.brokerId, partition: info.partition };
    const consumer = new SimpleConsumer({
      host: this.broker.host,
      port: this.broker.port,
      maxFetchBytes: this.options.maxFetchBytes,
      maxDecompressedBytes: this.options.maxDecompressedBytes,
    });
    this.consumers.push(consumer);
    if (signal.aborted) return void consumer.close().catch(() => {});
    const retryBackoff = new Backoff(fetchRetryBackoff);
    /** Where the next fetch starts; undefined until the reset policy gave a start. */
    let fetchOffset = info.consumedOffset;
    /** True after an OffsetOutOfRange reset until a fetch succeeds. */
    let justReset = false;
    while (!signal.aborted) {
      try {
        if (fetchOffset === undefined) {
          fetchOffset = await this.resetOffset(consumer, info);
          info.consumedOffset ??= fetchOffset;
          logger.info({ ...where, offset: fetchOffset, policy: this.options.autoOffsetReset }, 'no valid committed offset; starting from the reset policy');
        }
        const batches = consumer.messageBatches({
          topic: info.topic,
          partition: info.partition,
          offset: fetchOffset,
          fetchBytes: this.options.fetchBytes,
          maxWaitMs: this.options.maxWaitMs,
          signal,
        });
        for await (const batch of batches) {
          justReset = false;
          retryBackoff.reset();
          fetchOffset = batch[batch.length - 1]!.nextOffset;
          if (!(await info.queue.put(info, batch, signal))) return;
        }
        return; // aborted
      } catch (error) {
        if (signal.aborted) return;
        if (error instanceof OffsetOutOfRangeError) {
          if (justReset) {
            logger.error({ ...where, offset: error.offset, err: error }, 'offset still out of range after a reset; partition paused until the next rebalance');
            return;
          }
          justReset = true;
          const to = resetOffsetWithin(this.options.autoOffsetReset, error);
          logger.warn(
            { ...where, offset: error.offset, earliest: error.earliest, end: error.end, resetTo: to, policy: this.options.autoOffsetReset },
            'offset out of range; applying the reset policy',
          );
          try {
            const from = error.offset ?? fetchOffset;
            if (from !== undefined) this.options.onOffsetReset?.({ ...where, from, to, earliest: error.earliest, end: error.end });
          } catch (err) {
            logger.warn({ ...where, err }, 'onOffsetReset callback threw');
          }
          // Queued messages of this partition precede the bad offset: only when none is
          // pending does the consumed offset (what a commit writes) move to the new start.
          if (info.consumedOffset === error.offset) info.consumedOffset = to;
          fetchOffset = to; // undefined (not reported): the next loop asks the broker (OFFSETS)
          continue;
        }
        if (error instanceof MessageTooLargeError || error instanceof DecompressedTooLargeError) {
          logger.error({ ...where, err: error }, `${error instanceof MessageTooLargeError ? 'message larger than maxFetchBytes' : 'compressed set larger than maxDecompressedBytes'}; partition stopped`);
          this.options.onFatal(info, error);
          return;
        }
        const retryDelayMs = retryBackoff.next();
        const level = error instanceof KlogConnectionError ? 'warn' : 'error';
        logger[level]({ ...where, broker: consumer.broker, err: error, retryInMs: retryDelayMs }, 'fetch failed; retrying');
        if (!(await sleep(retryDelayMs, signal))) return;
      }
    }
  }

  /** The partition's earliest or latest offset, as `autoOffsetReset` says (an OFFSETS request). */
  private async resetOffset(consumer: SimpleConsumer, info: PartitionTopicInfo): Promise<number> {
    return resetOffset(this.options.autoOffsetReset, consumer, info.topic, info.partition);
  }
}
