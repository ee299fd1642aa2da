/**
 * ZkClient: klog's connection to ZooKeeper (docs/architecture.md, "ZooKeeper"), on
 * node-zookeeper-client. It is made of recipes, each in its own module; only zk-adapter.ts
 * touches the library's internals.
 *
 * - Chroot: `host:port[,host:port...]/chroot`; the chroot is created when missing (again after
 *   a server lost its data).
 * - Promise helpers for create (parents made as needed), getData/setData, getChildren,
 *   exists, recursive remove, multi-ops ({@link ZkClient.multi}, multi.ts) and a conditional
 *   write ({@link ZkClient.putIf}). Every path is
 *   relative to the chroot. Requests interrupted by a connection loss are retried with backoff
 *   until `operationTimeoutMs` (zk-session.ts).
 * - Sessions (zk-session.ts): kept across connection losses; after an expiry, or when no server
 *   takes the session back, a new session is opened, every ephemeral registered with
 *   {@link ZkClient.registerEphemeral} is written again (ephemerals.ts), every watch re-armed
 *   (watches.ts), and `session` is emitted so that dependents re-run.
 *
 * Events (in the order they happen):
 * - `connected` `{ sessionId, reconnect }`: connected; `reconnect` is true when an existing
 *   session survived a connection loss.
 * - `disconnected`: the connection was lost; the session may still be alive.
 * - `expired` `{ sessionId }`: the session is gone, and with it its ephemeral nodes.
 *   Dependents must stop acting on anything the old session held (e.g. partition ownership).
 * - `session` `{ sessionId, previousSessionId }`: a new session replaced an expired one; the
 *   registered ephemerals exist again and the watches are re-armed.
 * - `ephemeralConflict` `{ path, owner }`: re-creating a registered ephemeral node found it
 *   held by another live session; the node is no longer registered.
 * - `closed`: {@link ZkClient.close} finished.
 */
import { EventEmitter } from 'node:events';
import zookeeper from 'node-zookeeper-client';
import type { Stat as RawStat } from 'node-zookeeper-client';
import type { BackoffOptions } from '@klog/retry';
import { joinPath, parentPath, parseConnectString } from './connect-string.js';
import { EphemeralRegistrations } from './ephemerals.js';
import { ZkBadVersionError, ZkError, ZkErrorCode, ZkMultiError, ZkNoNodeError, ZkNodeExistsError } from './errors.js';
import { type Logger, silentLogger } from '@klog/logger';
import { PersistentWatches } from './watches.js';
import { commitMulti } from './multi.js';
import { SessionManager, type Invoke } from './zk-session.js';
import {
  rawCode,
  toBuffer,
  toStat,
  type ZkClientEvents,
  type ZkClientOptions,
  type ZkNode,
  type ZkOp,
  type ZkOpResult,
  type ZkSessionCredentials,
  type ZkStat,
  type ZkWatch,
} from './zk-types.js';

export { parseConnectString, parentPath, type ParsedConnectString } from './connect-string.js';
export type { ZkClientEvents, ZkClientOptions, ZkMultiFailure, ZkNode, ZkOp, ZkOpResult, ZkSessionCredentials, ZkStat, ZkWatch } from './zk-types.js';

const DEFAULTS = {
  sessionTimeoutMs: 6000,
  connectTimeoutMs: 10_000,
  operationTimeoutMs: 30_000,
  retryBaseDelayMs: 100,
};

// Typed events: the interface narrows the signatures of the methods EventEmitter gives the class.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export interface ZkClient {
  on<K extends keyof ZkClientEvents>(event: K, listener: ZkClientEvents[K]): this;
  once<K extends keyof ZkClientEvents>(event: K, listener: ZkClientEvents[K]): this;
  off<K extends keyof ZkClientEvents>(event: K, listener: ZkClientEvents[K]): this;
  emit<K extends keyof ZkClientEvents>(event: K, ...args: Parameters<ZkClientEvents[K]>): boolean;
}

/** klog's ZooKeeper connection. Create it with {@link ZkClient.connect}. */
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export class ZkClient extends EventEmitter {
  /** `host:port[,...]` of the ensemble. */
  readonly servers: string;
  /** The chroot every path is relative to, or undefined. */
  readonly chroot: string | undefined;
  /** The session timeout asked for, ms. */
  readonly sessionTimeoutMs: number;
  /** The logger given in the options (silent by default); the registries log to it too. */
  readonly logger: Logger;

  private readonly options: ZkClientOptions;
  private readonly sessions: SessionManager;
  private readonly ephemerals: EphemeralRegistrations;
  private readonly watches: PersistentWatches;

  private constructor(connectString: string, options: ZkClientOptions) {
    super();
    const { servers, chroot } = parseConnectString(connectString);
    this.servers = servers;
    this.chroot = chroot;
    this.options = options;
    this.sessionTimeoutMs = options.sessionTimeoutMs ?? DEFAULTS.sessionTimeoutMs;
    this.logger = options.logger ?? silentLogger;
    const initialMs = options.retryBaseDelayMs ?? DEFAULTS.retryBaseDelayMs;
    const backoff: BackoffOptions = {
      initialMs,
      maxMs: Math.max(initialMs, options.retryMaxDelayMs ?? Math.min(2000, Math.max(250, Math.floor(this.sessionTimeoutMs / 3)))),
    };
    this.sessions = new SessionManager({
      connectString: servers + (chroot ?? ''),
      servers,
      chroot,
      sessionTimeoutMs: this.sessionTimeoutMs,
      connectTimeoutMs: options.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs,
      operationTimeoutMs: options.operationTimeoutMs ?? DEFAULTS.operationTimeoutMs,
      backoff,
      logger: this.logger,
      emit: (event, ...args) => void this.emit(event, ...args),
      onNewSession: async () => {
        await this.ensureChroot();
        await this.ephemerals.reconcile();
        this.watches.rearm();
      },
    });
    const isClosed = (): boolean => this.sessions.closed;
    this.ephemerals = new EphemeralRegistrations({
      sessionId: () => this.sessionId,
      formerSessionIds: () => this.sessions.formerSessionIds,
      createEphemeralNode: async (path, data, retryOnExpiry) => {
        await this.request<string>('create', path, (raw, done) => raw.create(path, data, zookeeper.CreateMode.EPHEMERAL, done), retryOnExpiry);
      },
      mkdirp: (path) => this.mkdirp(path),
      getData: (path) => this.getData(path),
      setData: (path, data) => this.setData(path, data),
      exists: (path) => this.exists(path),
      remove: (path, o) => this.remove(path, o),
      untilConnected: () => this.sessions.untilConnected(),
      isClosed,
      logger: this.logger,
      backoff,
      onConflict: (path, owner) => void this.emit('ephemeralConflict', { path, owner }),
    });
    this.watches = new PersistentWatches({
      request: (what, path, invoke) => this.request(what, path, invoke),
      isClosed,
      logger: this.logger,
      backoff,
    });
  }

  /**
   * Connects to ZooKeeper and opens a session. `connectString` is
   * `host:port[,host:port...][/chroot]`; a missing chroot is created first (through a
   * short session without chroot). Rejects with {@link ZkConnectError} when no server
   * answers within `connectTimeoutMs`.
   */
  static async connect(connectString: string, options: ZkClientOptions = {}): Promise<ZkClient> {
    const { servers, chroot } = parseConnectString(connectString);
    if (chroot !== undefined) await ZkClient.createChroot(servers, chroot, options);
    const client = new ZkClient(connectString, options);
    await client.sessions.start();
    return client;
  }

  private static async createChroot(servers: string, chroot: string, options: ZkClientOptions): Promise<void> {
    const root = new ZkClient(servers, options);
    await root.sessions.start();
    try {
      await root.mkdirp(chroot);
    } finally {
      await root.close();
    }
  }

  /** A new session may find the chroot gone (a server that restarted empty): create it again. */
  private async ensureChroot(): Promise<void> {
    if (this.chroot === undefined) return;
    try {
      const stat = await this.request<RawStat | null>('exists', '/', (raw, done) => raw.exists('/', done));
      if (stat) return;
      this.logger.warn({ chroot: this.chroot }, 'the ZooKeeper chroot is gone; creating it again');
      await ZkClient.createChroot(this.servers, this.chroot, { ...this.options, logger: silentLogger });
    } catch (err) {
      this.logger.warn({ chroot: this.chroot, err }, 'could not check or create the ZooKeeper chroot');
    }
  }

  /** The current session id (16 hex digits); empty before the first connection. */
  get sessionId(): string {
    return this.sessions.sessionId;
  }

  /** Whether the client is connected right now. */
  get isConnected(): boolean {
    return this.sessions.isConnected;
  }

  /**
   * True while the client is connected and heard from ZooKeeper within two thirds of the
   * session timeout: the server cannot have expired the session, so the ephemeral nodes it
   * holds (partition ownership) are still its own. False from the moment that is no longer
   * certain (a pause of this process, a silent server) even before the connection is dropped.
   */
  get holdsSession(): boolean {
    return this.sessions.holdsSession;
  }

  /** The negotiated session timeout of the current session, ms (the asked one before connecting). */
  get negotiatedSessionTimeoutMs(): number {
    return this.sessions.connectedRaw?.getSessionTimeout() ?? this.sessionTimeoutMs;
  }

  /** The current session's id and password (for tests that force session expiry). */
  sessionCredentials(): ZkSessionCredentials {
    const raw = this.sessions.connectedRaw;
    if (!raw) throw new ZkError('no session yet');
    return { sessionId: raw.getSessionId(), sessionPassword: raw.getSessionPassword() };
  }

  private request<T>(what: string, path: string, invoke: Invoke<T>, retryOnExpiry = true, sessionId?: string): Promise<T> {
    return this.sessions.request(what, path, invoke, retryOnExpiry, sessionId);
  }

  // ---------------------------------------------------------------- nodes

  /**
   * Creates a node. `mode` is `persistent` (default) or `ephemeral` (one-shot: not re-created
   * after session expiry, see {@link registerEphemeral}). Missing parents are created as
   * empty persistent nodes unless `createParents` is false. Returns the path.
   * Throws {@link ZkNodeExistsError} when the node exists, {@link ZkNoNodeError} when a parent is
   * missing and `createParents` is false.
   */
  async create(path: string, data?: Buffer | string, options: { mode?: 'persistent' | 'ephemeral'; createParents?: boolean } = {}): Promise<string> {
    const mode = options.mode === 'ephemeral' ? zookeeper.CreateMode.EPHEMERAL : zookeeper.CreateMode.PERSISTENT;
    if (options.createParents !== false) await this.mkdirp(parentPath(path));
    const bytes = toBuffer(data);
    return this.request<string>('create', path, (raw, done) => raw.create(path, bytes, mode, done), mode === zookeeper.CreateMode.PERSISTENT);
  }

  /** Creates `path` and its missing ancestors as empty persistent nodes. Existing nodes are left alone. */
  async mkdirp(path: string): Promise<void> {
    if (path === '/' || (await this.exists(path)) !== undefined) return;
    let current = '';
    for (const part of path.split('/').slice(1)) {
      current += `/${part}`;
      const node = current;
      try {
        await this.request<string>('create', node, (raw, done) => raw.create(node, zookeeper.CreateMode.PERSISTENT, done));
      } catch (error) {
        if (!(error instanceof ZkNodeExistsError)) throw error;
      }
    }
  }

  /** Data and stat of a node; undefined when it does not exist. */
  async getData(path: string): Promise<ZkNode | undefined> {
    try {
      return await this.request<ZkNode>('getData', path, (raw, done) =>
        raw.getData(path, (error, data, stat) => (error ? done(error) : done(null, { data: data ?? Buffer.alloc(0), stat: toStat(stat) }))),
      );
    } catch (error) {
      if (error instanceof ZkNoNodeError) return undefined;
      throw error;
    }
  }

  /**
   * Replaces a node's data; with `version` only if the node is at that version
   * ({@link ZkBadVersionError} otherwise). Throws {@link ZkNoNodeError} when it does not exist.
   */
  async setData(path: string, data: Buffer | string, version = -1): Promise<ZkStat> {
    const bytes = toBuffer(data);
    return this.request<ZkStat>('setData', path, (raw, done) => raw.setData(path, bytes, version, (error, stat) => (error ? done(error) : done(null, toStat(stat)))));
  }

  /** Writes a persistent node whether or not it exists (parents created as needed). */
  async put(path: string, data: Buffer | string): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        await this.setData(path, data);
        return;
      } catch (error) {
        if (!(error instanceof ZkNoNodeError)) throw error;
      }
      try {
        await this.create(path, data);
        return;
      } catch (error) {
        if (!(error instanceof ZkNodeExistsError)) throw error;
      }
    }
    throw new ZkError(`could not write ${path}: it keeps being created and deleted`, { path });
  }

  /**
   * Writes a persistent node (as {@link put}) only if `condition.path` is at `condition.version`
   * at that moment, in one ZooKeeper multi ({@link multi}), and only in the session
   * `condition.sessionId` (the current one by default): a write whose session ended is never
   * carried over to a new one. With an ephemeral `condition.path` of that session this is a
   * write fenced by ownership (the check is of the version only: drop the fence once the session
   * removed its node). Throws {@link ZkBadVersionError} (or {@link ZkNoNodeError}) with `path` =
   * `condition.path` when the condition does not hold, {@link ZkSessionExpiredError} when the
   * session is not (or no longer) the one asked for.
   */
  async putIf(condition: { readonly path: string; readonly version: number; readonly sessionId?: string }, path: string, data: Buffer | string): Promise<void> {
    const sessionId = condition.sessionId ?? this.sessionId;
    const check: ZkOp = { op: 'check', path: condition.path, version: condition.version };
    for (let attempt = 0; attempt < 5; attempt++) {
      const exists = (await this.exists(path)) !== undefined;
      if (!exists) await this.mkdirp(parentPath(path));
      const write: ZkOp = exists ? { op: 'setData', path, data, version: -1 } : { op: 'create', path, data };
      try {
        await this.multi([check, write], { sessionId });
        return;
      } catch (error) {
        if (!(error instanceof ZkMultiError)) throw error;
        if (error.index === 0) throw error.error;
        if (error.reason === 'NoNode' || error.reason === 'NodeExists') continue; // the node came or went: again
        throw error;
      }
    }
    throw new ZkError(`could not write ${path}: it keeps being created and deleted`, { path });
  }

  /**
   * Commits `ops` as one ZooKeeper multi (docs/replication.md §3.3): every op applies, or none
   * does. Ops run in order, so an op may create the parent of a later one; nothing creates
   * parents otherwise. Returns what each op did ({@link ZkOpResult}: a `setData` gives the new
   * stat, hence the version to write at next).
   *
   * Throws {@link ZkMultiError} when ZooKeeper refused it, naming the op that failed and why
   * (`BadVersion`, `NodeExists`, `NoNode`, `NotEmpty`, ...): then nothing was applied.
   *
   * A multi interrupted by a lost connection is sent again (as every request is), and the
   * connection may have been lost after ZooKeeper applied it: a refusal of the retry can be the
   * work of the first attempt. Callers that care tell the two apart by reading the nodes
   * (the controller election and the leader's ISR write do). A multi with an ephemeral create,
   * or with `options.sessionId`, runs in that session only (the current one for the ephemeral
   * case): after an expiry it fails with {@link ZkSessionExpiredError} instead of being carried
   * over; other multis are sent again in the new session.
   */
  async multi(ops: readonly ZkOp[], options: { sessionId?: string } = {}): Promise<ZkOpResult[]> {
    return commitMulti((what, path, invoke, retryOnExpiry, sessionId) => this.request(what, path, invoke, retryOnExpiry, sessionId), ops, options.sessionId);
  }

  /** Stat of a node; undefined when it does not exist. */
  async exists(path: string): Promise<ZkStat | undefined> {
    const stat = await this.request<RawStat | null>('exists', path, (raw, done) => raw.exists(path, done));
    return stat ? toStat(stat) : undefined;
  }

  /** Names of a node's children, sorted; an empty list when the node does not exist. */
  async getChildren(path: string): Promise<string[]> {
    try {
      const children = await this.request<string[]>('getChildren', path, (raw, done) => raw.getChildren(path, (error, list) => (error ? done(error) : done(null, list))));
      return [...children].sort();
    } catch (error) {
      if (error instanceof ZkNoNodeError) return [];
      throw error;
    }
  }

  /**
   * Removes a node, with `recursive` its whole subtree first, with `version` only at that
   * version ({@link ZkBadVersionError} otherwise). Returns false when the node did not exist.
   * A registered ephemeral removed this way comes back after the next session expiry; use
   * {@link unregisterEphemeral} to remove it for good.
   */
  async remove(path: string, options: { recursive?: boolean; version?: number } = {}): Promise<boolean> {
    for (let attempt = 0; ; attempt++) {
      if (options.recursive) {
        for (const child of await this.getChildren(path)) await this.remove(joinPath(path, child), { recursive: true });
      }
      try {
        await this.request<void>('remove', path, (raw, done) => raw.remove(path, options.version ?? -1, (e) => done(e)));
        return true;
      } catch (error) {
        if (error instanceof ZkNoNodeError) return false;
        if (rawCode(error) === ZkErrorCode.notEmpty && options.recursive && attempt < 5) continue;
        throw error;
      }
    }
  }

  // ---------------------------------------------------------------- ephemerals

  /**
   * Creates an ephemeral node owned by the current session (parents created as needed). It
   * is NOT re-created after session expiry; use it for claims that dependents renew
   * themselves (partition ownership). Succeeds when this session already holds the node
   * (the data is then rewritten). Throws {@link ZkNodeExistsError} when another session holds
   * it and {@link ZkSessionExpiredError} when the session expired meanwhile.
   */
  async createEphemeral(path: string, data: Buffer | string): Promise<void> {
    await this.ephemerals.ensure(path, toBuffer(data), false);
  }

  /**
   * Creates an ephemeral node and keeps it (registrations: brokers, topics, consumers): it is
   * written again in every new session, and a write that did not get through is retried with
   * backoff until ZooKeeper answers (ephemerals.ts). Registering a path again replaces its
   * data. Throws {@link ZkNodeExistsError} when another live session holds the node (then the
   * path is not registered); any other error (e.g. {@link ZkTimeoutError} while ZooKeeper is
   * unreachable) leaves the registration in place, to be written when ZooKeeper is back.
   */
  async registerEphemeral(path: string, data: Buffer | string): Promise<void> {
    await this.ephemerals.register(path, toBuffer(data));
  }

  /** Stops re-creating a registered ephemeral and removes it if this session holds it. Returns whether it was removed. */
  async unregisterEphemeral(path: string): Promise<boolean> {
    this.ephemerals.unregister(path);
    return this.removeOwnEphemeral(path);
  }

  /** Paths of the registered ephemerals (re-created after expiry). */
  registeredEphemerals(): string[] {
    return this.ephemerals.paths();
  }

  /**
   * Removes an ephemeral node only if the current session holds it (never another
   * session's node). Returns whether it was removed.
   */
  async removeOwnEphemeral(path: string): Promise<boolean> {
    const stat = await this.exists(path);
    if (stat === undefined || stat.ephemeralOwner !== this.sessionId) return false;
    try {
      return await this.remove(path, { version: stat.version });
    } catch (error) {
      if (error instanceof ZkBadVersionError) return this.removeOwnEphemeral(path);
      throw error;
    }
  }

  // ---------------------------------------------------------------- watches

  /**
   * Calls `callback` with the sorted children of `path` now and after every change, until
   * the returned watch is closed. A missing node reads as no children (and its creation is
   * watched). Keeps working across reconnects and new sessions (after expiry it calls back
   * with the children read in the new session). Callbacks never overlap: changes that happen
   * while an (async) callback runs are delivered once it returns, as the latest children.
   * A callback that throws is logged and does not stop the watch.
   */
  watchChildren(path: string, callback: (children: string[]) => void | Promise<void>): ZkWatch {
    return this.watches.subscribe('children', path, callback);
  }

  /**
   * Calls `callback` with the data of `path` (undefined while it does not exist) now and
   * after every change, until the returned watch is closed. Same guarantees as
   * {@link watchChildren}.
   */
  watchData(path: string, callback: (data: Buffer | undefined) => void | Promise<void>): ZkWatch {
    return this.watches.subscribe('data', path, callback);
  }

  /**
   * As {@link watchData}, with the node's stat: calls `callback` with the node's data and stat
   * (undefined while it does not exist) now and after every change, until closed. For readers
   * that write back at the version they read (partition states, docs/replication.md §3.2).
   */
  watchNode(path: string, callback: (node: ZkNode | undefined) => void | Promise<void>): ZkWatch {
    return this.watches.subscribe('node', path, callback);
  }

  /**
   * Closes the session (its ephemeral nodes go at once) and stops every watch. Pending
   * operations fail with {@link ZkClosedError}. Idempotent.
   */
  async close(): Promise<void> {
    if (this.sessions.closed) return;
    this.watches.closeAll();
    const sessionId = this.sessionId;
    await this.sessions.close();
    this.logger.debug({ servers: this.servers, sessionId }, 'ZooKeeper client closed');
    this.emit('closed');
  }
}
