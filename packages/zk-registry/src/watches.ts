/**
 * The persistent-watch recipe (docs/architecture.md, "ZooKeeper"): ZooKeeper's watches fire
 * once; a subscription here reads the value, leaves a one-shot watch that runs it again, and
 * calls back with the current value on every change until closed, across reconnects and new
 * sessions (re-armed by {@link PersistentWatches.rearm}). Callbacks never overlap: changes that
 * happen while one runs are delivered once it returns, as the latest value. A read that fails
 * is retried with backoff (@klog/retry); a callback that throws is logged and does not stop it.
 */
import type { Client as RawClient, Stat as RawStat } from 'node-zookeeper-client';
import { Backoff, sleep, type BackoffOptions } from '@klog/retry';
import { ZkClosedError, ZkNoNodeError } from './errors.js';
import type { Logger } from '@klog/logger';
import type { Invoke } from './zk-session.js';
import { toStat, type ZkNode, type ZkWatch } from './zk-types.js';

/** What the recipe needs of the client. */
export interface WatchOps {
  /** Runs a request with the client's retries (see `SessionManager.request`). */
  request<T>(what: string, path: string, invoke: Invoke<T>): Promise<T>;
  isClosed(): boolean;
  readonly logger: Logger;
  readonly backoff: BackoffOptions;
}

interface Subscription {
  readonly kind: 'children' | 'data' | 'node';
  readonly path: string;
  readonly callback: (value: never) => void | Promise<void>;
  active: boolean;
  running: boolean;
  again: boolean;
  delivered: () => void;
}

/** See the file comment. */
export class PersistentWatches {
  private readonly subscriptions = new Set<Subscription>();

  constructor(private readonly ops: WatchOps) {}

  /** How many subscriptions are open. */
  get size(): number {
    return this.subscriptions.size;
  }

  /**
   * Starts a subscription to the sorted children of `path` (`kind` children), its data (`data`,
   * undefined while missing) or its data and stat (`node`, undefined while missing).
   */
  subscribe<T>(kind: 'children' | 'data' | 'node', path: string, callback: (value: T) => void | Promise<void>): ZkWatch {
    if (this.ops.isClosed()) throw new ZkClosedError('ZooKeeper client is closed');
    let delivered!: () => void;
    const ready = new Promise<void>((resolve) => (delivered = resolve));
    const sub: Subscription = { kind, path, callback, active: true, running: false, again: false, delivered };
    this.subscriptions.add(sub);
    void this.run(sub);
    return {
      ready,
      close: () => {
        sub.active = false;
        sub.delivered();
        this.subscriptions.delete(sub);
      },
    };
  }

  /** Reads every subscription again (a new session has none of the old watches). */
  rearm(): void {
    for (const sub of this.subscriptions) void this.run(sub);
  }

  /** Ends every subscription. */
  closeAll(): void {
    for (const sub of this.subscriptions) {
      sub.active = false;
      sub.delivered();
    }
    this.subscriptions.clear();
  }

  private async run(sub: Subscription): Promise<void> {
    if (!sub.active) return;
    if (sub.running) {
      sub.again = true;
      return;
    }
    sub.running = true;
    const backoff = new Backoff(this.ops.backoff);
    try {
      do {
        sub.again = false;
        let value: string[] | Buffer | ZkNode | undefined;
        try {
          value = await this.readAndWatch(sub);
          backoff.reset();
        } catch (error) {
          if (!sub.active || this.ops.isClosed()) return;
          this.ops.logger.warn({ path: sub.path, err: error }, 'could not read a watched ZooKeeper node; retrying');
          await sleep(backoff.next());
          sub.again = true;
          continue;
        }
        if (!sub.active) return;
        try {
          await sub.callback(value as never);
        } catch (error) {
          this.ops.logger.error({ path: sub.path, err: error }, 'ZooKeeper watch callback failed');
        }
        sub.delivered();
      } while (sub.again && sub.active);
    } finally {
      sub.running = false;
    }
  }

  /** Reads the watched value and leaves a one-shot watch that runs the subscription again. */
  private async readAndWatch(sub: Subscription): Promise<string[] | Buffer | ZkNode | undefined> {
    const watcher = (): void => {
      if (sub.active && !this.ops.isClosed()) void this.run(sub);
    };
    const path = sub.path;
    for (;;) {
      try {
        if (sub.kind === 'children') {
          const children = await this.ops.request<string[]>('getChildren', path, (raw: RawClient, done) =>
            raw.getChildren(path, watcher, (error, list) => (error ? done(error) : done(null, list))),
          );
          return [...children].sort();
        }
        const node = await this.ops.request<ZkNode>('getData', path, (raw: RawClient, done) =>
          raw.getData(path, watcher, (error, data, stat) => (error ? done(error) : done(null, { data: data ?? Buffer.alloc(0), stat: toStat(stat) }))),
        );
        return sub.kind === 'node' ? node : node.data;
      } catch (error) {
        if (!(error instanceof ZkNoNodeError)) throw error;
      }
      // Missing: watch for its creation; if it appeared meanwhile, read again.
      const stat = await this.ops.request<RawStat | null>('exists', path, (raw: RawClient, done) => raw.exists(path, watcher, done));
      if (stat === null) return sub.kind === 'children' ? [] : undefined;
    }
  }
}
