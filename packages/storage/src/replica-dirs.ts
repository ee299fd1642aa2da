/**
 * The replica logs of a log manager (docs/replication.md §8.1), kept apart from its paper logs:
 * a `LOG_DIR/<topic>-<partition>/` with a `replica.properties` is a replica. They are loaded at
 * start, created when a LEADER_AND_ISR allows, deleted by STOP_REPLICA, and renamed aside
 * (`<topic>-<partition>.<ms>.stale`) when ZooKeeper knows no topic of their topic id. Every file
 * call here is asynchronous, and every directory created, renamed or removed has its parent
 * fsynced. {@link LogManager} holds one of these; the broker uses it through the manager.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Logger } from '@klog/logger';
import type { LogConfig } from './config.js';
import { ReplicaDirError } from './errors.js';
import type { FlushEvent } from './log.js';
import { replicaCreatingSuffix, ReplicaLog } from './replica-log.js';
import { readReplicaMetadata, replicaPropertiesFileName } from './replica-metadata.js';
import { syncDir } from './segment.js';

/** Suffix of a leftover replica directory renamed aside: `<topic>-<partition>.<ms>.stale`. */
export const staleReplicaSuffix = '.stale';
/** Suffix of a replica directory being deleted: `<topic>-<partition>.<ms>.deleting` (removed on the next start if a crash left it). */
export const deletingReplicaSuffix = '.deleting';

/** One replica directory of the log dir, as {@link LogManager.replicaDirs} lists it. */
export interface ReplicaDirInfo {
  readonly topic: string;
  readonly partition: number;
  /** The directory, `LOG_DIR/<topic>-<partition>`. */
  readonly dir: string;
  /** The topic id of its `replica.properties`; undefined when that file does not parse. */
  readonly topicId: string | undefined;
  /** The open log; undefined when it failed to open (then `error` says why). */
  readonly log: ReplicaLog | undefined;
  /** Why the replica could not be opened (a `replica.properties` or checkpoint that does not parse, a file system error). */
  readonly error?: unknown;
}

/** What the log manager lends its replicas: where they live, their settings, the flush hook. */
export interface ReplicaDirsContext {
  readonly logDir: string;
  readonly logger: Logger;
  logConfig(): LogConfig;
  /** Called with every flush of every replica log. */
  flushDone(event: FlushEvent): void;
}

/** The replica logs of one log dir. */
export class ReplicaDirs {
  /** `<topic>-<partition>` → the replica, open or failed. */
  readonly #replicas = new Map<string, ReplicaDirInfo>();
  /** `<topic>-<partition>` → a creation, deletion or rename running on it. */
  readonly #busy = new Map<string, Promise<unknown>>();
  /** Leftover replica directories this manager renamed aside. */
  #staleRenamed = 0;

  constructor(readonly context: ReplicaDirsContext) {}

  /** True when `dir` (a `<topic>-<partition>` directory) is a replica's: it holds `replica.properties`. */
  static async isReplicaDir(dir: string): Promise<boolean> {
    try {
      await fs.promises.access(path.join(dir, replicaPropertiesFileName));
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Handles, at start, a directory entry whose name is not `<topic>-<partition>`: a replica
   * being created or deleted when the broker stopped is removed (neither holds a message that
   * counts: one never had its name, the other was being deleted); a `.stale` one is left alone.
   * @returns true when the name was one of those
   */
  async sweepLeftover(name: string): Promise<boolean> {
    const { logDir, logger } = this.context;
    if (name.endsWith(staleReplicaSuffix)) {
      logger.info({ dir: path.join(logDir, name) }, 'leftover replica directory left for the operator');
      return true;
    }
    if (!name.endsWith(replicaCreatingSuffix) && !name.endsWith(deletingReplicaSuffix)) return false;
    await fs.promises.rm(path.join(logDir, name), { recursive: true, force: true });
    await syncDir(logDir);
    logger.info({ dir: path.join(logDir, name) }, 'removed a replica directory left half created or half deleted');
    return true;
  }

  /**
   * Opens the replica in `LOG_DIR/<topic>-<partition>` at start. A replica that fails to open
   * is kept as failed (listed with its error, `get` throws it) rather than failing the start:
   * the broker takes no role for it (docs/replication.md §8.2).
   */
  async load(topic: string, partition: number, recover: boolean): Promise<void> {
    const key = `${topic}-${partition}`;
    const dir = path.join(this.context.logDir, key);
    try {
      const log = await ReplicaLog.load({ ...this.#options(topic, partition), recover });
      this.#add(log);
    } catch (error) {
      const topicId = await readReplicaMetadata(dir).then((m) => m?.topicId, () => undefined);
      this.#replicas.set(key, { topic, partition, dir, topicId, log: undefined, error });
      this.context.logger.error({ topic, partition, dir, err: error }, 'replica log failed to open: no role is taken for it');
    }
  }

  /** Replicas held, open or failed. */
  get size(): number {
    return this.#replicas.size;
  }

  /** True when a replica of `topic` is held (open or failed) or being created. */
  hasTopic(topic: string): boolean {
    for (const r of this.#replicas.values()) if (r.topic === topic) return true;
    for (const key of this.#busy.keys()) if (key.slice(0, key.lastIndexOf('-')) === topic) return true;
    return false;
  }

  /** True when `<topic>-<partition>` is held as a replica (open or failed) or being created. */
  has(topic: string, partition: number): boolean {
    const key = `${topic}-${partition}`;
    return this.#replicas.has(key) || this.#busy.has(key);
  }

  /** See {@link LogManager.getReplicaLog}. */
  get(topic: string, partition: number): ReplicaLog | undefined {
    const r = this.#replicas.get(`${topic}-${partition}`);
    if (r?.error !== undefined) throw r.error as Error;
    return r?.log;
  }

  /** See {@link LogManager.replicaDirs}. */
  list(): ReplicaDirInfo[] {
    return [...this.#replicas.values()];
  }

  /** The open replica logs. */
  *logs(): Iterable<ReplicaLog> {
    for (const r of this.#replicas.values()) if (r.log !== undefined) yield r.log;
  }

  /** See {@link LogManager.staleReplicaDirs}. */
  get staleRenamed(): number {
    return this.#staleRenamed;
  }

  /**
   * See {@link LogManager.createReplicaLog}; the caller has checked the name, the paper logs and
   * the partition limit.
   */
  create(topic: string, partition: number, topicId: string): Promise<ReplicaLog> {
    return this.#exclusive(topic, partition, async () => {
      const key = `${topic}-${partition}`;
      const held = this.#replicas.get(key);
      if (held?.error !== undefined) throw new ReplicaDirError(held.dir, `failed to open: ${(held.error as Error).message}`);
      if (held?.log !== undefined) {
        if (held.log.topicId === topicId) return held.log;
        throw new ReplicaDirError(held.dir, `holds a replica of topic id ${held.log.topicId}, not ${topicId}`);
      }
      const log = await ReplicaLog.create({ ...this.#options(topic, partition), topicId });
      this.#add(log);
      return log;
    });
  }

  /** See {@link LogManager.deleteReplicaLog}. */
  delete(topic: string, partition: number): Promise<boolean> {
    return this.#exclusive(topic, partition, async () => {
      const r = this.#replicas.get(`${topic}-${partition}`);
      if (r === undefined) return false;
      // Renamed first, so a crash in the middle of removing the files never leaves a directory
      // named <topic>-<partition> without its replica.properties (it would open as a paper log).
      const doomed = await this.#renameAside(r, deletingReplicaSuffix);
      await fs.promises.rm(doomed, { recursive: true, force: true });
      await syncDir(this.context.logDir);
      this.context.logger.info({ topic, partition, dir: r.dir }, 'deleted replica log');
      return true;
    });
  }

  /** See {@link LogManager.renameStaleReplica}. */
  renameStale(topic: string, partition: number): Promise<string | undefined> {
    return this.#exclusive(topic, partition, async () => {
      const r = this.#replicas.get(`${topic}-${partition}`);
      if (r === undefined) return undefined;
      const stale = await this.#renameAside(r, staleReplicaSuffix);
      this.#staleRenamed++;
      this.context.logger.warn({ topic, partition, topicId: r.topicId, dir: r.dir, renamedTo: stale }, 'replica directory of an unknown topic id renamed aside, left for the operator');
      return stale;
    });
  }

  /** Closes every open replica log. @throws the first close error, after all have run */
  async closeAll(): Promise<void> {
    await Promise.allSettled([...this.#busy.values()]);
    const results = await Promise.allSettled([...this.logs()].map((log) => log.close()));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
  }

  /** Drops `r` from the replicas, closes its log, renames its directory `<dir>.<ms><suffix>` and fsyncs the log dir. @returns the new path */
  async #renameAside(r: ReplicaDirInfo, suffix: string): Promise<string> {
    this.#replicas.delete(`${r.topic}-${r.partition}`);
    await r.log?.close();
    const to = `${r.dir}.${Date.now()}${suffix}`;
    await fs.promises.rename(r.dir, to);
    await syncDir(this.context.logDir);
    return to;
  }

  /** Runs `op` once no other creation, deletion or rename of `<topic>-<partition>` runs. */
  #exclusive<T>(topic: string, partition: number, op: () => Promise<T>): Promise<T> {
    const key = `${topic}-${partition}`;
    const before = this.#busy.get(key) ?? Promise.resolve();
    const run = before.then(op, op);
    const settled = run.catch(() => {});
    this.#busy.set(key, settled);
    void settled.then(() => {
      if (this.#busy.get(key) === settled) this.#busy.delete(key);
    });
    return run;
  }

  #options(topic: string, partition: number): { dir: string; topic: string; partition: number; config: LogConfig; logger: Logger } {
    return { dir: path.join(this.context.logDir, `${topic}-${partition}`), topic, partition, config: this.context.logConfig(), logger: this.context.logger };
  }

  #add(log: ReplicaLog): void {
    log.onFlushDone((event) => this.context.flushDone(event));
    this.#replicas.set(`${log.topic}-${log.partition}`, { topic: log.topic, partition: log.partition, dir: log.dir, topicId: log.topicId, log });
  }
}
