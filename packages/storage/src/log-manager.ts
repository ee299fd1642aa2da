/**
 * All partition logs of a broker under one directory (docs/design.md §2): `LOG_DIR/<topic>-<partition>/`.
 * Loads them on start (recovering after an unclean shutdown), creates topics on first use,
 * runs retention on a timer, and marks a clean shutdown on close.
 *
 * Replica logs of replicated topics (docs/replication.md §8.1, a directory with a
 * `replica.properties`) live in the same directory but apart from the paper logs: `getLog`,
 * `logs`, `topics` and `onTopicCreated` never show them (so they are never registered as paper
 * logs); `getReplicaLog`, `replicaLogs`, `replicaDirs`, `createReplicaLog`, `deleteReplicaLog` and
 * `renameStaleReplica` do (the bookkeeping is in replica-dirs.ts). Flushes, retention and close
 * cover both.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { type Logger, silentLogger } from '@klog/logger';
import { defaultLogConfig, type LogConfig } from './config.js';
import {
  InvalidTopicError,
  isValidTopicName,
  LogClosedError,
  ReplicaDirError,
  ReplicatedTopicError,
  TooManyPartitionsError,
  UnknownTopicError,
  WrongPartitionError,
} from './errors.js';
import { defaultFlushThreads, setFlushThreads } from './flusher.js';
import { Log, type FlushEvent } from './log.js';
import { lockLogDir } from './log-dir-lock.js';
import { type ReplicaDirInfo, ReplicaDirs } from './replica-dirs.js';
import type { ReplicaLog } from './replica-log.js';
import { isTopicId } from './replica-metadata.js';
import { syncDir } from './segment.js';
import { makeDirs } from './make-dirs.js';

/**
 * Name of the file `close()` writes in the log directory. When present on start, the last
 * segments are trusted without a scan; it is removed on start so that a later crash is noticed.
 */
export const cleanShutdownFileName = '.klog_cleanshutdown';

/** Settings of a {@link LogManager}: the per-log settings plus where and how often. */
export interface LogManagerConfig extends LogConfig {
  /** Directory holding one `<topic>-<partition>` directory per partition; created when missing. */
  logDir: string;
  /** Partitions of a topic created on first use; default 1. */
  numPartitions: number;
  /** How often retention runs, in ms; default 300 000 (5 minutes). */
  retentionCheckIntervalMs: number;
  /**
   * Most fdatasyncs at once, process-wide (`flush.threads`, 1 to 64, default 4): the flusher's
   * own threads, apart from libuv's pool (see flusher.ts).
   */
  flushThreads: number;
  /** Whether {@link LogManager.getOrCreateLog} creates a topic it does not have (`auto.create.topics.enable`); default true. */
  autoCreateTopics: boolean;
  /** Most partitions the manager creates topics up to, counting those on disk (`max.partitions`); default 10 000. */
  maxPartitions: number;
  /** Where log entries go (pino fits); default: nowhere. */
  logger?: Logger;
}

/** `LogManagerConfig` defaults, `logDir` aside. */
export const defaultLogManagerConfig: Readonly<Omit<LogManagerConfig, 'logDir' | 'logger'>> = Object.freeze({
  ...defaultLogConfig,
  numPartitions: 1,
  retentionCheckIntervalMs: 300_000,
  flushThreads: defaultFlushThreads,
  autoCreateTopics: true,
  maxPartitions: 10_000,
});

/** New partitions whose directories and first segments are created at once while a topic is created. */
const creationConcurrency = 16;

/** `{ topic, partition }` from a partition directory name, split at the last '-'; `undefined` if it does not parse. */
export function parsePartitionDirName(name: string): { topic: string; partition: number } | undefined {
  const dash = name.lastIndexOf('-');
  if (dash <= 0) return undefined;
  const topic = name.slice(0, dash);
  const digits = name.slice(dash + 1);
  if (!/^(0|[1-9]\d{0,8})$/.test(digits) || !isValidTopicName(topic)) return undefined;
  return { topic, partition: Number(digits) };
}

/** The partition logs of one broker. Create with {@link LogManager.open}. */
export class LogManager {
  /** Settings in force (defaults filled in). */
  readonly config: Readonly<LogManagerConfig>;
  /** Topic → partition count. */
  readonly #topics = new Map<string, number>();
  /** Called after each topic this manager creates. */
  readonly #topicListeners = new Set<(topic: string, partitions: number) => void>();
  /** Called after every flush of any log (see `Log.onFlushDone`). */
  readonly #flushDoneListeners = new Set<(event: FlushEvent) => void>();
  /** `<topic>-<partition>` → open log. */
  readonly #logs = new Map<string, Log>();
  /** Topics being created (their file work runs off the request path) → the creation. */
  readonly #creating = new Map<string, Promise<number>>();
  /** Runs retention every `retentionCheckIntervalMs` (unref'd). */
  #retentionTimer: NodeJS.Timeout | undefined;
  #closed = false;
  /** Releases the log dir's lock. */
  #unlock: () => void = () => {};
  readonly #logger: Logger;
  /** The replica logs, apart from the paper ones. */
  readonly #replicas: ReplicaDirs;

  private constructor(config: LogManagerConfig) {
    this.config = config;
    this.#logger = config.logger ?? silentLogger;
    this.#replicas = new ReplicaDirs({
      logDir: config.logDir,
      logger: this.#logger,
      logConfig: () => pickLogConfig(this.config),
      flushDone: (event) => {
        for (const listener of this.#flushDoneListeners) listener(event);
      },
    });
  }

  /**
   * Creates `logDir` if needed and opens every `<topic>-<partition>` directory in it (others
   * are skipped with a warning), a replica's as a {@link ReplicaLog} (one that fails to open is
   * listed with its error, not fatal), leftovers of a replica's creation or deletion removed and
   * `.stale` ones left alone (docs/replication.md §8.1). Unless the clean-shutdown marker is present, each log's last
   * segment is recovered (docs/design.md §2); the marker is then removed. A topic found on disk keeps
   * its partition count (highest partition + 1). Starts the retention timer (unref'd). Holds
   * the log dir's lock (`.lock`) until `close()`.
   * Sets the flusher's thread count from `flushThreads` (see {@link setFlushThreads}).
   * @throws RangeError for a bad setting; LogDirLockedError when another running process holds
   *   the log dir; file system errors
   */
  static async open(config: Partial<LogManagerConfig> & { logDir: string }): Promise<LogManager> {
    const full: LogManagerConfig = { ...defaultLogManagerConfig, ...config };
    for (const key of ['numPartitions', 'retentionCheckIntervalMs', 'maxPartitions'] as const) {
      if (!Number.isSafeInteger(full[key]) || full[key] <= 0) throw new RangeError(`${key} must be a positive integer, got ${full[key]}`);
    }
    setFlushThreads(full.flushThreads);
    const manager = new LogManager(full);
    const logger = manager.#logger;
    await makeDirs(full.logDir);
    manager.#unlock = lockLogDir(full.logDir);
    const marker = path.join(full.logDir, cleanShutdownFileName);
    const clean = fs.existsSync(marker);
    const started = Date.now();
    try {
      for (const entry of await fs.promises.readdir(full.logDir, { withFileTypes: true })) {
        if (!entry.isDirectory()) continue;
        const parsed = parsePartitionDirName(entry.name);
        if (parsed === undefined) {
          if (!(await manager.#replicas.sweepLeftover(entry.name))) logger.warn({ dir: entry.name }, 'skipping directory that is not <topic>-<partition>');
          continue;
        }
        if (await ReplicaDirs.isReplicaDir(path.join(full.logDir, entry.name))) {
          await manager.#replicas.load(parsed.topic, parsed.partition, !clean);
          continue;
        }
        manager.#openLog(parsed.topic, parsed.partition, !clean);
        manager.#topics.set(parsed.topic, Math.max(manager.#topics.get(parsed.topic) ?? 0, parsed.partition + 1));
      }
      // A topic with a missing partition directory gets it now, so every partition below the count has a log;
      // never in a replica's directory (a paper topic and a replicated one of the same name, docs/replication.md §3).
      for (const [topic, count] of manager.#topics) {
        for (let p = 0; p < count; p++) {
          if (manager.getLog(topic, p) !== undefined) continue;
          if (!manager.#replicas.has(topic, p)) manager.#openLog(topic, p, false);
          else logger.error({ topic, partition: p }, 'paper topic has a partition whose directory is a replica: that partition is not opened');
        }
      }
    } catch (err) {
      await manager.close({ markClean: false });
      throw err;
    }
    if (clean) await fs.promises.rm(marker, { force: true });
    const loaded = { logs: manager.#logs.size, topics: manager.#topics.size, replicas: manager.#replicas.size };
    logger.info({ logDir: full.logDir, ...loaded, cleanShutdown: clean, ms: Date.now() - started }, 'logs loaded');
    manager.#retentionTimer = setInterval(() => {
      manager.cleanupExpired().catch((err: unknown) => logger.error({ err }, 'retention failed'));
    }, full.retentionCheckIntervalMs);
    manager.#retentionTimer.unref();
    return manager;
  }

  /** The open log of a partition, or `undefined` when it does not exist. */
  getLog(topic: string, partition: number): Log | undefined {
    return this.#logs.get(`${topic}-${partition}`);
  }

  /**
   * The log of a partition, creating the topic (with `numPartitions` partitions, all
   * directories) when it is new and `autoCreateTopics` allows. The file work of a creation runs
   * without blocking the event loop; calls for a topic being created share that creation. A bad
   * partition of a new topic does not create the topic.
   * @throws (rejects with) WrongPartitionError when `partition` is not an integer in
   *   `[0, partition count)`; InvalidTopicError for a bad topic name; UnknownTopicError when the
   *   topic is new and `autoCreateTopics` is false; ReplicatedTopicError when the broker holds
   *   replica logs of `topic`; what {@link LogManager.createTopic} throws
   */
  async getOrCreateLog(topic: string, partition: number): Promise<Log> {
    const existing = this.getLog(topic, partition);
    if (existing !== undefined) return existing;
    const known = this.#topics.has(topic);
    if (!known && this.#replicas.hasTopic(topic)) throw new ReplicatedTopicError(topic);
    if (!known && !isValidTopicName(topic)) throw new InvalidTopicError(topic);
    const count = this.#topics.get(topic) ?? this.config.numPartitions;
    if (!Number.isSafeInteger(partition) || partition < 0 || partition >= count) throw new WrongPartitionError(topic, partition, count);
    if (!known && !this.#creating.has(topic) && !this.config.autoCreateTopics) throw new UnknownTopicError(topic);
    await this.createTopic(topic);
    const log = this.getLog(topic, partition);
    if (log === undefined) throw new WrongPartitionError(topic, partition, this.#topics.get(topic) ?? 0);
    return log;
  }

  /** Partitions of `topic`, or `undefined` for a topic this broker does not have (or is still creating). */
  partitionCount(topic: string): number | undefined {
    return this.#topics.get(topic);
  }

  /** Partitions of all topics, those on disk included. */
  get partitionTotal(): number {
    return this.#logs.size;
  }

  /**
   * Creates `topic` with `partitions` partitions (default `numPartitions`) if it does not exist, whatever
   * `autoCreateTopics` says (this is the explicit act). Directories and segment files are
   * created asynchronously, a few at a time, and fsynced with the log dir; the topic is
   * visible (`partitionCount`, `getLog`) only once all its partitions exist. Concurrent calls
   * share one creation.
   * @returns the topic's partition count (an existing topic's own)
   * @throws (rejects with) InvalidTopicError; RangeError for a partition count that is not a
   *   positive integer; TooManyPartitionsError when it would pass `maxPartitions`;
   *   ReplicatedTopicError when the broker holds replica logs of `topic`; LogClosedError after `close()`; DiskFullError; file system errors (the
   *   partitions made so far are closed and the topic is not created; a retry reuses their
   *   directories)
   */
  createTopic(topic: string, partitions = this.config.numPartitions): Promise<number> {
    const known = this.#topics.get(topic);
    if (known !== undefined) return Promise.resolve(known);
    const running = this.#creating.get(topic);
    if (running !== undefined) return running;
    if (this.#closed) return Promise.reject(new LogClosedError('log manager'));
    if (!isValidTopicName(topic)) return Promise.reject(new InvalidTopicError(topic));
    if (!Number.isSafeInteger(partitions) || partitions < 1) return Promise.reject(new RangeError(`partition count must be a positive integer, got ${partitions}`));
    if (this.#replicas.hasTopic(topic)) return Promise.reject(new ReplicatedTopicError(topic));
    const count = partitions;
    let reserved = this.#logs.size + this.#replicas.size;
    for (const t of this.#creating.keys()) reserved += t === topic ? 0 : this.config.numPartitions;
    if (reserved + count > this.config.maxPartitions) return Promise.reject(new TooManyPartitionsError(topic, reserved, count, this.config.maxPartitions));
    const creation = this.#create(topic, count).finally(() => this.#creating.delete(topic));
    this.#creating.set(topic, creation);
    return creation;
  }

  async #create(topic: string, count: number): Promise<number> {
    const started = Date.now();
    const logs: Log[] = [];
    try {
      for (let from = 0; from < count; from += creationConcurrency) {
        const batch = [];
        for (let p = from; p < Math.min(count, from + creationConcurrency); p++) batch.push(Log.create(this.#logOptions(topic, p)));
        const results = await Promise.allSettled(batch);
        for (const r of results) if (r.status === 'fulfilled') logs.push(r.value);
        const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
        if (failed !== undefined) throw failed.reason;
      }
      await syncDir(this.config.logDir);
      if (this.#closed) throw new LogClosedError('log manager');
    } catch (err) {
      await Promise.allSettled(logs.map((log) => log.close()));
      throw err;
    }
    for (const log of logs) this.#add(log);
    this.#topics.set(topic, count);
    this.#logger.info({ topic, partitions: count, ms: Date.now() - started }, 'created topic');
    for (const listener of this.#topicListeners) listener(topic, count);
    return count;
  }

  /**
   * Calls `listener(topic, partitionCount)` after each topic this manager creates (not for
   * topics loaded from disk at open; read those from `topics()`). A cluster broker registers
   * new topics in ZooKeeper this way (docs/design.md §4).
   * @returns a function that removes the listener
   */
  onTopicCreated(listener: (topic: string, partitions: number) => void): () => void {
    this.#topicListeners.add(listener);
    return () => this.#topicListeners.delete(listener);
  }

  /**
   * Calls `listener` after every flush of every log, those opened later included, with the
   * flush's duration and outcome (see `Log.onFlushDone`): the hook for flush count and latency
   * metrics.
   * @returns a function that removes the listener
   */
  onFlushDone(listener: (event: FlushEvent) => void): () => void {
    this.#flushDoneListeners.add(listener);
    return () => this.#flushDoneListeners.delete(listener);
  }

  /** Topic → partition count (a live read-only view). */
  topics(): ReadonlyMap<string, number> {
    return this.#topics;
  }

  /** Every open log. */
  logs(): Iterable<Log> {
    return this.#logs.values();
  }

  /**
   * The replica log of `<topic>-<partition>` (docs/replication.md §8.1), loaded at start or
   * created by {@link LogManager.createReplicaLog}; undefined when the broker has none.
   * @throws the error that kept a replica found at start from opening (a `replica.properties` or
   *   leader-epoch checkpoint that does not parse: the broker takes no role for it)
   */
  getReplicaLog(topic: string, partition: number): ReplicaLog | undefined {
    return this.#replicas.get(topic, partition);
  }

  /** Every open replica log (never among {@link LogManager.logs}). */
  replicaLogs(): Iterable<ReplicaLog> {
    return this.#replicas.logs();
  }

  /**
   * Every replica directory held, open or failed to open, with its topic id: what the broker
   * checks against the topic ids in ZooKeeper at start, renaming the leftovers aside with
   * {@link LogManager.renameStaleReplica} (docs/replication.md §8.1).
   */
  replicaDirs(): ReplicaDirInfo[] {
    return this.#replicas.list();
  }

  /**
   * Creates the replica log of `<topic>-<partition>` for the topic of id `topicId`, without
   * blocking the event loop (`ReplicaLog.create`: `replica.properties` on disk before the
   * directory takes its name, directories fsynced), or returns the one held when it has that
   * topic id. Calls for one partition run one at a time. The broker calls it only when a
   * LEADER_AND_ISR allows (docs/replication.md §8.1: `isNew`, or not in the ISR).
   * @throws (rejects with) InvalidTopicError; RangeError for a partition that is not a
   *   non-negative integer or a topic id that is not 16 lowercase hex digits; ReplicaDirError when
   *   the directory holds a paper log, a replica of another topic id or one that failed to open,
   *   or the broker has a paper topic of that name; TooManyPartitionsError past `maxPartitions`;
   *   LogClosedError after `close()`; DiskFullError; file system errors
   */
  createReplicaLog(topic: string, partition: number, topicId: string): Promise<ReplicaLog> {
    if (this.#closed) return Promise.reject(new LogClosedError('log manager'));
    if (!isValidTopicName(topic)) return Promise.reject(new InvalidTopicError(topic));
    if (!Number.isSafeInteger(partition) || partition < 0) return Promise.reject(new RangeError(`partition must be a non-negative integer, got ${partition}`));
    if (!isTopicId(topicId)) return Promise.reject(new RangeError(`topic id must be 16 lowercase hex digits, got ${JSON.stringify(topicId)}`));
    const dir = path.join(this.config.logDir, `${topic}-${partition}`);
    if (this.#logs.has(`${topic}-${partition}`)) return Promise.reject(new ReplicaDirError(dir, 'holds a paper partition'));
    if (this.#topics.has(topic) || this.#creating.has(topic)) return Promise.reject(new ReplicaDirError(dir, `topic ${topic} is a paper topic on this broker`));
    if (!this.#replicas.has(topic, partition)) {
      const reserved = this.#logs.size + this.#replicas.size + [...this.#creating.keys()].length * this.config.numPartitions;
      if (reserved + 1 > this.config.maxPartitions) return Promise.reject(new TooManyPartitionsError(topic, reserved, 1, this.config.maxPartitions));
    }
    return this.#replicas.create(topic, partition, topicId);
  }

  /**
   * Deletes the replica log of `<topic>-<partition>` (topic deletion, STOP_REPLICA `delete` 1,
   * docs/replication.md §6.2) without blocking the event loop: closes it (a flush first), renames
   * the directory to `<topic>-<partition>.<ms>.deleting` and fsyncs the log dir, removes it and
   * fsyncs the log dir again. A crash midway leaves the `.deleting` directory, removed at the
   * next start. Also removes a replica that failed to open.
   * @returns false when the broker holds no replica of that partition
   * @throws (rejects with) file system errors
   */
  deleteReplicaLog(topic: string, partition: number): Promise<boolean> {
    return this.#replicas.delete(topic, partition);
  }

  /**
   * Renames the replica directory of `<topic>-<partition>` aside as
   * `<topic>-<partition>.<ms>.stale` (closing its log first, log dir fsynced), logs it at warn and
   * counts it ({@link LogManager.staleReplicaDirs}): for a replica whose topic id is not its
   * topic's in ZooKeeper (docs/replication.md §8.1). Nothing is deleted.
   * @returns the new path, or undefined when the broker holds no such replica
   * @throws (rejects with) file system errors
   */
  renameStaleReplica(topic: string, partition: number): Promise<string | undefined> {
    return this.#replicas.renameStale(topic, partition);
  }

  /** Replica directories this manager renamed aside as stale (`klog_stale_replica_dirs`, docs/replication.md §15.3). */
  get staleReplicaDirs(): number {
    return this.#replicas.staleRenamed;
  }

  /** Flushes every log, replicas included (see `Log.flush`). @throws the first flush error, after all have run */
  async flushAll(): Promise<void> {
    const results = await Promise.allSettled([...this.#logs.values(), ...this.#replicas.logs()].map((log) => log.flush()));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
  }

  /**
   * Runs retention (`Log.deleteOldSegments`) over every log, replicas included.
   * @param now ms since the epoch; default `Date.now()`
   * @returns segments deleted in all
   */
  async cleanupExpired(now = Date.now()): Promise<number> {
    let deleted = 0;
    for (const log of [...this.#logs.values(), ...this.#replicas.logs()]) deleted += await log.deleteOldSegments(now);
    if (deleted > 0) this.#logger.info({ segments: deleted }, 'retention deleted segments');
    return deleted;
  }

  /**
   * Stops the retention timer, flushes and closes every log (replicas included), then writes the clean-shutdown
   * marker (fsync'd, with its directory) so the next start skips recovery. The marker is not
   * written when a log fails to close. Idempotent.
   * @throws the first error closing a log
   */
  async close(options: { markClean?: boolean } = {}): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#retentionTimer !== undefined) clearInterval(this.#retentionTimer);
    try {
      await Promise.allSettled([...this.#creating.values()]);
      const results = await Promise.allSettled([...[...this.#logs.values()].map((log) => log.close()), this.#replicas.closeAll()]);
      const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed !== undefined) throw failed.reason;
      if (options.markClean === false) return;
      const marker = await fs.promises.open(path.join(this.config.logDir, cleanShutdownFileName), 'w');
      try {
        await marker.sync();
      } finally {
        await marker.close();
      }
      await syncDir(this.config.logDir);
    } finally {
      this.#unlock();
    }
  }

  #logOptions(topic: string, partition: number): { dir: string; topic: string; partition: number; config: LogConfig; logger: Logger } {
    return { dir: path.join(this.config.logDir, `${topic}-${partition}`), topic, partition, config: pickLogConfig(this.config), logger: this.#logger };
  }

  #openLog(topic: string, partition: number, recover: boolean): Log {
    return this.#add(Log.open({ ...this.#logOptions(topic, partition), recover }));
  }

  #add(log: Log): Log {
    log.onFlushDone((event) => {
      for (const listener of this.#flushDoneListeners) listener(event);
    });
    this.#logs.set(`${log.topic}-${log.partition}`, log);
    return log;
  }
}

function pickLogConfig(c: LogConfig): LogConfig {
  const { flushPolicy, segmentBytes, flushMessages, flushIntervalMs, retentionMs, retentionBytes } = c;
  return { flushPolicy, segmentBytes, flushMessages, flushIntervalMs, retentionMs, retentionBytes };
}
