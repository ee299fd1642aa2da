/**
 * One partition's log (docs/design.md §2): a directory of segment files, appended at the end, flushed by
 * count or time, read by byte offset, trimmed from the front by retention.
 *
 * Offsets are byte positions in the partition's logical log (docs/design.md §1): a segment named
 * `00000000000000001024.kafka` holds the bytes from offset 1024 on. Only the sorted segment list
 * is kept in memory; a read finds its segment by binary search.
 *
 * Visibility: `append` writes synchronously to the file, but consumers see only
 * `[earliestOffset, visibleEnd)`, and `visibleEnd` advances only after fdatasync of everything
 * appended before the sync started. So a read never returns unflushed or torn bytes.
 *
 * The flush policy and the visible end live in log-flush.ts, the read arithmetic in log-read.ts.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { type Logger, silentLogger } from '@klog/logger';
import { checkLogConfig, defaultLogConfig, type LogConfig } from './config.js';
import { asStorageError, LogClosedError } from './errors.js';
import { FileRegion } from './file-region.js';
import { lastMessageOf, LogFlushState, type FlushEvent } from './log-flush.js';
import { locateRead, offsetsBefore } from './log-read.js';
import { makeDirs } from './make-dirs.js';
import { recoverSegment } from './recovery.js';
import { findSegmentIndex, SegmentList } from './segment-list.js';
import { parseSegmentFileName, Segment, segmentFileSuffix, syncDir } from './segment.js';

/** How to open a {@link Log}. */
export interface LogOptions {
  /** The partition's directory, `LOG_DIR/<topic>-<partition>`; created when missing. */
  readonly dir: string;
  readonly topic: string;
  readonly partition: number;
  /** Settings; missing ones come from {@link defaultLogConfig}. */
  readonly config?: Partial<LogConfig>;
  readonly logger?: Logger;
  /** Scan the last segment and cut it at the first bad message (after an unclean shutdown). Default false. */
  readonly recover?: boolean;
}

/** Where an append went: the byte offset of its first message and the offset just past it. */
export interface AppendResult {
  readonly offset: number;
  readonly nextOffset: number;
}

export type { FlushEvent } from './log-flush.js';
export { earliestTime, latestTime } from './log-read.js';

const emptyBuffer = Buffer.alloc(0);

/** One partition's log. Create with {@link Log.open}; the log manager does this for the broker. */
export class Log {
  /** Settings this log runs with. */
  readonly config: Readonly<LogConfig>;
  /** The segments, oldest first; copy-on-write, never empty. */
  protected readonly segments: SegmentList;
  /** Visible end, flush policy and flush chain. */
  protected readonly flushState: LogFlushState;
  protected readonly logger: Logger;
  /** Set by `close()`: no more appends or reads. */
  #closed = false;
  /** Start offset of the segment a retention roll is creating, while it does (see `#rollAsync`). */
  #rollingAt: number | undefined;
  /** The last retention run; they run one at a time. */
  #retentionTail: Promise<number> = Promise.resolve(0);

  /** Use {@link Log.open} or {@link Log.create} (a subclass passes the segments it loaded). */
  protected constructor(
    readonly topic: string,
    readonly partition: number,
    readonly dir: string,
    segments: Segment[],
    config: LogConfig,
    logger: Logger,
  ) {
    this.config = config;
    this.segments = new SegmentList(segments);
    this.flushState = new LogFlushState(topic, partition, this.segments, config, logger, () => this.#closed);
    this.logger = logger;
  }

  /**
   * Opens the log in `options.dir` (creating the directory and an empty segment 0 if there is
   * none), optionally recovering its last segment (docs/design.md §2). Files that are not segments are
   * skipped; a gap or overlap between segments is logged at warn. After opening, everything on
   * disk is visible: `visibleEnd === logEndOffset`.
   * @throws RangeError for a bad config; file system errors
   */
  static open(options: LogOptions): Log {
    const config = checkLogConfig({ ...defaultLogConfig, ...options.config });
    const logger = options.logger ?? silentLogger;
    return new Log(options.topic, options.partition, options.dir, Log.loadSegments(options, logger), config, logger);
  }

  /**
   * The segments of the log in `options.dir`, oldest first, as {@link Log.open} describes (the
   * directory and an empty segment 0 created when missing, the last one recovered on request).
   * @throws file system errors (every segment opened so far is closed then)
   */
  protected static loadSegments(options: LogOptions, logger: Logger): Segment[] {
    const { dir, topic, partition } = options;
    fs.mkdirSync(dir, { recursive: true });
    const segments: Segment[] = [];
    try {
      for (const name of fs.readdirSync(dir)) {
        const start = parseSegmentFileName(name);
        if (start !== undefined) segments.push(Segment.open(path.join(dir, name), start));
        else if (name.endsWith(segmentFileSuffix)) logger.warn({ topic, partition, file: name }, 'skipping segment file with a bad name');
      }
      segments.sort((a, b) => a.start - b.start);
      if (segments.length === 0) segments.push(Segment.create(dir, 0));
      for (let i = 1; i < segments.length; i++) {
        const prev = segments[i - 1]!;
        const cur = segments[i]!;
        if (prev.end !== cur.start) {
          logger.warn({ topic, partition, segment: path.basename(prev.file), end: prev.end, nextStart: cur.start }, 'segment does not end where the next one starts');
        }
      }
      const last = segments[segments.length - 1]!;
      if (options.recover === true) {
        const r = recoverSegment(last);
        const entry = { topic, partition, segment: path.basename(last.file), validBytes: r.validBytes, truncatedBytes: r.truncatedBytes, reason: r.reason };
        if (r.truncatedBytes > 0) logger.warn(entry, 'recovery truncated the last segment');
        else logger.debug({ ...entry, messages: r.messages }, 'recovery found the last segment intact');
        last.releaseFd(); // opened again on first use: an idle partition holds no descriptor
      }
      for (let i = 0; i < segments.length - 1; i++) segments[i]!.retire();
    } catch (err) {
      for (const s of segments) void s.close();
      throw err;
    }
    return segments;
  }

  /**
   * Creates the log of a new partition without blocking the event loop (topic creation must not
   * hold up other requests): the directory, an empty segment 0, and an fsync of the directory
   * so the segment's name is durable. When the directory already holds segments (a partition
   * left from before), it is opened as by {@link Log.open}.
   * @throws RangeError for a bad config; DiskFullError when there is no space; file system errors
   */
  static async create(options: Omit<LogOptions, 'recover'>): Promise<Log> {
    const { dir, topic, partition } = options;
    const config = checkLogConfig({ ...defaultLogConfig, ...options.config });
    try {
      await makeDirs(dir);
    } catch (err) {
      throw asStorageError(err, dir);
    }
    if ((await fs.promises.readdir(dir)).some((name) => name.endsWith(segmentFileSuffix))) return Log.open(options);
    const segment = await Segment.createAsync(dir, 0);
    await syncDir(dir);
    return new Log(topic, partition, dir, [segment], config, options.logger ?? silentLogger);
  }

  /** Start offset of the first segment. */
  get earliestOffset(): number {
    return this.segments.view[0]!.start;
  }

  /** End of everything appended, flushed or not. */
  get logEndOffset(): number {
    const view = this.segments.view;
    return view[view.length - 1]!.end;
  }

  /** Flushed end: reads never return bytes at or past it. */
  get visibleEnd(): number {
    return this.flushState.visibleEnd;
  }

  /**
   * Offset of the last message before `visibleEnd` when this process appended it (since the log
   * was opened or last cut), else undefined (walk the messages to find it): for the Kafka
   * listener's high watermark (docs/kafka-protocol.md, "Offsets").
   */
  get lastVisibleMessage(): number | undefined {
    return this.flushState.lastVisibleMessage;
  }

  /** Number of segment files. */
  get segmentCount(): number {
    return this.segments.view.length;
  }

  /** Total bytes of all segments. */
  get sizeInBytes(): number {
    return this.segments.view.reduce((sum, s) => sum + s.size, 0);
  }

  /** Start offsets of the segments, oldest first (a snapshot). */
  segmentStarts(): number[] {
    return this.segments.view.map((s) => s.start);
  }

  /**
   * Appends a message set (already validated by the caller: whole, valid messages) to the
   * active segment with a synchronous write, rolling to a new segment first when the active one
   * is non-empty and would pass `segmentBytes`. Under `flush.policy=group` a flush follows at
   * once: after the appends of this event-loop turn when none is running, else right after the
   * running one (docs/design.md §10). Under `interval` counts `messageCount` toward
   * `flushMessages` and arms the `flushIntervalMs` timer (docs/design.md §2). The bytes are not
   * visible until flushed.
   * @param lastPosition where the set's last message starts in it, when the caller's check found
   *   it (`validateMessageSet`); otherwise the set's length fields are walked for it
   * @returns the offset of the first appended byte and the offset just past the last
   * @throws LogClosedError after `close()`; the write error (the segment is cut back to its
   *   size before the append, so no partial set stays)
   */
  append(messageSet: Buffer, messageCount: number, lastPosition?: number): AppendResult {
    if (this.#closed) throw new LogClosedError(`log ${this.topic}-${this.partition}`);
    const view = this.segments.view;
    let active = view[view.length - 1]!;
    if (messageSet.length === 0) return { offset: active.end, nextOffset: active.end };
    if (active.size > 0 && active.size + messageSet.length > this.config.segmentBytes) active = this.#roll();
    const offset = active.end;
    active.append(messageSet);
    this.flushState.appended(messageCount, lastPosition === undefined ? lastMessageOf(messageSet, offset) : offset + lastPosition, active.end);
    return { offset, nextOffset: active.end };
  }

  /**
   * Makes everything appended so far durable and visible: fdatasync every segment with
   * unsynced bytes, then advance `visibleEnd` to the log end as it was when the sync started,
   * and tell the `onFlush` listeners. Flushes run one at a time; calls made while one runs
   * share the next one. At most `flush.threads` logs flush at once ({@link flushTurns}); a
   * flush waiting for its turn takes its target when it gets it. Whatever `flush.policy`,
   * `flush.messages` and `flush.ms` say, a call flushes now: a follower flushes what each fetch
   * brought this way (docs/replication.md §9.2).
   * @returns `visibleEnd` once everything appended before the call is fdatasynced (the flushed end)
   * @throws the fdatasync error (`visibleEnd` stays; a retry is scheduled)
   */
  flush(): Promise<number> {
    return this.flushState.flush();
  }

  /**
   * Resolves once `visibleEnd >= offset`, flushing as needed: for produce requests acknowledged
   * after flush.
   * @throws RangeError when `offset` is past `logEndOffset`; the flush error
   */
  async flushedThrough(offset: number): Promise<void> {
    while (this.flushState.visibleEnd < offset) {
      if (offset > this.logEndOffset) throw new RangeError(`offset ${offset} is past the log end ${this.logEndOffset} of ${this.topic}-${this.partition}`);
      await this.flush();
    }
  }

  /**
   * Reads the message set bytes from `offset`: at most `maxBytes`, never past `upTo` (by
   * default `visibleEnd`), never past the end of the segment that holds `offset` (a read that
   * reaches a segment's end returns the rest of that segment, as Kafka 0.7 does). The result may
   * end in a partial message; `offset` is not checked to be a message boundary. `offset === upTo`
   * gives an empty buffer (docs/design.md §3 FETCH).
   * @param maxBytes limit in bytes; 0 gives an empty buffer
   * @param upTo the end of what may be read (docs/replication.md §8.3): `visibleEnd` for the
   *   paper's consumers, the high watermark for a replicated partition's, `logEndOffset` (or the
   *   start of a later epoch) for a follower's fetch; at most `logEndOffset`
   * @throws LogOffsetOutOfRangeError when `offset` is outside `[earliestOffset, upTo]` (its `end`
   *   is `upTo`); RangeError for a negative or non-integer `maxBytes`, or an `upTo` that is not an
   *   integer or is past `logEndOffset`; LogClosedError after `close()`
   */
  read(offset: number, maxBytes: number, upTo?: number): Buffer {
    const range = this.#locate(offset, maxBytes, upTo);
    return range === undefined ? emptyBuffer : range.segment.read(offset - range.segment.start, range.length);
  }

  /**
   * {@link Log.read} into `target` rather than a new buffer (at most `target.length` bytes), for
   * a caller that is done with the bytes before its next read (the Kafka listener re-framing a
   * fetch, docs/kafka-protocol.md).
   * @returns the bytes read into `target[0, n)`
   * @throws the same errors as {@link Log.read}
   */
  readInto(target: Buffer, offset: number, maxBytes: number, upTo?: number): number {
    const range = this.#locate(offset, Math.min(maxBytes, target.length), upTo);
    return range === undefined ? 0 : range.segment.readInto(target, offset - range.segment.start, range.length);
  }

  /** The segment holding `offset` and how many bytes from there a read up to `upTo` may return (see `locateRead`). */
  #locate(offset: number, maxBytes: number, upTo: number | undefined): { segment: Segment; length: number } | undefined {
    if (this.#closed) throw new LogClosedError(`log ${this.topic}-${this.partition}`);
    const view = this.segments.view;
    let end = this.flushState.visibleEnd;
    if (upTo !== undefined) {
      const logEnd = view[view.length - 1]!.end;
      if (!Number.isSafeInteger(upTo) || upTo > logEnd) throw new RangeError(`upTo must be an integer at most the log end ${logEnd} of ${this.topic}-${this.partition}, got ${upTo}`);
      end = upTo;
    }
    return locateRead(view, offset, maxBytes, end, this.topic, this.partition);
  }

  /**
   * The same bytes as {@link Log.read}, as a pinned range of the segment file instead of a copy,
   * for sending with sendfile(2) or the read-and-write fallback (docs/design.md §3, the read path). The
   * region's segment cannot be closed until the region is released, even when retention deletes
   * it; the caller must call `release()` exactly once, also on error paths. The region's
   * `segmentStart` is the start offset of the segment holding the bytes (REPLICA_FETCH's
   * `segmentStart`, docs/replication.md §6.3).
   * @param maxBytes limit in bytes; 0 gives an empty region
   * @param upTo the end of what may be read, by default `visibleEnd`: see {@link Log.read}
   * @returns a region of `min(maxBytes, rest of the segment, upTo − offset)` bytes; an empty
   *   region (nothing pinned) at `upTo`, whose `segmentStart` is that of the segment holding
   *   `offset` (the last one starting at or before it)
   * @throws the same errors as {@link Log.read}
   */
  readRange(offset: number, maxBytes: number, upTo?: number): FileRegion {
    const range = this.#locate(offset, maxBytes, upTo);
    if (range === undefined) return FileRegion.empty(offset, this.segments.view[findSegmentIndex(this.segments.view, offset)]!.start);
    range.segment.pin();
    return new FileRegion(range.segment, offset, offset - range.segment.start, range.length);
  }

  /**
   * Kafka 0.7's getOffsetsBefore (docs/design.md §3 OFFSETS). Candidates are the start offsets of the
   * segments (with each one's last-modified time), plus `visibleEnd` stamped now when it is past
   * the last candidate, oldest first; only offsets up to `visibleEnd` count. `time` −1
   * ({@link latestTime}) starts at the newest candidate (so `[visibleEnd, ...]`), −2
   * ({@link earliestTime}) gives `[earliestOffset]`; any other time (ms since the epoch) starts
   * at the newest candidate whose time is `<= time`.
   * @returns at most `maxOffsets` offsets from the start candidate backwards, newest first
   *   (empty when no candidate is old enough)
   */
  offsetsBefore(time: number, maxOffsets: number): number[] {
    return offsetsBefore(this.segments.view, this.flushState.visibleEnd, time, maxOffsets);
  }

  /**
   * Subscribes to `visibleEnd` advances (e.g. to answer long-poll fetches). The listener runs
   * synchronously after each advance; its exceptions are logged and dropped.
   * @returns a function that unsubscribes
   */
  onFlush(listener: (visibleEnd: number) => void): () => void {
    return this.flushState.onFlush(listener);
  }

  /**
   * Subscribes to the end of every flush, with its duration and outcome (for flush count and
   * latency metrics). The listener runs synchronously; its exceptions are logged and dropped.
   * @returns a function that unsubscribes
   */
  onFlushDone(listener: (event: FlushEvent) => void): () => void {
    return this.flushState.onFlushDone(listener);
  }

  /**
   * Retention (docs/design.md §2): deletes whole segments from the front whose last write is more than
   * `retentionMs` before `now`, then, when `retentionBytes >= 0`, more of the oldest segments
   * while the log's total bytes exceed `retentionBytes`. The last (active) segment is never
   * deleted, but when every segment has aged out and the last is non-empty, a new empty
   * segment is rolled first (named by the log end, so offsets never restart at 0) and the old
   * one goes. Segments with bytes not yet flushed are kept. Deleting waits for any fdatasync
   * in flight on the file.
   * @param now ms since the epoch
   * @returns the number of segments deleted
   */
  deleteOldSegments(now: number): Promise<number> {
    const run = this.#retentionTail.then(() => this.#deleteOldSegments(now));
    this.#retentionTail = run.catch(() => 0);
    return run;
  }

  /** One retention run (they run one at a time): see {@link Log.deleteOldSegments}. */
  async #deleteOldSegments(now: number): Promise<number> {
    if (this.#closed) return 0;
    const { retentionMs, retentionBytes } = this.config;
    const aged = (view: readonly Segment[], visibleEnd: number): number => {
      let n = 0;
      while (n < view.length && now - view[n]!.lastModifiedMs > retentionMs && view[n]!.end <= visibleEnd) n++;
      return n;
    };
    let view = this.segments.view;
    let count = aged(view, this.flushState.visibleEnd);
    if (count === view.length && view[count - 1]!.size > 0) {
      await this.#rollAsync();
      if (this.#closed) return 0;
      view = this.segments.view;
      count = aged(view, this.flushState.visibleEnd);
    }
    if (count === view.length) count--; // the last segment stays: empty, or appended to while the roll ran
    const visibleEnd = this.flushState.visibleEnd;
    if (retentionBytes >= 0) {
      let total = 0;
      for (let i = count; i < view.length; i++) total += view[i]!.size;
      while (count < view.length - 1 && total > retentionBytes && view[count]!.end <= visibleEnd) total -= view[count++]!.size;
    }
    if (count === 0) return 0;
    const dropped = this.segments.dropFront(count);
    for (const s of dropped) {
      this.logger.info({ topic: this.topic, partition: this.partition, segment: path.basename(s.file), bytes: s.size, lastModifiedMs: s.lastModifiedMs }, 'retention deleting segment');
    }
    await Promise.all(dropped.map((s) => s.delete()));
    return count;
  }

  /**
   * Stops the flush timer, flushes, and closes every segment file (waiting for any fdatasync
   * in flight). Appends and reads throw LogClosedError from the moment this is called.
   * Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.flushState.stopTimers();
    try {
      await this.flush();
    } finally {
      await Promise.all(this.segments.view.map((s) => s.close()));
      this.flushState.clearListeners();
    }
  }

  /** True once `close()` has been called. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Makes `segment` (new, empty, starting at the log end) the active one; the previous one is
   * retired (its descriptor closes once it is synced and unread).
   */
  protected installSegment(segment: Segment): void {
    const view = this.segments.view;
    const previous = view[view.length - 1]!;
    this.segments.append(segment);
    previous.retire();
    this.logger.debug({ topic: this.topic, partition: this.partition, segment: path.basename(segment.file) }, 'rolled new segment');
  }

  /**
   * Starts a new empty segment at the log end and makes it the active one (an append that would
   * pass `segmentBytes`). The new file's directory entry is fsynced by its first flush (see
   * `Segment.sync`). When a retention roll is creating the file of that name, this one opens it
   * instead of failing on it (see `#rollAsync`).
   */
  #roll(): Segment {
    const start = this.logEndOffset;
    const segment = Segment.create(this.dir, start, this.#rollingAt !== start);
    this.installSegment(segment);
    return segment;
  }

  /**
   * Retention's roll (docs/design.md §2) without blocking the event loop (docs/architecture.md:
   * file work off the request path): creates and opens the segment named by the log end, fsyncs
   * the directory, and makes it active, unless an append came meanwhile. Then the log has moved
   * on: the file is either the one that append rolled to (it is kept) or names no segment (it is
   * removed, and the directory fsynced).
   * @returns true when the roll happened
   */
  async #rollAsync(): Promise<boolean> {
    const view = this.segments.view;
    const previous = view[view.length - 1]!;
    const start = previous.end;
    let segment: Segment | undefined;
    this.#rollingAt = start;
    try {
      segment = await Segment.createAsync(this.dir, start, { open: true });
      await syncDir(this.dir);
    } catch (err) {
      if (segment === undefined && this.segments.view.at(-1)!.start === start) return false; // an append's roll made it first
      if (segment !== undefined) await this.#dropRolledFile(segment);
      throw err;
    } finally {
      this.#rollingAt = undefined;
    }
    const active = this.segments.view.at(-1)!;
    if (active.file === segment.file) {
      await segment.close(); // an append rolled to the same file meanwhile and holds it
      return false;
    }
    if (this.#closed || active !== previous || previous.end !== start) {
      await this.#dropRolledFile(segment);
      return false;
    }
    this.installSegment(segment);
    return true;
  }

  /** Closes and removes a segment file a roll made but did not install, unless the log holds that file. */
  async #dropRolledFile(segment: Segment): Promise<void> {
    await segment.close();
    if (this.segments.view.some((s) => s.file === segment.file)) return;
    await fs.promises.rm(segment.file, { force: true });
    await syncDir(this.dir);
  }
}
