/**
 * The ephemeral re-registration recipe (docs/architecture.md, "ZooKeeper"), as Kafka 0.7's
 * session-expiry listener re-registers a broker: the client keeps the registrations it was
 * asked for (path → data) and reconciles ZooKeeper against them until they hold, however long
 * ZooKeeper was away:
 *
 * - a registration whose write did not get through (ZooKeeper unreachable, a timeout) stays
 *   wanted and is written again, with backoff (@klog/retry), once ZooKeeper answers;
 * - after a new session (an expiry, or a server that lost its data) every registration is
 *   written again in the new session;
 * - a node held by a session this client gave up is taken over (removed and written again);
 * - a node held by another live session is a conflict: the registration is dropped and
 *   reported (`ephemeralConflict`), never fought over.
 */
import { Backoff, sleep, type BackoffOptions } from '@klog/retry';
import { parentPath } from './connect-string.js';
import { ZkBadVersionError, ZkError, ZkErrorCode, ZkNodeExistsError } from './errors.js';
import type { Logger } from '@klog/logger';
import type { ZkNode, ZkStat } from './zk-types.js';

/** What the recipe needs of the client. */
export interface EphemeralOps {
  /** The current session id; '' while there is none. */
  sessionId(): string;
  /** Sessions this client gave up: their nodes are this client's to take over. */
  formerSessionIds(): ReadonlySet<string>;
  /** Creates an ephemeral node of the current session, carried over to a new session when `retryOnExpiry`. */
  createEphemeralNode(path: string, data: Buffer, retryOnExpiry: boolean): Promise<void>;
  mkdirp(path: string): Promise<void>;
  getData(path: string): Promise<ZkNode | undefined>;
  setData(path: string, data: Buffer): Promise<ZkStat>;
  exists(path: string): Promise<ZkStat | undefined>;
  remove(path: string, options: { version: number }): Promise<boolean>;
  /** Resolves true once connected, false when the client closed. */
  untilConnected(): Promise<boolean>;
  isClosed(): boolean;
  readonly logger: Logger;
  readonly backoff: BackoffOptions;
  onConflict(path: string, owner: string | undefined): void;
}

/** See the file comment. */
export class EphemeralRegistrations {
  /** What should exist: path → data. */
  private readonly wanted = new Map<string, Buffer>();
  /** Path → the session in which it was last written with the wanted data. */
  private readonly written = new Map<string, string>();
  private reconciling: Promise<void> | undefined;

  constructor(private readonly ops: EphemeralOps) {}

  /** Paths of the registrations, sorted. */
  paths(): string[] {
    return [...this.wanted.keys()].sort();
  }

  /**
   * Registers `path` with `data` and writes it. Rejects with {@link ZkNodeExistsError} when
   * another live session holds it (the registration is then dropped, the previous data kept if
   * any). Any other failure (ZooKeeper unreachable: {@link ZkTimeoutError}) is rejected too, but
   * the registration stays: it is written once ZooKeeper answers.
   */
  async register(path: string, data: Buffer): Promise<void> {
    const previous = this.wanted.get(path);
    this.wanted.set(path, data);
    this.written.delete(path);
    try {
      await this.ensure(path, data, true);
      if (this.wanted.get(path) === data) this.written.set(path, this.ops.sessionId());
    } catch (error) {
      if (error instanceof ZkNodeExistsError) {
        if (previous === undefined) this.wanted.delete(path);
        else this.wanted.set(path, previous);
      } else if (!this.ops.isClosed()) {
        this.ops.logger.warn({ path, err: error }, 'ephemeral node not written yet; it is written once ZooKeeper answers');
        void this.reconcile();
      }
      throw error;
    }
  }

  /** Stops re-creating `path`; returns whether it was wanted. */
  unregister(path: string): boolean {
    this.written.delete(path);
    return this.wanted.delete(path);
  }

  /**
   * Writes every registration not yet written in the current session, until all are (retrying
   * with backoff while ZooKeeper fails) or the client closes. One run at a time; a call while
   * one runs joins it.
   */
  reconcile(): Promise<void> {
    this.reconciling ??= this.reconcileLoop().finally(() => {
      this.reconciling = undefined;
    });
    return this.reconciling;
  }

  private pending(): Array<[string, Buffer]> {
    const session = this.ops.sessionId();
    return [...this.wanted].filter(([path]) => this.written.get(path) !== session);
  }

  private async reconcileLoop(): Promise<void> {
    const backoff = new Backoff(this.ops.backoff);
    for (let todo = this.pending(); todo.length > 0 && !this.ops.isClosed(); todo = this.pending()) {
      if (!(await this.ops.untilConnected())) return;
      let failed: unknown;
      for (const [path, data] of todo) {
        if (this.wanted.get(path) !== data) continue; // changed or unregistered meanwhile
        try {
          await this.ensure(path, data, true);
          if (this.wanted.get(path) === data) this.written.set(path, this.ops.sessionId());
        } catch (error) {
          if (error instanceof ZkNodeExistsError) {
            const owner = (await this.ops.exists(path).catch(() => undefined))?.ephemeralOwner;
            this.unregister(path);
            this.ops.logger.error({ path, owner }, 'cannot re-create an ephemeral node: another session holds it');
            this.ops.onConflict(path, owner);
          } else {
            failed = error;
            break;
          }
        }
      }
      if (failed !== undefined && !this.ops.isClosed()) {
        const delayMs = backoff.next();
        this.ops.logger.warn({ err: failed, pending: this.pending().length, retryInMs: delayMs }, 'could not write the registered ephemeral nodes; retrying');
        await sleep(delayMs);
      }
    }
  }

  /**
   * Makes `path` an ephemeral node of the current session holding `data`: creates it, or finds
   * it already this session's (rewriting the data if it differs), or takes it over from a
   * former session of this client. Throws {@link ZkNodeExistsError} when another session holds it.
   */
  async ensure(path: string, data: Buffer, retryOnExpiry: boolean): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      await this.ops.mkdirp(parentPath(path));
      try {
        await this.ops.createEphemeralNode(path, data, retryOnExpiry);
        return;
      } catch (error) {
        if (!(error instanceof ZkNodeExistsError)) throw error;
      }
      // It exists: ours (a retried create, or a re-registration), a former session's, or another session's.
      const node = await this.ops.getData(path);
      if (node === undefined) continue; // deleted meanwhile: create again
      const owner = node.stat.ephemeralOwner;
      if (owner !== undefined && owner === this.ops.sessionId()) {
        if (!node.data.equals(data)) await this.ops.setData(path, data);
        return;
      }
      if (owner !== undefined && this.ops.formerSessionIds().has(owner)) {
        this.ops.logger.info({ path, formerSessionId: owner }, 'taking over an ephemeral node from a session this client gave up');
        await this.ops.remove(path, { version: node.stat.version }).catch((err: unknown) => {
          if (!(err instanceof ZkBadVersionError)) throw err;
        });
        continue;
      }
      throw new ZkNodeExistsError(`${path} is held by ${owner === undefined ? 'a persistent node' : `session ${owner}`}`, {
        code: ZkErrorCode.nodeExists,
        path,
      });
    }
    throw new ZkError(`could not create ${path}: it keeps being created and deleted`, { path });
  }
}
