/**
 * The log of one replica of a replicated topic's partition (docs/replication.md §8): a
 * {@link Log} (same segment files, same reads, flushes and retention, `append` for a leader)
 * with its topic id (`replica.properties`, replica-metadata.ts), its leader-epoch checkpoint
 * (leader-epoch-checkpoint.ts), and the follower's operations of §8.3:
 *
 * - `appendAsFollower(messageSet, count, segmentStart)`: the leader's bytes at the log end,
 *   rolling a segment exactly where the leader rolled one, never by `segment.bytes`, so that the
 *   segment files of two replicas holding the same range have the same names and bytes;
 * - `truncateTo(offset)` and `truncateFullyAndStartAt(offset)`: the cuts of §10, the log first,
 *   then the checkpoint.
 *
 * Every file call of these runs off the event loop (libuv's pool or the flusher's threads), and
 * every file created or removed has its directory fsynced. The follower's operations and
 * retention run one at a time, in call order; a leader's `append` is refused while a follower's
 * operation runs (the broker changes a partition's role between them, docs/replication.md §9.1).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { type Logger, silentLogger } from '@klog/logger';
import { checkLogConfig, defaultLogConfig, type LogConfig } from './config.js';
import { ErrorCode } from '@klog/protocol';
import { LogClosedError, ReplicaDirError, StorageError } from './errors.js';
import { LeaderEpochCheckpoint } from './leader-epoch-checkpoint.js';
import { type AppendResult, Log, type LogOptions } from './log.js';
import { lastMessageOf } from './log-flush.js';
import { readReplicaMetadata, replicaPropertiesFileName, ReplicaMetadataError, writeReplicaMetadata } from './replica-metadata.js';
import { findSegmentIndex } from './segment-list.js';
import { Segment, segmentFileName, syncDir } from './segment.js';

/** How to create a {@link ReplicaLog}: a {@link Log}'s options and the topic id. */
export interface CreateReplicaLogOptions extends Omit<LogOptions, 'recover'> {
  /** The topic definition's `id`: 16 lowercase hex digits (docs/replication.md §3.1). */
  readonly topicId: string;
}

/**
 * Suffix of the directory a replica is built in before it takes its name (see
 * {@link ReplicaLog.create}): `<topic>-<partition>.creating`. A log manager removes one it finds
 * (it never held a message).
 */
export const replicaCreatingSuffix = '.creating';

/** A replica's log. Open with {@link ReplicaLog.load}, create with {@link ReplicaLog.create}. */
export class ReplicaLog extends Log {
  /** The topic id of `replica.properties`. */
  readonly topicId: string;
  /** The replica's leader-epoch checkpoint (docs/replication.md §8.2), loaded with the log. */
  readonly leaderEpochs: LeaderEpochCheckpoint;
  /** The last follower operation or retention run in the chain; they run one at a time. */
  #tail: Promise<unknown> = Promise.resolve();
  /** Follower appends and truncations queued or running: a leader's `append` is refused meanwhile. */
  #followerOps = 0;
  /** Set by `close()`: no new follower operation starts. */
  #closing = false;

  private constructor(
    topic: string,
    partition: number,
    dir: string,
    segments: Segment[],
    config: LogConfig,
    logger: Logger,
    topicId: string,
    leaderEpochs: LeaderEpochCheckpoint,
  ) {
    super(topic, partition, dir, segments, config, logger);
    this.topicId = topicId;
    this.leaderEpochs = leaderEpochs;
  }

  /**
   * Opens the existing replica in `options.dir` (a broker's start): reads `replica.properties`,
   * opens the segments as {@link Log.open} does (recovering the last one when `recover`), and
   * loads the leader-epoch checkpoint, dropping its entries past the log end (a crash between a
   * truncation of the log and of the checkpoint, docs/replication.md §8.2).
   * @throws ReplicaDirError when the directory has no `replica.properties`;
   *   ReplicaMetadataError or LeaderEpochCheckpointError for a file that does not parse (the
   *   broker takes no role for the partition then); RangeError for a bad config; file system errors
   */
  static async load(options: LogOptions): Promise<ReplicaLog> {
    const { dir, topic, partition } = options;
    const config = checkLogConfig({ ...defaultLogConfig, ...options.config });
    const logger = options.logger ?? silentLogger;
    const metadata = await readReplicaMetadata(dir);
    if (metadata === undefined) throw new ReplicaDirError(dir, `no ${replicaPropertiesFileName}: not a replica`);
    const segments = Log.loadSegments(options, logger);
    try {
      const leaderEpochs = await LeaderEpochCheckpoint.load(dir, segments[segments.length - 1]!.end);
      return new ReplicaLog(topic, partition, dir, segments, config, logger, metadata.topicId, leaderEpochs);
    } catch (err) {
      await Promise.allSettled(segments.map((s) => s.close()));
      throw err;
    }
  }

  /**
   * Creates the replica log of a partition without blocking the event loop
   * (docs/replication.md §8.1). It is built in `<dir>.creating` (a leftover of that name is
   * removed first): `replica.properties` written and fdatasynced, an empty segment 0, the
   * directory fsynced; then renamed to `dir` and the parent fsynced. So `dir` never exists
   * without its `replica.properties`, and a crash leaves either no replica or a whole empty one.
   * When `dir` already holds a replica of the same topic id, it is opened ({@link ReplicaLog.load}).
   * @throws ReplicaDirError when `dir` exists and is not a replica of `topicId`; RangeError for
   *   a bad topic id or config; DiskFullError when there is no space; file system errors
   */
  static override async create(options: CreateReplicaLogOptions): Promise<ReplicaLog> {
    const { dir, topic, partition, topicId } = options;
    const config = checkLogConfig({ ...defaultLogConfig, ...options.config });
    const logger = options.logger ?? silentLogger;
    if (await exists(dir)) {
      let existing: string | undefined;
      try {
        existing = (await readReplicaMetadata(dir))?.topicId;
      } catch (err) {
        if (!(err instanceof ReplicaMetadataError)) throw err;
        throw new ReplicaDirError(dir, err.message);
      }
      if (existing === undefined) throw new ReplicaDirError(dir, `exists without ${replicaPropertiesFileName}: a paper partition or not klog's`);
      if (existing !== topicId) throw new ReplicaDirError(dir, `holds a replica of topic id ${existing}, not ${topicId}`);
      return ReplicaLog.load({ ...options, recover: false });
    }
    const staging = dir + replicaCreatingSuffix;
    await fs.promises.rm(staging, { recursive: true, force: true });
    await fs.promises.mkdir(staging); // in the log dir, which exists
    await writeReplicaMetadata(staging, { topicId });
    await Segment.createAsync(staging, 0);
    await syncDir(staging);
    await fs.promises.rename(staging, dir);
    await syncDir(path.dirname(dir));
    const segment = await Segment.openAsync(path.join(dir, segmentFileName(0)), 0);
    const leaderEpochs = await LeaderEpochCheckpoint.load(dir, 0);
    logger.info({ topic, partition, topicId, dir }, 'created replica log');
    return new ReplicaLog(topic, partition, dir, [segment], config, logger, topicId, leaderEpochs);
  }

  /**
   * A leader's append: {@link Log.append}.
   * @throws StorageError with code NotLeaderForPartition while a follower's append or truncation
   *   is queued or running; what {@link Log.append} throws
   */
  override append(messageSet: Buffer, messageCount: number, lastPosition?: number): AppendResult {
    if (this.#followerOps > 0) {
      throw new StorageError(ErrorCode.NotLeaderForPartition, `log ${this.topic}-${this.partition} is being appended to or truncated as a follower`);
    }
    return super.append(messageSet, messageCount, lastPosition);
  }

  /**
   * A follower's append (docs/replication.md §8.3, §9.2): writes `messageSet` (whole, checked
   * messages: the caller validated them) at the log end, which is the leader's offset of the
   * bytes. `segmentStart` is the start of the leader's segment that holds them (REPLICA_FETCH's
   * `segmentStart`): when it is the active segment's start the bytes go there, however large
   * that segment grows (`segment.bytes` is never consulted); when it is past it, it must be the
   * log end, and a new segment named by it is created (directory fsynced) and becomes active
   * first, as the leader rolled there. An empty set with a new `segmentStart` rolls too. The
   * bytes are not visible until flushed (call `flush()`; the flush policy also applies).
   * @param messageCount messages in the set, for `flush.messages`
   * @returns the offset of the first appended byte and the offset just past the last
   * @throws RangeError when `segmentStart` is before the active segment's start, or past it and
   *   not the log end (the logs differ: truncate first), or not an integer; LogClosedError after
   *   `close()`; DiskFullError or the write error (the segment is cut back: nothing partial stays)
   */
  appendAsFollower(messageSet: Buffer, messageCount: number, segmentStart: number): Promise<AppendResult> {
    return this.#followerOp(async () => {
      let active = this.segments.view.at(-1)!;
      if (!Number.isSafeInteger(segmentStart) || segmentStart < active.start || (segmentStart > active.start && segmentStart !== active.end)) {
        throw new RangeError(
          `segment start ${segmentStart} of the leader does not match ${this.topic}-${this.partition}: its active segment starts at ${active.start} and its log ends at ${active.end}`,
        );
      }
      if (segmentStart > active.start) {
        const segment = await Segment.createAsync(this.dir, segmentStart, { open: true });
        await syncDir(this.dir);
        this.installSegment(segment);
        active = segment;
      }
      const offset = active.end;
      if (messageSet.length === 0) return { offset, nextOffset: offset };
      await active.appendAsync(messageSet);
      this.flushState.appended(messageCount, lastMessageOf(messageSet, offset), active.end);
      return { offset, nextOffset: active.end };
    });
  }

  /**
   * Cuts the log to `offset` (docs/replication.md §8.3, §10): waits for a flush in flight, then
   * deletes the segments that start at or after `offset`, newest first, each removal fsynced
   * with the directory (so a crash midway leaves a shorter prefix, never a gap); the last segment
   * kept becomes the active one and is cut to `offset` and fsynced; `visibleEnd` moves down to
   * `offset` if it was past it. Then the checkpoint drops the epochs that start at or after
   * `offset` (`truncateFromEnd`): the log first, the checkpoint after. At or past the log end,
   * nothing changes. Reads running meanwhile may fail (LogClosedError on a deleted segment).
   * @returns the bytes cut from the log (0 when `offset` is at or past the log end)
   * @throws RangeError for an `offset` below `earliestOffset` (use {@link
   *   ReplicaLog.truncateFullyAndStartAt}) or not an integer; LogClosedError after `close()`;
   *   file system errors
   */
  truncateTo(offset: number): Promise<number> {
    return this.#followerOp(async () => {
      if (!Number.isSafeInteger(offset)) throw new RangeError(`truncation offset must be an integer, got ${offset}`);
      if (offset < this.earliestOffset) {
        throw new RangeError(`cannot truncate ${this.topic}-${this.partition} to ${offset}, below its earliest offset ${this.earliestOffset}: start it over with truncateFullyAndStartAt`);
      }
      const logEnd = this.logEndOffset;
      if (offset >= logEnd) return 0;
      await this.flushState.idle();
      const view = this.segments.view;
      const keep = Math.max(0, findSegmentIndex(view, offset - 1));
      const kept = view[keep]!;
      const dropped = this.segments.dropBack(keep + 1);
      kept.activate();
      kept.cutSize(offset - kept.start); // the log ends at `offset` from now on, for a flush that starts meanwhile too
      this.flushState.truncated(offset);
      for (const s of dropped.reverse()) await s.delete();
      await kept.truncateAsync(offset - kept.start);
      await this.leaderEpochs.truncateFromEnd(offset);
      this.logger.info({ topic: this.topic, partition: this.partition, offset, bytes: logEnd - offset, segmentsDeleted: dropped.length }, 'truncated replica log');
      return logEnd - offset;
    });
  }

  /**
   * Deletes every segment and starts the log over, empty, at `offset` (docs/replication.md
   * §8.3: a follower behind the leader's retention, or whose leader has no epoch as old as its
   * own, §10): waits for a flush in flight, removes the segments newest first (each removal
   * fsynced with the directory), creates the empty segment named `offset` (directory fsynced),
   * sets `earliestOffset`, `logEndOffset` and `visibleEnd` to `offset`, then clears the
   * checkpoint. A crash midway leaves a shorter log, or none (opened again as an empty segment 0).
   * @throws RangeError for an `offset` that is not a non-negative integer; LogClosedError after
   *   `close()`; DiskFullError; file system errors
   */
  truncateFullyAndStartAt(offset: number): Promise<void> {
    return this.#followerOp(async () => {
      if (!Number.isSafeInteger(offset) || offset < 0) throw new RangeError(`start offset must be a non-negative integer, got ${offset}`);
      await this.flushState.idle();
      const old = this.segments.view;
      for (const s of [...old].reverse()) await s.delete();
      const segment = await Segment.createAsync(this.dir, offset, { open: true });
      await syncDir(this.dir);
      this.segments.replaceAll(segment);
      this.flushState.restartedAt(offset);
      await this.leaderEpochs.truncateFromEnd(0);
      this.logger.info({ topic: this.topic, partition: this.partition, offset, segmentsDeleted: old.length }, 'replica log started over');
    });
  }

  /** Retention ({@link Log.deleteOldSegments}), in turn with the follower's operations. */
  override deleteOldSegments(now: number): Promise<number> {
    if (this.#closing) return Promise.resolve(0);
    return this.#serial(() => super.deleteOldSegments(now));
  }

  /** Waits for the follower's operations queued before the call, then closes as {@link Log.close} does. */
  override async close(): Promise<void> {
    this.#closing = true;
    await this.#tail;
    await super.close();
  }

  /** Runs `op` after the operations before it, counting it as a follower operation while it waits and runs. */
  #followerOp<T>(op: () => Promise<T>): Promise<T> {
    this.#followerOps++;
    const run = this.#serial(op);
    void run.finally(() => this.#followerOps--).catch(() => {});
    return run;
  }

  /** Runs `op` after the operations before it (follower operations and retention, one at a time); refused once `close()` was called. */
  #serial<T>(op: () => Promise<T>): Promise<T> {
    if (this.#closing) return Promise.reject(new LogClosedError(`log ${this.topic}-${this.partition}`));
    const run = this.#tail.then(op);
    this.#tail = run.catch(() => {});
    return run;
  }
}

async function exists(file: string): Promise<boolean> {
  try {
    await fs.promises.access(file);
    return true;
  } catch {
    return false;
  }
}
