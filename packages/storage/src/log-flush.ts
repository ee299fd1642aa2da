/**
 * The flush side of one partition's log (docs/design.md §2 flush, §10 group commit): when a
 * flush starts, what it syncs, and the visible end it moves. Appends tell it how many messages
 * they added; it fdatasyncs the segments with unsynced bytes (at most `flush.threads` logs at
 * once, {@link flushTurns}) and advances `visibleEnd` to the log end as it was when the sync
 * started, so a read never returns unflushed or torn bytes.
 */
import { walkMessageSet } from '@klog/protocol';
import type { Logger } from '@klog/logger';
import type { LogConfig } from './config.js';
import { flushTurns } from './flusher.js';
import type { SegmentList } from './segment-list.js';

/** What one flush did, for metrics (docs/design.md §2 flush; see {@link Log.onFlushDone}). */
export interface FlushEvent {
  readonly topic: string;
  readonly partition: number;
  /** Wall time of the flush in ms: fdatasync of every segment with unsynced bytes. */
  readonly durationMs: number;
  /** Segments that were fdatasync'd (0 when nothing was unflushed). */
  readonly segmentsSynced: number;
  /** `visibleEnd` after the flush. */
  readonly visibleEnd: number;
  /** The fdatasync error when the flush failed (`visibleEnd` did not move then). */
  readonly error?: unknown;
}

/** The flush state of one log: its visible end, its flush policy's timers, and its flush chain. */
export class LogFlushState {
  /** Flushed end offset: consumers see `[earliestOffset, visibleEnd)`. */
  #visibleEnd: number;
  /** Messages appended since the last flush started. */
  #unflushedMessages = 0;
  /** Fires `flushIntervalMs` after the first unflushed append (or a failed flush); unset when nothing waits. */
  #flushTimer: NodeJS.Timeout | undefined;
  /** Group commit: the flush asked for by an append while no flush ran, started after this turn's appends. */
  #groupFlush: NodeJS.Immediate | undefined;
  /** True while a flush's fdatasyncs run. */
  #flushing = false;
  /** A flush waiting behind the running one, not started yet; `flush()` calls join it. */
  #queuedFlush: Promise<number> | undefined;
  /** The last flush in the chain; flushes run one at a time. */
  #flushTail: Promise<unknown> = Promise.resolve();
  /** Bumped by every truncation: a flush that started before one does not move `visibleEnd`. */
  #generation = 0;
  /**
   * Offset of the last message appended and the log end just after that append, while known
   * (appended by this process since the log was opened or cut); -1 for unknown.
   */
  #lastAppendedAt = -1;
  #lastAppendedEnd = -1;
  /** Offset of the last message before `visibleEnd` while known (see {@link lastVisibleMessage}); -1 for unknown. */
  #lastVisibleAt = -1;
  /** Called with the new `visibleEnd` after each advance. */
  readonly #flushListeners = new Set<(visibleEnd: number) => void>();
  /** Called after every flush, successful or not, with its timing. */
  readonly #flushDoneListeners = new Set<(event: FlushEvent) => void>();

  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly segments: SegmentList,
    readonly config: Readonly<LogConfig>,
    readonly logger: Logger,
    /** True once the log is closed: a failed flush then schedules no retry. */
    readonly isClosed: () => boolean,
  ) {
    const view = segments.view;
    this.#visibleEnd = view[view.length - 1]!.end;
  }

  /** Flushed end: reads never return bytes at or past it. */
  get visibleEnd(): number {
    return this.#visibleEnd;
  }

  /**
   * The offset of the last message before `visibleEnd` when this process appended it (since the
   * log was opened or last cut), else undefined: then only a walk of the log's messages finds it.
   * The Kafka listener's high watermark is it + 1 (docs/kafka-protocol.md, "Offsets").
   */
  get lastVisibleMessage(): number | undefined {
    return this.#lastVisibleAt < 0 ? undefined : this.#lastVisibleAt;
  }

  /**
   * After an append of `messageCount` messages: under `flush.policy=group` a flush follows at
   * once (after this turn's appends when none runs, else right after the running one); under
   * `interval` counts toward `flushMessages` and arms the `flushIntervalMs` timer.
   * @param lastMessageAt offset of the append's last message, -1 when not known
   * @param end the log end after the append
   */
  appended(messageCount: number, lastMessageAt = -1, end = -1): void {
    this.#lastAppendedAt = lastMessageAt;
    this.#lastAppendedEnd = lastMessageAt < 0 ? -1 : end;
    this.#unflushedMessages += messageCount;
    if (this.config.flushPolicy === 'group') this.#groupCommit();
    else if (this.#unflushedMessages >= this.config.flushMessages) this.#flushInBackground();
    else this.#armFlushTimer();
  }

  /** See `Log.flush`. @returns `visibleEnd` once the flush is done */
  flush(): Promise<number> {
    if (this.#queuedFlush !== undefined) return this.#queuedFlush;
    const run = this.#flushTail.then(async () => {
      // The target is taken once a turn is had: appends made while waiting join this flush.
      const done = await flushTurns.take();
      this.#queuedFlush = undefined;
      try {
        await this.#syncOnce();
      } finally {
        done();
      }
      return this.#visibleEnd;
    });
    this.#queuedFlush = run;
    this.#flushTail = run.catch(() => {});
    return run;
  }

  /** Resolves once no flush runs or waits (a flush asked for meanwhile is waited for too). */
  async idle(): Promise<void> {
    for (let tail = this.#flushTail; ; tail = this.#flushTail) {
      await tail;
      if (tail === this.#flushTail) return;
    }
  }

  /**
   * The log was cut to `offset` (a follower's truncation, docs/replication.md §10): `visibleEnd`
   * moves down to it if it was past it, and a flush that started before the cut does not move
   * `visibleEnd` when it ends (its target named bytes that are gone).
   */
  truncated(offset: number): void {
    this.#generation++;
    this.#unflushedMessages = 0;
    this.#forgetLastMessage();
    if (this.#visibleEnd > offset) this.#visibleEnd = offset;
  }

  /**
   * A new log that starts empty at `offset` (`truncateFullyAndStartAt`): `visibleEnd` is `offset`,
   * even when that is past where it was.
   */
  restartedAt(offset: number): void {
    this.#generation++;
    this.#unflushedMessages = 0;
    this.#forgetLastMessage();
    this.#visibleEnd = offset;
  }

  #forgetLastMessage(): void {
    this.#lastAppendedAt = this.#lastAppendedEnd = this.#lastVisibleAt = -1;
  }

  /** Subscribes to `visibleEnd` advances: see `Log.onFlush`. */
  onFlush(listener: (visibleEnd: number) => void): () => void {
    this.#flushListeners.add(listener);
    return () => this.#flushListeners.delete(listener);
  }

  /** Subscribes to the end of every flush: see `Log.onFlushDone`. */
  onFlushDone(listener: (event: FlushEvent) => void): () => void {
    this.#flushDoneListeners.add(listener);
    return () => this.#flushDoneListeners.delete(listener);
  }

  /** Stops the timers (the log is closing); a flush asked for later still runs. */
  stopTimers(): void {
    this.#clearFlushTimer();
    if (this.#groupFlush !== undefined) clearImmediate(this.#groupFlush);
    this.#groupFlush = undefined;
  }

  /** Drops every listener (the log is closed). */
  clearListeners(): void {
    this.#flushListeners.clear();
    this.#flushDoneListeners.clear();
  }

  /**
   * Group commit (docs/design.md §10): makes sure a flush will cover the bytes just appended.
   * A flush already queued covers them; with one running, the next is queued behind it (and
   * starts the moment it ends); with none, one starts after the appends of this turn.
   */
  #groupCommit(): void {
    if (this.#queuedFlush !== undefined || this.#groupFlush !== undefined) return;
    if (this.#flushing) {
      this.#flushInBackground();
      return;
    }
    this.#groupFlush = setImmediate(() => {
      this.#groupFlush = undefined;
      this.#flushInBackground();
    });
  }

  /** One flush: see `Log.flush`. */
  async #syncOnce(): Promise<void> {
    this.#clearFlushTimer();
    if (this.#groupFlush !== undefined) {
      clearImmediate(this.#groupFlush);
      this.#groupFlush = undefined;
    }
    this.#unflushedMessages = 0;
    const view = this.segments.view;
    const target = view[view.length - 1]!.end;
    if (target <= this.#visibleEnd) return; // a clean log: nothing to sync, nothing to tell
    const generation = this.#generation;
    // The last message below the target, known when the last append is the one that ended there.
    const lastAt = this.#lastAppendedEnd === target ? this.#lastAppendedAt : -1;
    const started = performance.now();
    const unsynced = view.filter((s) => s.syncedBytes < s.size);
    this.#flushing = true;
    try {
      await (unsynced.length === 1 ? unsynced[0]!.sync() : Promise.all(unsynced.map((s) => s.sync())));
    } catch (err) {
      this.#flushing = false;
      if (!this.isClosed()) this.#armFlushTimer();
      this.#flushDone(started, unsynced.length, err);
      throw err;
    }
    this.#flushing = false;
    const advanced = generation === this.#generation && target > this.#visibleEnd;
    if (advanced) {
      this.#visibleEnd = target;
      this.#lastVisibleAt = lastAt;
    }
    this.#flushDone(started, unsynced.length, undefined);
    if (!advanced) return;
    for (const listener of this.#flushListeners) {
      try {
        listener(target);
      } catch (err) {
        this.logger.error({ topic: this.topic, partition: this.partition, err }, 'flush listener threw');
      }
    }
  }

  #flushDone(started: number, segmentsSynced: number, error: unknown): void {
    if (this.#flushDoneListeners.size === 0) return;
    const event: FlushEvent = {
      topic: this.topic,
      partition: this.partition,
      durationMs: performance.now() - started,
      segmentsSynced,
      visibleEnd: this.#visibleEnd,
      ...(error !== undefined ? { error } : {}),
    };
    for (const listener of this.#flushDoneListeners) {
      try {
        listener(event);
      } catch (err) {
        this.logger.error({ topic: this.topic, partition: this.partition, err }, 'flush-done listener threw');
      }
    }
  }

  #flushInBackground(): void {
    this.flush().catch((err: unknown) => this.logger.error({ topic: this.topic, partition: this.partition, err }, 'flush failed'));
  }

  #armFlushTimer(): void {
    if (this.#flushTimer !== undefined) return;
    this.#flushTimer = setTimeout(() => {
      this.#flushTimer = undefined;
      this.#flushInBackground();
    }, this.config.flushIntervalMs);
  }

  #clearFlushTimer(): void {
    if (this.#flushTimer === undefined) return;
    clearTimeout(this.#flushTimer);
    this.#flushTimer = undefined;
  }
}

/**
 * The offset of the last message of `messageSet` (whole messages, checked by the caller) appended
 * at `offset`, from its length fields (`walkMessageSet`); -1 for an empty set or one that is not
 * whole messages to its end.
 */
export function lastMessageOf(messageSet: Buffer, offset: number): number {
  const walk = walkMessageSet(messageSet, messageSet.length, undefined);
  return walk.validBytes === messageSet.length && walk.lastPosition >= 0 ? offset + walk.lastPosition : -1;
}
