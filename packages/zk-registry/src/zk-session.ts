/**
 * The session recipe of klog's ZooKeeper client (docs/architecture.md, "ZooKeeper"): one
 * session at a time, kept across connection losses, replaced after an expiry, and requests
 * retried on it.
 *
 * - Connection loss: logged; the library reconnects with a growing delay (zk-adapter.ts, 1)
 *   and the session survives when the connection is back within the session timeout. A server
 *   that stops answering is dropped after two thirds of the session timeout (zk-adapter.ts, 2).
 * - Expiry: in-flight requests fail, `expired` is emitted, sessions are opened until one
 *   connects, then `onNewSession` runs (ephemerals re-created, watches re-armed) and `session`
 *   is emitted.
 * - A session no server will take back: a server that keeps refusing the handshake for longer
 *   than the session timeout (it restarted with its data lost, zk-adapter.ts, 5) makes the
 *   session count as expired: it is given up the same way, and remembered as a former session
 *   of this client so that nodes it still holds are taken over, not reported as conflicts.
 * - Requests: {@link SessionManager.request} retries a request interrupted by a connection loss
 *   with backoff (@klog/retry) until the operation timeout.
 */
import { EventEmitter } from 'node:events';
import zookeeper from 'node-zookeeper-client';
import type { Client as RawClient, State as RawState } from 'node-zookeeper-client';
import { Backoff, backoffDelayMs, retry, sleep, type BackoffOptions } from '@klog/retry';
import { ZkClosedError, ZkConnectError, ZkErrorCode, ZkSessionExpiredError, ZkTimeoutError } from './errors.js';
import type { Logger } from '@klog/logger';
import { createRawConnection, type RawConnection, type RefusalStreak } from './zk-adapter.js';
import { rawCode, toZkError, type ZkClientEvents } from './zk-types.js';

/** A request on the library's client: call `done` with its error or result. */
export type Invoke<T> = (raw: RawClient, done: (error: unknown, result?: T) => void) => void;

/** One session of the library's client: a new one replaces it after expiry. */
interface Session {
  readonly conn: RawConnection;
  connected: boolean;
  everConnected: boolean;
  /** 16 hex digits, known once connected. */
  id: string;
  disconnectedAt: number | undefined;
  reconnectAttempts: number;
  stillDisconnectedTimer: NodeJS.Timeout | undefined;
  /** Checks that the server keeps answering (see `watchLiveness`). */
  livenessTimer: NodeJS.Timeout | undefined;
  /** Set once this session was given up (expired, or refused by every server). */
  over: boolean;
}

interface InFlight {
  readonly session: Session;
  fail(error: unknown): void;
}

/** Settings of a {@link SessionManager}; durations in ms. */
export interface SessionSettings {
  /** `host:port[,...]` plus the chroot, as the library takes it. */
  readonly connectString: string;
  /** `host:port[,...]`, for log lines and errors. */
  readonly servers: string;
  readonly chroot: string | undefined;
  readonly sessionTimeoutMs: number;
  readonly connectTimeoutMs: number;
  readonly operationTimeoutMs: number;
  readonly backoff: BackoffOptions;
  readonly logger: Logger;
  /** Emits the client's public events. */
  readonly emit: <K extends keyof ZkClientEvents>(event: K, ...args: Parameters<ZkClientEvents[K]>) => void;
  /** Runs on a new session after an expiry, before `session` is emitted. */
  readonly onNewSession: () => Promise<void>;
}

/** See the file comment. */
export class SessionManager {
  /** Internal signals (`ready`, `closed`), kept apart from the public events. */
  private readonly internal = new EventEmitter();
  private session: Session | undefined;
  /** Requests waiting for a reply, failed at once when their session ends or the client closes. */
  private readonly inFlight = new Set<InFlight>();
  /** Ids of the sessions this client has given up. */
  readonly formerSessionIds = new Set<string>();
  closed = false;

  constructor(private readonly s: SessionSettings) {
    this.internal.setMaxListeners(0);
  }

  /** The current session id (16 hex digits); empty before the first connection. */
  get sessionId(): string {
    return this.session?.id ?? '';
  }

  get isConnected(): boolean {
    return this.session?.connected === true;
  }

  /** Connected and heard from the server within two thirds of the session timeout (see ZkClient.holdsSession). */
  get holdsSession(): boolean {
    const s = this.session;
    if (!s?.connected) return false;
    return Date.now() - s.conn.lastHeardAt <= Math.floor((s.conn.client.getSessionTimeout() * 2) / 3);
  }

  /** The library's client of the current session, once it connected. */
  get connectedRaw(): RawClient | undefined {
    return this.session?.everConnected ? this.session.conn.client : undefined;
  }

  /** Opens the first session; rejects with {@link ZkConnectError} when none connects in time. */
  async start(): Promise<void> {
    const session = this.openSession();
    if (!(await this.waitConnected(session, this.s.connectTimeoutMs))) {
      this.session = undefined;
      await session.conn.close(0);
      throw new ZkConnectError(
        `no ZooKeeper answered at ${this.s.servers} within ${this.s.connectTimeoutMs} ms ` + `(is ZooKeeper running? see scripts/zookeeper.sh)`,
      );
    }
  }

  private openSession(): Session {
    const conn = createRawConnection(this.s.connectString, {
      sessionTimeoutMs: this.s.sessionTimeoutMs,
      spinDelayMs: this.s.backoff.initialMs,
      logger: this.s.logger,
    });
    const session: Session = {
      conn,
      connected: false,
      everConnected: false,
      id: '',
      disconnectedAt: undefined,
      reconnectAttempts: 0,
      stillDisconnectedTimer: undefined,
      livenessTimer: undefined,
      over: false,
    };
    this.session = session;
    conn.client.on('state', (state: RawState) => this.onState(session, state));
    // The library waits a random time below its spin delay: growing the bound makes it a backoff.
    conn.onConnecting(() => {
      if (session.connected) return;
      session.reconnectAttempts += 1;
      const maxDelayMs = backoffDelayMs(session.reconnectAttempts, { ...this.s.backoff, jitter: 0 });
      conn.setReconnectDelay(maxDelayMs);
      this.s.logger.debug(
        { servers: this.s.servers, attempt: session.reconnectAttempts, maxDelayMs },
        session.everConnected ? 'reconnecting to ZooKeeper' : 'connecting to ZooKeeper',
      );
    });
    conn.onHandshakeRefused((streak) => this.onRefused(session, streak));
    conn.client.connect();
    return session;
  }

  private onState(session: Session, state: RawState): void {
    if (session !== this.session || this.closed || session.over) return;
    const S = zookeeper.State;
    if (state === S.SYNC_CONNECTED || state === S.CONNECTED_READ_ONLY) {
      const raw = session.conn.client;
      const reconnect = session.everConnected;
      const downMs = session.disconnectedAt === undefined ? 0 : Date.now() - session.disconnectedAt;
      session.connected = true;
      session.everConnected = true;
      session.id = raw.getSessionId().toString('hex');
      session.disconnectedAt = undefined;
      session.reconnectAttempts = 0;
      session.conn.setReconnectDelay(this.s.backoff.initialMs);
      clearInterval(session.stillDisconnectedTimer);
      session.stillDisconnectedTimer = undefined;
      this.watchLiveness(session);
      if (reconnect) {
        this.s.logger.info({ servers: this.s.servers, sessionId: session.id, downMs }, 'reconnected to ZooKeeper; session kept');
      } else {
        this.s.logger.info(
          { servers: this.s.servers, chroot: this.s.chroot, sessionId: session.id, sessionTimeoutMs: raw.getSessionTimeout() },
          'connected to ZooKeeper',
        );
      }
      this.internal.emit('ready', session);
      this.s.emit('connected', { sessionId: session.id, reconnect });
    } else if (state === S.DISCONNECTED) {
      if (!session.connected) return;
      session.connected = false;
      session.disconnectedAt = Date.now();
      const sessionTimeoutMs = session.conn.client.getSessionTimeout();
      this.s.logger.warn({ servers: this.s.servers, sessionId: session.id, sessionTimeoutMs }, 'lost the connection to ZooKeeper; reconnecting with backoff');
      session.stillDisconnectedTimer = setInterval(() => {
        this.s.logger.warn(
          { servers: this.s.servers, sessionId: session.id, downMs: Date.now() - (session.disconnectedAt ?? Date.now()), attempts: session.reconnectAttempts },
          'still disconnected from ZooKeeper',
        );
      }, Math.max(1000, this.s.sessionTimeoutMs));
      session.stillDisconnectedTimer.unref();
      this.s.emit('disconnected');
    } else if (state === S.EXPIRED) {
      this.s.logger.warn({ servers: this.s.servers, sessionId: session.id }, 'ZooKeeper session expired; its ephemeral nodes are gone; opening a new session');
      this.giveUp(session);
    } else if (state === S.AUTH_FAILED) {
      this.s.logger.error({ servers: this.s.servers }, 'ZooKeeper authentication failed');
    }
  }

  /** A server closed the connection during the handshake (zk-adapter.ts, 5). */
  private onRefused(session: Session, streak: RefusalStreak): void {
    if (session !== this.session || this.closed || session.over || !session.everConnected) return;
    const refusedMs = Date.now() - streak.sinceMs;
    this.s.logger.debug({ servers: this.s.servers, sessionId: session.id, refusals: streak.count, refusedMs }, 'ZooKeeper refused to resume the session');
    if (streak.count < 2 || refusedMs < session.conn.client.getSessionTimeout()) return;
    this.s.logger.warn(
      { servers: this.s.servers, sessionId: session.id, refusals: streak.count, refusedMs },
      'ZooKeeper keeps refusing this session (it lost data it had seen: restarted empty?); giving the session up and opening a new one',
    );
    this.formerSessionIds.add(session.id);
    this.giveUp(session);
  }

  /** Ends a session that will not come back and starts the renewal. */
  private giveUp(session: Session): void {
    session.over = true;
    session.connected = false;
    clearInterval(session.stillDisconnectedTimer);
    clearInterval(session.livenessTimer);
    const expired = toZkError({ code: ZkErrorCode.sessionExpired, name: 'SESSION_EXPIRED' }, 'request', '(any)');
    for (const op of this.inFlight) if (op.session === session) op.fail(expired);
    void session.conn.close(0);
    this.s.emit('expired', { sessionId: session.id });
    void this.renewSession(session);
  }

  /**
   * Drops the connection when nothing was heard for two thirds of the session timeout, as
   * ZooKeeper's Java client does (zk-adapter.ts, 2); the reconnect then finds out whether the
   * session is still alive.
   */
  private watchLiveness(session: Session): void {
    const readTimeoutMs = Math.floor((session.conn.client.getSessionTimeout() * 2) / 3);
    clearInterval(session.livenessTimer);
    session.livenessTimer = setInterval(() => {
      if (!session.connected || this.closed || session !== this.session) return;
      const silentMs = Date.now() - session.conn.lastHeardAt;
      if (silentMs <= readTimeoutMs) return;
      this.s.logger.warn({ servers: this.s.servers, sessionId: session.id, silentMs, readTimeoutMs }, 'ZooKeeper stopped answering; dropping the connection');
      session.conn.dropConnection();
    }, Math.max(50, Math.floor(readTimeoutMs / 4)));
    session.livenessTimer.unref();
  }

  /** After expiry: opens sessions until one connects, then restores what the client holds. */
  private async renewSession(expired: Session): Promise<void> {
    let session: Session | undefined;
    const backoff = new Backoff(this.s.backoff);
    while (!this.closed) {
      const candidate = this.openSession();
      if (await this.waitConnected(candidate, this.s.connectTimeoutMs)) {
        session = candidate;
        break;
      }
      if (this.closed || this.session !== candidate) return;
      this.s.logger.warn({ servers: this.s.servers, attempt: backoff.attempts }, 'could not open a new ZooKeeper session; retrying');
      await candidate.conn.close(0);
      await sleep(backoff.next());
    }
    if (!session || this.closed) return;
    await this.s.onNewSession();
    if (this.session !== session || this.closed) return; // expired again meanwhile: the next renewal reports
    this.s.logger.info({ sessionId: session.id, previousSessionId: expired.id }, 'new ZooKeeper session ready; ephemeral nodes re-created and watches re-armed');
    this.s.emit('session', { sessionId: session.id, previousSessionId: expired.id });
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

  /** Resolves once a session is connected (true), or false when the client closed or `timeoutMs` passed. */
  async untilConnected(timeoutMs = Infinity): Promise<boolean> {
    try {
      await this.connectedSession(Date.now() + timeoutMs);
      return true;
    } catch {
      return false;
    }
  }

  /** The current session once it is connected; waits for it until `deadline` (epoch ms). */
  private async connectedSession(deadline: number): Promise<Session> {
    for (;;) {
      if (this.closed) throw new ZkClosedError('ZooKeeper client is closed');
      const s = this.session;
      if (s?.connected) return s;
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        throw new ZkTimeoutError(`not connected to ZooKeeper at ${this.s.servers} for ${this.s.operationTimeoutMs} ms`);
      }
      await new Promise<void>((resolve) => {
        const finish = (): void => {
          clearTimeout(timer);
          this.internal.off('ready', finish);
          this.internal.off('closed', finish);
          resolve();
        };
        const timer = setTimeout(finish, Math.min(remaining, 2 ** 31 - 1));
        this.internal.on('ready', finish);
        this.internal.on('closed', finish);
      });
    }
  }

  /** Sends one request on a session; fails when the session ends, the client closes or the deadline passes. */
  private call<T>(session: Session, invoke: Invoke<T>, deadline: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const finish = (error: unknown, result?: T): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.inFlight.delete(entry);
        if (error) reject(error instanceof Error ? error : toZkError(error, 'request', '(any)'));
        else resolve(result as T);
      };
      const entry: InFlight = { session, fail: (error) => finish(error) };
      const timer = setTimeout(
        () => finish(new ZkTimeoutError(`no reply from ZooKeeper at ${this.s.servers} within ${this.s.operationTimeoutMs} ms`)),
        Math.max(0, deadline - Date.now()),
      );
      this.inFlight.add(entry);
      try {
        invoke(session.conn.client, finish);
      } catch (error) {
        finish(error);
      }
    });
  }

  /**
   * Runs a request, retrying after a connection loss with backoff until the operation
   * timeout. After a session expiry it is retried on the new session only when
   * `retryOnExpiry`; otherwise it fails with {@link ZkSessionExpiredError}, as it does at once
   * when `sessionId` is given and the current session is another one.
   */
  request<T>(what: string, path: string, invoke: Invoke<T>, retryOnExpiry: boolean, sessionId?: string): Promise<T> {
    const deadline = Date.now() + this.s.operationTimeoutMs;
    let first: Session | undefined;
    return retry(
      async () => {
        const session = await this.connectedSession(deadline);
        first ??= session;
        if ((session !== first && !retryOnExpiry) || (sessionId !== undefined && session.id !== sessionId)) {
          throw new ZkSessionExpiredError(`ZooKeeper ${what} ${path}: the session expired`, { code: ZkErrorCode.sessionExpired, path });
        }
        try {
          return await this.call(session, invoke, deadline);
        } catch (error) {
          throw toZkError(error, what, path);
        }
      },
      {
        ...this.s.backoff,
        deadlineMs: this.s.operationTimeoutMs,
        retriable: (error) => {
          if (this.closed || error instanceof ZkTimeoutError) return false;
          const code = rawCode(error);
          return code === ZkErrorCode.connectionLoss || code === ZkErrorCode.operationTimeout || (code === ZkErrorCode.sessionExpired && retryOnExpiry);
        },
        onRetry: ({ attempt, error }) => this.s.logger.debug({ op: what, path, attempt, code: rawCode(error) }, 'ZooKeeper request interrupted; retrying'),
      },
    );
  }

  /** Closes the session (its ephemeral nodes go at once); pending requests fail with {@link ZkClosedError}. */
  async close(): Promise<void> {
    this.closed = true;
    const closedError = new ZkClosedError('ZooKeeper client is closed');
    for (const op of this.inFlight) op.fail(closedError);
    this.internal.emit('closed');
    const s = this.session;
    if (s) {
      clearInterval(s.stillDisconnectedTimer);
      clearInterval(s.livenessTimer);
      await s.conn.close(s.connected ? 2000 : 0);
    }
  }
}
