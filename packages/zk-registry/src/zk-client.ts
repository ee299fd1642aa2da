/**
 * ZkClient: klog's connection to ZooKeeper (SPEC §4), on node-zookeeper-client.
 *
 * - Chroot: `host:port[,host:port...]/chroot`; the chroot is created when missing.
 * - Promise helpers for create (parents made as needed), getData/setData, getChildren,
 *   exists and recursive remove. Every path is relative to the chroot.
 * - Connection loss: the client logs it, reconnects with a growing, jittered delay and keeps
 *   its session when it gets back within the session timeout. Operations interrupted by a
 *   connection loss are retried until `operationTimeoutMs`.
 * - Session expiry: the client opens a new session, re-creates every ephemeral node
 *   registered with {@link ZkClient.registerEphemeral}, re-arms every watch and emits
 *   `session` so that dependents re-run (a consumer rebalances, a broker re-checks its ids).
 * - Watches: {@link ZkClient.watchChildren} and {@link ZkClient.watchData} call back with the
 *   current value on every change until closed, across reconnects and new sessions.
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
import type { Client as RawClient, Exception as RawException, Stat as RawStat, State as RawState } from 'node-zookeeper-client';
import {
  ZkBadVersionError,
  ZkClosedError,
  ZkConnectError,
  ZkError,
  ZkErrorCode,
  ZkNoNodeError,
  ZkNodeExistsError,
  ZkSessionExpiredError,
  ZkTimeoutError,
} from './errors.js';
import { type Logger, silentLogger } from '@klog/logger';

/** Options of {@link ZkClient.connect}. All durations are milliseconds. */
export interface ZkClientOptions {
  /** Session timeout asked of the server (it clamps it to its min/max). Default 6000 (Kafka 0.7's `zk.sessiontimeout.ms`). */
  sessionTimeoutMs?: number;
  /** How long {@link ZkClient.connect} waits for a first session before failing with {@link ZkConnectError}. Default 10000. */
  connectTimeoutMs?: number;
  /** How long one operation keeps retrying across connection losses before {@link ZkTimeoutError}. Default 30000. */
  operationTimeoutMs?: number;
  /** First reconnect / retry delay. Default 100. */
  retryBaseDelayMs?: number;
  /** Largest reconnect / retry delay. Default a third of the session timeout, at least 250 and at most 2000. */
  retryMaxDelayMs?: number;
  /** Where connection, session and retry events are logged (pino-compatible). Default: silent. */
  logger?: Logger;
}

/** Metadata of a znode (ZooKeeper's `Stat`), as klog uses it. */
export interface ZkStat {
  /** Data version, incremented by every setData; for conditional writes. */
  readonly version: number;
  /** Children version, incremented by every child created or deleted. */
  readonly cversion: number;
  /** Bytes of data. */
  readonly dataLength: number;
  /** Number of children. */
  readonly numChildren: number;
  /** Creation time, ms since the epoch. */
  readonly ctimeMs: number;
  /** Last modification time, ms since the epoch. */
  readonly mtimeMs: number;
  /** Session id (16 hex digits) that owns this ephemeral node; undefined for a persistent node. */
  readonly ephemeralOwner: string | undefined;
}

/** A znode's data and stat. */
export interface ZkNode {
  readonly data: Buffer;
  readonly stat: ZkStat;
}

/** A live watch: {@link ZkWatch.close} stops it; {@link ZkWatch.ready} resolves after the first callback returned. */
export interface ZkWatch {
  readonly ready: Promise<void>;
  close(): void;
}

/** The credentials of a session, for tests that force its expiry (see `@klog/zk-registry/testing`). */
export interface ZkSessionCredentials {
  /** 8 bytes. */
  readonly sessionId: Buffer;
  /** 16 bytes. */
  readonly sessionPassword: Buffer;
}

/** Listener signatures of the {@link ZkClient} events. */
export interface ZkClientEvents {
  connected: (info: { sessionId: string; reconnect: boolean }) => void;
  disconnected: () => void;
  expired: (info: { sessionId: string }) => void;
  session: (info: { sessionId: string; previousSessionId: string }) => void;
  ephemeralConflict: (info: { path: string; owner: string | undefined }) => void;
  closed: () => void;
}

/** The parts of a connect string `host:port[,host:port...][/chroot]`. */
export interface ParsedConnectString {
  /** `host:port[,host:port...]`. */
  readonly servers: string;
  /** The chroot path (`/a/b`), or undefined for the root. */
  readonly chroot: string | undefined;
}

/**
 * Splits a connect string into servers and chroot. A trailing `/` is dropped; `/` alone
 * means no chroot. Throws {@link ZkError} for an empty server list, a server that is not
 * `host[:port]` with a port in 1-65535, or a malformed chroot.
 */
export function parseConnectString(connectString: string): ParsedConnectString {
  const slash = connectString.indexOf('/');
  const servers = (slash < 0 ? connectString : connectString.slice(0, slash)).trim();
  let chroot = slash < 0 ? '' : connectString.slice(slash);
  while (chroot.endsWith('/')) chroot = chroot.slice(0, -1);
  const badServer = (s: string): boolean => {
    const m = /^(?:\[[^\]]+\]|[^:\s[\]]+)(?::(\d+))?$/.exec(s.trim());
    return m === null || (m[1] !== undefined && (Number(m[1]) < 1 || Number(m[1]) > 65535));
  };
  if (servers === '' || servers.split(',').some(badServer)) {
    throw new ZkError(`invalid ZooKeeper connect string ${JSON.stringify(connectString)}: expected host:port[,host:port...][/chroot] with ports 1-65535`);
  }
  if (chroot !== '' && chroot.split('/').slice(1).some((c) => c === '' || c === '.' || c === '..')) {
    throw new ZkError(`invalid chroot in ZooKeeper connect string ${JSON.stringify(connectString)}`);
  }
  return { servers, chroot: chroot === '' ? undefined : chroot };
}

/** The parent of a znode path (`/a/b` → `/a`, `/a` → `/`). */
export function parentPath(path: string): string {
  const i = path.lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}

function joinPath(parent: string, child: string): string {
  return parent === '/' ? `/${child}` : `${parent}/${child}`;
}

const DEFAULTS = {
  sessionTimeoutMs: 6000,
  connectTimeoutMs: 10_000,
  operationTimeoutMs: 30_000,
  retryBaseDelayMs: 100,
};

// node-zookeeper-client's connection manager state for "trying to connect" (private to the library).
const CONNECTION_MANAGER_CONNECTING = 1;

/** One session of the underlying client: a new one replaces it after expiry. */
interface Session {
  readonly raw: RawClient;
  connected: boolean;
  everConnected: boolean;
  /** 16 hex digits, known once connected. */
  id: string;
  disconnectedAt: number | undefined;
  reconnectAttempts: number;
  stillDisconnectedTimer: NodeJS.Timeout | undefined;
  /** When the current connection last received bytes (epoch ms). */
  lastHeardAt: number;
  /** Checks that the server keeps answering (see `checkLiveness`). */
  livenessTimer: NodeJS.Timeout | undefined;
}

interface InFlight {
  readonly session: Session;
  fail(error: unknown): void;
}

interface Subscription {
  readonly kind: 'children' | 'data';
  readonly path: string;
  readonly callback: (value: never) => void | Promise<void>;
  active: boolean;
  running: boolean;
  again: boolean;
  delivered: () => void;
}

type Invoke<T> = (raw: RawClient, done: (error: unknown, result?: T) => void) => void;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function rawCode(error: unknown): number | undefined {
  if (error instanceof ZkError) return error.code;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

function int64ToNumber(buf: Buffer): number {
  return Number(buf.readBigInt64BE(0));
}

function toStat(stat: RawStat): ZkStat {
  const owner = stat.ephemeralOwner.toString('hex');
  return {
    version: stat.version,
    cversion: stat.cversion,
    dataLength: stat.dataLength,
    numChildren: stat.numChildren,
    ctimeMs: int64ToNumber(stat.ctime),
    mtimeMs: int64ToNumber(stat.mtime),
    ephemeralOwner: /^0+$/.test(owner) ? undefined : owner,
  };
}

function toBuffer(data: Buffer | string | undefined): Buffer {
  if (data === undefined) return Buffer.alloc(0);
  return typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
}

/** Maps a library error to a klog error; klog errors pass through. */
function toZkError(error: unknown, what: string, path: string): ZkError {
  if (error instanceof ZkError) return error;
  const code = rawCode(error);
  const name = (error as RawException | undefined)?.name ?? 'error';
  const message = `ZooKeeper ${what} ${path} failed: ${name}${code === undefined ? '' : ` [${code}]`}`;
  const options = { code, path, cause: error };
  switch (code) {
    case ZkErrorCode.noNode:
      return new ZkNoNodeError(message, options);
    case ZkErrorCode.nodeExists:
      return new ZkNodeExistsError(message, options);
    case ZkErrorCode.badVersion:
      return new ZkBadVersionError(message, options);
    case ZkErrorCode.sessionExpired:
      return new ZkSessionExpiredError(message, options);
    default:
      return new ZkError(message, options);
  }
}

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

  private readonly connectString: string;
  private readonly connectTimeoutMs: number;
  private readonly operationTimeoutMs: number;
  private readonly retryBaseDelayMs: number;
  private readonly retryMaxDelayMs: number;
  /** The logger given in the options (silent by default); the registries log to it too. */
  readonly logger: Logger;
  /** Internal signals (`ready`, `closed`), kept apart from the public events. */
  private readonly internal = new EventEmitter();
  /** The current session; replaced after expiry. */
  private session: Session | undefined;
  /** Operations waiting for a reply, failed at once when their session expires or the client closes. */
  private readonly inFlight = new Set<InFlight>();
  /** Ephemeral nodes re-created on every new session: path → data. */
  private readonly ephemerals = new Map<string, Buffer>();
  private readonly subscriptions = new Set<Subscription>();
  private closed = false;

  private constructor(connectString: string, options: ZkClientOptions) {
    super();
    const { servers, chroot } = parseConnectString(connectString);
    this.servers = servers;
    this.chroot = chroot;
    this.connectString = servers + (chroot ?? '');
    this.sessionTimeoutMs = options.sessionTimeoutMs ?? DEFAULTS.sessionTimeoutMs;
    this.connectTimeoutMs = options.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs;
    this.operationTimeoutMs = options.operationTimeoutMs ?? DEFAULTS.operationTimeoutMs;
    this.retryBaseDelayMs = options.retryBaseDelayMs ?? DEFAULTS.retryBaseDelayMs;
    this.retryMaxDelayMs =
      options.retryMaxDelayMs ?? Math.min(2000, Math.max(250, Math.floor(this.sessionTimeoutMs / 3)));
    this.logger = options.logger ?? silentLogger;
    this.internal.setMaxListeners(0);
  }

  /**
   * Connects to ZooKeeper and opens a session. `connectString` is
   * `host:port[,host:port...][/chroot]`; a missing chroot is created first (through a
   * short session without chroot). Rejects with {@link ZkConnectError} when no server
   * answers within `connectTimeoutMs`.
   */
  static async connect(connectString: string, options: ZkClientOptions = {}): Promise<ZkClient> {
    const { servers, chroot } = parseConnectString(connectString);
    if (chroot !== undefined) {
      const root = new ZkClient(servers, options);
      await root.start();
      try {
        await root.mkdirp(chroot);
      } finally {
        await root.close();
      }
    }
    const client = new ZkClient(connectString, options);
    await client.start();
    return client;
  }

  /** The current session id (16 hex digits); empty before the first connection. */
  get sessionId(): string {
    return this.session?.id ?? '';
  }

  /** Whether the client is connected right now. */
  get isConnected(): boolean {
    return this.session?.connected === true;
  }

  /** The negotiated session timeout of the current session, ms (the asked one before connecting). */
  get negotiatedSessionTimeoutMs(): number {
    const s = this.session;
    return s?.everConnected ? s.raw.getSessionTimeout() : this.sessionTimeoutMs;
  }

  /** The current session's id and password (for tests that force session expiry). */
  sessionCredentials(): ZkSessionCredentials {
    const s = this.session;
    if (!s?.everConnected) throw new ZkError('no session yet');
    return { sessionId: s.raw.getSessionId(), sessionPassword: s.raw.getSessionPassword() };
  }

  // ---------------------------------------------------------------- sessions

  private async start(): Promise<void> {
    const session = this.openSession();
    if (!(await this.waitConnected(session, this.connectTimeoutMs))) {
      this.session = undefined;
      await this.destroyRaw(session.raw, false);
      throw new ZkConnectError(
        `no ZooKeeper answered at ${this.servers} within ${this.connectTimeoutMs} ms ` +
          `(is ZooKeeper running? see scripts/zookeeper.sh)`,
      );
    }
  }

  private openSession(): Session {
    const raw = zookeeper.createClient(this.connectString, {
      sessionTimeout: this.sessionTimeoutMs,
      spinDelay: this.retryBaseDelayMs,
      retries: 0,
    });
    const session: Session = {
      raw,
      connected: false,
      everConnected: false,
      id: '',
      disconnectedAt: undefined,
      reconnectAttempts: 0,
      stillDisconnectedTimer: undefined,
      lastHeardAt: 0,
      livenessTimer: undefined,
    };
    this.session = session;
    raw.on('state', (state: RawState) => this.onState(session, state));
    guardFrameParser(raw.connectionManager, this.logger);
    // The library retries a lost connection by itself after a random delay below `spinDelay`;
    // growing that delay on every attempt turns its loop into a backoff.
    raw.connectionManager.on('state', (state: number) => {
      if (state !== CONNECTION_MANAGER_CONNECTING || session.connected) return;
      session.reconnectAttempts += 1;
      raw.connectionManager.spinDelay = this.backoffMs(session.reconnectAttempts, false);
      this.logger.debug(
        { servers: this.servers, attempt: session.reconnectAttempts, maxDelayMs: raw.connectionManager.spinDelay },
        session.everConnected ? 'reconnecting to ZooKeeper' : 'connecting to ZooKeeper',
      );
    });
    raw.connect();
    return session;
  }

  private onState(session: Session, state: RawState): void {
    if (session !== this.session || this.closed) return;
    const S = zookeeper.State;
    if (state === S.SYNC_CONNECTED || state === S.CONNECTED_READ_ONLY) {
      const reconnect = session.everConnected;
      const downMs = session.disconnectedAt === undefined ? 0 : Date.now() - session.disconnectedAt;
      session.connected = true;
      session.everConnected = true;
      session.id = session.raw.getSessionId().toString('hex');
      session.disconnectedAt = undefined;
      session.reconnectAttempts = 0;
      session.raw.connectionManager.spinDelay = this.retryBaseDelayMs;
      clearInterval(session.stillDisconnectedTimer);
      session.stillDisconnectedTimer = undefined;
      this.watchLiveness(session);
      if (reconnect) {
        this.logger.info({ servers: this.servers, sessionId: session.id, downMs }, 'reconnected to ZooKeeper; session kept');
      } else {
        this.logger.info(
          { servers: this.servers, chroot: this.chroot, sessionId: session.id, sessionTimeoutMs: session.raw.getSessionTimeout() },
          'connected to ZooKeeper',
        );
      }
      this.internal.emit('ready', session);
      this.emit('connected', { sessionId: session.id, reconnect });
    } else if (state === S.DISCONNECTED) {
      if (!session.connected) return;
      session.connected = false;
      session.disconnectedAt = Date.now();
      this.logger.warn(
        { servers: this.servers, sessionId: session.id, sessionTimeoutMs: session.raw.getSessionTimeout() },
        'lost the connection to ZooKeeper; reconnecting with backoff',
      );
      session.stillDisconnectedTimer = setInterval(() => {
        this.logger.warn(
          { servers: this.servers, sessionId: session.id, downMs: Date.now() - (session.disconnectedAt ?? Date.now()), attempts: session.reconnectAttempts },
          'still disconnected from ZooKeeper',
        );
      }, Math.max(1000, this.sessionTimeoutMs));
      session.stillDisconnectedTimer.unref();
      this.emit('disconnected');
    } else if (state === S.EXPIRED) {
      session.connected = false;
      clearInterval(session.stillDisconnectedTimer);
      clearInterval(session.livenessTimer);
      this.logger.warn(
        { servers: this.servers, sessionId: session.id },
        'ZooKeeper session expired; its ephemeral nodes are gone; opening a new session',
      );
      const expired = toZkError({ code: ZkErrorCode.sessionExpired, name: 'SESSION_EXPIRED' }, 'request', '(any)');
      for (const op of this.inFlight) if (op.session === session) op.fail(expired);
      void this.destroyRaw(session.raw, false);
      this.emit('expired', { sessionId: session.id });
      void this.renewSession(session);
    } else if (state === S.AUTH_FAILED) {
      this.logger.error({ servers: this.servers }, 'ZooKeeper authentication failed');
    }
  }

  /**
   * The library sends pings but never notices a server that stops answering (a hung server,
   * a silent network, a session closed under a live connection). Like ZooKeeper's Java
   * client, drop the connection when nothing was heard for two thirds of the session
   * timeout; the reconnect then finds out whether the session is still alive.
   */
  private watchLiveness(session: Session): void {
    const socket = session.raw.connectionManager.socket;
    session.lastHeardAt = Date.now();
    socket?.on('data', () => {
      session.lastHeardAt = Date.now();
    });
    const readTimeoutMs = Math.floor((session.raw.getSessionTimeout() * 2) / 3);
    clearInterval(session.livenessTimer);
    session.livenessTimer = setInterval(() => {
      if (!session.connected || this.closed || session !== this.session) return;
      const silentMs = Date.now() - session.lastHeardAt;
      if (silentMs <= readTimeoutMs) return;
      this.logger.warn(
        { servers: this.servers, sessionId: session.id, silentMs, readTimeoutMs },
        'ZooKeeper stopped answering; dropping the connection',
      );
      session.raw.connectionManager.socket?.destroy();
    }, Math.max(50, Math.floor(readTimeoutMs / 4)));
    session.livenessTimer.unref();
  }

  /** After expiry: opens sessions until one connects, then restores ephemerals and watches. */
  private async renewSession(expired: Session): Promise<void> {
    let session: Session | undefined;
    for (let attempt = 0; !this.closed; attempt++) {
      const candidate = this.openSession();
      if (await this.waitConnected(candidate, this.connectTimeoutMs)) {
        session = candidate;
        break;
      }
      if (this.closed || this.session !== candidate) return;
      this.logger.warn({ servers: this.servers, attempt }, 'could not open a new ZooKeeper session; retrying');
      await this.destroyRaw(candidate.raw, false);
      await sleep(this.backoffMs(attempt));
    }
    if (!session || this.closed) return;
    await this.restoreEphemerals();
    for (const sub of this.subscriptions) void this.runWatch(sub);
    if (this.session !== session || this.closed) return; // expired again meanwhile: the next renewal reports
    this.logger.info(
      { sessionId: session.id, previousSessionId: expired.id, ephemerals: this.ephemerals.size, watches: this.subscriptions.size },
      'new ZooKeeper session ready; ephemeral nodes re-created and watches re-armed',
    );
    this.emit('session', { sessionId: session.id, previousSessionId: expired.id });
  }

  private async restoreEphemerals(): Promise<void> {
    for (const [path, data] of [...this.ephemerals]) {
      try {
        await this.ensureEphemeral(path, data, true);
      } catch (error) {
        if (error instanceof ZkNodeExistsError) {
          const owner = (await this.exists(path).catch(() => undefined))?.ephemeralOwner;
          this.ephemerals.delete(path);
          this.logger.error({ path, owner }, 'cannot re-create an ephemeral node: another session holds it');
          this.emit('ephemeralConflict', { path, owner });
        } else {
          this.logger.error({ path, err: error }, 'could not re-create an ephemeral node');
        }
      }
    }
  }

  private waitConnected(session: Session, timeoutMs: number): Promise<boolean> {
    if (session.connected) return Promise.resolve(true);
    return new Promise((resolve) => {
      const finish = (ok: boolean): void => {
        clearTimeout(timer);
        this.internal.off('ready', onReady);
        this.internal.off('closed', onClosed);
        resolve(ok);
      };
      const onReady = (s: Session): void => {
        if (s === session) finish(true);
      };
      const onClosed = (): void => finish(false);
      const timer = setTimeout(() => finish(false), timeoutMs);
      this.internal.on('ready', onReady);
      this.internal.on('closed', onClosed);
    });
  }

  /** The current session once it is connected; waits for it until `deadline` (epoch ms). */
  private async connectedSession(deadline: number): Promise<Session> {
    for (;;) {
      if (this.closed) throw new ZkClosedError('ZooKeeper client is closed');
      const s = this.session;
      if (s?.connected) return s;
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        throw new ZkTimeoutError(`not connected to ZooKeeper at ${this.servers} for ${this.operationTimeoutMs} ms`);
      }
      await new Promise<void>((resolve) => {
        const finish = (): void => {
          clearTimeout(timer);
          this.internal.off('ready', finish);
          this.internal.off('closed', finish);
          resolve();
        };
        const timer = setTimeout(finish, remaining);
        this.internal.on('ready', finish);
        this.internal.on('closed', finish);
      });
    }
  }

  private backoffMs(attempt: number, jitter = true): number {
    const ms = Math.min(this.retryBaseDelayMs * 2 ** Math.min(attempt, 20), this.retryMaxDelayMs);
    return jitter ? Math.round(ms * (0.5 + Math.random() / 2)) : ms;
  }

  private destroyRaw(raw: RawClient, graceful: boolean): Promise<void> {
    return new Promise((resolve) => {
      let done = false;
      const finish = (): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        try {
          raw.connectionManager.socket?.destroy();
        } catch {
          // already gone
        }
        resolve();
      };
      const timer = setTimeout(finish, graceful ? 2000 : 0);
      raw.once('disconnected', finish);
      try {
        raw.close();
      } catch {
        finish();
      }
    });
  }

  /**
   * Closes the session (its ephemeral nodes go at once) and stops every watch. Pending
   * operations fail with {@link ZkClosedError}. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const sub of this.subscriptions) {
      sub.active = false;
      sub.delivered();
    }
    this.subscriptions.clear();
    const closedError = new ZkClosedError('ZooKeeper client is closed');
    for (const op of this.inFlight) op.fail(closedError);
    this.internal.emit('closed');
    const s = this.session;
    if (s) {
      clearInterval(s.stillDisconnectedTimer);
      clearInterval(s.livenessTimer);
      await this.destroyRaw(s.raw, s.connected);
    }
    this.logger.debug({ servers: this.servers, sessionId: s?.id }, 'ZooKeeper client closed');
    this.emit('closed');
  }

  // ---------------------------------------------------------------- operations

  /** Sends one request on a session; fails when the session expires, the client closes or the deadline passes. */
  private call<T>(session: Session, invoke: Invoke<T>, deadline: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const finish = (error: unknown, result?: T): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.inFlight.delete(entry);
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the library's error, passed on as is
        if (error) reject(error);
        else resolve(result as T);
      };
      const entry: InFlight = { session, fail: (error) => finish(error) };
      const timer = setTimeout(
        () => finish(new ZkTimeoutError(`no reply from ZooKeeper at ${this.servers} within ${this.operationTimeoutMs} ms`)),
        Math.max(0, deadline - Date.now()),
      );
      this.inFlight.add(entry);
      try {
        invoke(session.raw, finish);
      } catch (error) {
        finish(error);
      }
    });
  }

  /**
   * Runs a request, retrying after a connection loss with backoff until the operation
   * timeout. After a session expiry it is retried on the new session only when
   * `retryOnExpiry` (default true); otherwise it fails with {@link ZkSessionExpiredError}.
   */
  private async op<T>(what: string, path: string, invoke: Invoke<T>, retryOnExpiry = true): Promise<T> {
    const deadline = Date.now() + this.operationTimeoutMs;
    let first: Session | undefined;
    for (let attempt = 0; ; attempt++) {
      const session = await this.connectedSession(deadline);
      first ??= session;
      if (session !== first && !retryOnExpiry) {
        throw new ZkSessionExpiredError(`ZooKeeper ${what} ${path}: the session expired`, {
          code: ZkErrorCode.sessionExpired,
          path,
        });
      }
      try {
        return await this.call(session, invoke, deadline);
      } catch (error) {
        const code = rawCode(error);
        const retryable =
          code === ZkErrorCode.connectionLoss ||
          code === ZkErrorCode.operationTimeout ||
          (code === ZkErrorCode.sessionExpired && retryOnExpiry);
        if (!retryable || this.closed || Date.now() >= deadline) throw toZkError(error, what, path);
        this.logger.debug({ op: what, path, attempt, code }, 'ZooKeeper request interrupted; retrying');
        await sleep(this.backoffMs(attempt));
      }
    }
  }

  /**
   * Creates a node. `mode` is `persistent` (default) or `ephemeral` (one-shot: not re-created
   * after session expiry, see {@link registerEphemeral}). Missing parents are created as
   * empty persistent nodes unless `createParents` is false. Returns the path.
   * Throws {@link ZkNodeExistsError} when the node exists, {@link ZkNoNodeError} when a parent is
   * missing and `createParents` is false.
   */
  async create(
    path: string,
    data?: Buffer | string,
    options: { mode?: 'persistent' | 'ephemeral'; createParents?: boolean } = {},
  ): Promise<string> {
    const mode = options.mode === 'ephemeral' ? zookeeper.CreateMode.EPHEMERAL : zookeeper.CreateMode.PERSISTENT;
    if (options.createParents !== false) await this.mkdirp(parentPath(path));
    const bytes = toBuffer(data);
    return this.op<string>(
      'create',
      path,
      (raw, done) => raw.create(path, bytes, mode, done),
      mode === zookeeper.CreateMode.PERSISTENT,
    );
  }

  /** Creates `path` and its missing ancestors as empty persistent nodes. Existing nodes are left alone. */
  async mkdirp(path: string): Promise<void> {
    if (path === '/' || (await this.exists(path)) !== undefined) return;
    let current = '';
    for (const part of path.split('/').slice(1)) {
      current += `/${part}`;
      try {
        await this.op<string>('create', current, (raw, done) =>
          raw.create(current, undefined, zookeeper.CreateMode.PERSISTENT, done),
        );
      } catch (error) {
        if (!(error instanceof ZkNodeExistsError)) throw error;
      }
    }
  }

  /** Data and stat of a node; undefined when it does not exist. */
  async getData(path: string): Promise<ZkNode | undefined> {
    try {
      return await this.op<ZkNode>('getData', path, (raw, done) =>
        raw.getData(path, (error, data, stat) =>
          error ? done(error) : done(null, { data: data ?? Buffer.alloc(0), stat: toStat(stat) }),
        ),
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
    return this.op<ZkStat>('setData', path, (raw, done) =>
      raw.setData(path, bytes, version, (error, stat) => (error ? done(error) : done(null, toStat(stat)))),
    );
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

  /** Stat of a node; undefined when it does not exist. */
  async exists(path: string): Promise<ZkStat | undefined> {
    const stat = await this.op<RawStat | null>('exists', path, (raw, done) => raw.exists(path, done));
    return stat ? toStat(stat) : undefined;
  }

  /** Names of a node's children, sorted; an empty list when the node does not exist. */
  async getChildren(path: string): Promise<string[]> {
    try {
      const children = await this.op<string[]>('getChildren', path, (raw, done) =>
        raw.getChildren(path, (error, list) => (error ? done(error) : done(null, list))),
      );
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
        for (const child of await this.getChildren(path)) {
          await this.remove(joinPath(path, child), { recursive: true });
        }
      }
      try {
        await this.op<void>('remove', path, (raw, done) => raw.remove(path, options.version ?? -1, (e) => done(e)));
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
    await this.ensureEphemeral(path, toBuffer(data), false);
  }

  /**
   * Creates an ephemeral node and re-creates it on every new session after an expiry
   * (registrations: brokers, topics, consumers). Registering a path again replaces its data.
   * Throws {@link ZkNodeExistsError} when another live session holds the node (then the path
   * is not registered).
   */
  async registerEphemeral(path: string, data: Buffer | string): Promise<void> {
    const bytes = toBuffer(data);
    const previous = this.ephemerals.get(path);
    this.ephemerals.set(path, bytes);
    try {
      await this.ensureEphemeral(path, bytes, true);
    } catch (error) {
      if (previous === undefined) this.ephemerals.delete(path);
      else this.ephemerals.set(path, previous);
      throw error;
    }
  }

  /** Stops re-creating a registered ephemeral and removes it if this session holds it. Returns whether it was removed. */
  async unregisterEphemeral(path: string): Promise<boolean> {
    this.ephemerals.delete(path);
    return this.removeOwnEphemeral(path);
  }

  /** Paths of the registered ephemerals (re-created after expiry). */
  registeredEphemerals(): string[] {
    return [...this.ephemerals.keys()].sort();
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

  private async ensureEphemeral(path: string, data: Buffer, retryOnExpiry: boolean): Promise<void> {
    for (let attempt = 0; attempt < 5; attempt++) {
      await this.mkdirp(parentPath(path));
      try {
        await this.op<string>(
          'create',
          path,
          (raw, done) => raw.create(path, data, zookeeper.CreateMode.EPHEMERAL, done),
          retryOnExpiry,
        );
        return;
      } catch (error) {
        if (!(error instanceof ZkNodeExistsError)) throw error;
      }
      // It exists: ours (a retried create, or a re-registration) or another session's.
      const node = await this.getData(path);
      if (node === undefined) continue; // deleted meanwhile: create again
      if (node.stat.ephemeralOwner !== undefined && node.stat.ephemeralOwner === this.sessionId) {
        if (!node.data.equals(data)) await this.setData(path, data);
        return;
      }
      throw new ZkNodeExistsError(
        `${path} is held by ${node.stat.ephemeralOwner === undefined ? 'a persistent node' : `session ${node.stat.ephemeralOwner}`}`,
        { code: ZkErrorCode.nodeExists, path },
      );
    }
    throw new ZkError(`could not create ${path}: it keeps being created and deleted`, { path });
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
    return this.subscribe('children', path, callback);
  }

  /**
   * Calls `callback` with the data of `path` (undefined while it does not exist) now and
   * after every change, until the returned watch is closed. Same guarantees as
   * {@link watchChildren}.
   */
  watchData(path: string, callback: (data: Buffer | undefined) => void | Promise<void>): ZkWatch {
    return this.subscribe('data', path, callback);
  }

  private subscribe<T>(kind: 'children' | 'data', path: string, callback: (value: T) => void | Promise<void>): ZkWatch {
    if (this.closed) throw new ZkClosedError('ZooKeeper client is closed');
    let delivered!: () => void;
    const ready = new Promise<void>((resolve) => (delivered = resolve));
    const sub: Subscription = {
      kind,
      path,
      callback: callback,
      active: true,
      running: false,
      again: false,
      delivered,
    };
    this.subscriptions.add(sub);
    void this.runWatch(sub);
    return {
      ready,
      close: () => {
        sub.active = false;
        sub.delivered();
        this.subscriptions.delete(sub);
      },
    };
  }

  private async runWatch(sub: Subscription): Promise<void> {
    if (!sub.active) return;
    if (sub.running) {
      sub.again = true;
      return;
    }
    sub.running = true;
    let failures = 0;
    try {
      do {
        sub.again = false;
        let value: string[] | Buffer | undefined;
        try {
          value = await this.readAndWatch(sub);
          failures = 0;
        } catch (error) {
          if (!sub.active || this.closed) return;
          this.logger.warn({ path: sub.path, err: error }, 'could not read a watched ZooKeeper node; retrying');
          await sleep(this.backoffMs(failures++));
          sub.again = true;
          continue;
        }
        if (!sub.active) return;
        try {
          await sub.callback(value as never);
        } catch (error) {
          this.logger.error({ path: sub.path, err: error }, 'ZooKeeper watch callback failed');
        }
        sub.delivered();
      } while (sub.again && sub.active);
    } finally {
      sub.running = false;
    }
  }

  /** Reads the watched value and leaves a one-shot watch that re-runs the subscription. */
  private async readAndWatch(sub: Subscription): Promise<string[] | Buffer | undefined> {
    const watcher = (): void => {
      if (sub.active && !this.closed) void this.runWatch(sub);
    };
    const path = sub.path;
    for (;;) {
      try {
        if (sub.kind === 'children') {
          const children = await this.op<string[]>('getChildren', path, (raw, done) =>
            raw.getChildren(path, watcher, (error, list) => (error ? done(error) : done(null, list))),
          );
          return [...children].sort();
        }
        return await this.op<Buffer>('getData', path, (raw, done) =>
          raw.getData(path, watcher, (error, data) => (error ? done(error) : done(null, data ?? Buffer.alloc(0)))),
        );
      } catch (error) {
        if (!(error instanceof ZkNoNodeError)) throw error;
      }
      // Missing: watch for its creation; if it appeared meanwhile, read again.
      const stat = await this.op<RawStat | null>('exists', path, (raw, done) => raw.exists(path, watcher, done));
      if (stat === null) return sub.kind === 'children' ? [] : undefined;
    }
  }
}

/**
 * node-zookeeper-client 1.1.3 keeps the unparsed tail of a response frame (`pendingBuffer`)
 * across a reconnect, so the tail of a frame cut by a lost connection is glued to the first
 * bytes of the next connection; the frame then does not parse, and the library throws from its
 * socket 'data' handler, an uncaught exception that ends the process ("Unknown code: …").
 * Here the tail is dropped whenever a new connection starts, and a frame that still does not
 * parse is treated as a lost connection: the socket is destroyed and the library reconnects
 * (the session, if still alive, is kept). Must run before `connect()`, which binds the handler.
 */
function guardFrameParser(cm: zookeeper.ConnectionManager, logger: Logger): void {
  // eslint-disable-next-line @typescript-eslint/unbound-method -- called below with the manager as `this`
  const parse = cm.onSocketData;
  cm.on('state', (state: number) => {
    if (state === CONNECTION_MANAGER_CONNECTING) cm.pendingBuffer = null;
  });
  cm.onSocketData = function guardedOnSocketData(this: zookeeper.ConnectionManager, buffer: Buffer): void {
    try {
      parse.call(this, buffer);
    } catch (err) {
      this.pendingBuffer = null;
      logger.warn({ err: (err as Error).message }, 'ZooKeeper sent a response that does not parse; reconnecting');
      this.socket?.destroy();
    }
  };
}
