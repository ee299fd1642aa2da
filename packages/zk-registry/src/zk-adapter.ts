/**
 * The adapter around node-zookeeper-client 1.1.3: the only file that reaches into the
 * library's private internals (its `ConnectionManager`). Everything else uses the library's
 * public API as `@types/node-zookeeper-client` types it. Each workaround below says, as an
 * upstream report would, what the library does and what klog needs instead; each has a test in
 * test/zk-adapter.test.ts that shows the library's behaviour it works around, so an upgrade
 * that changes the internals, or fixes the behaviour, fails there first.
 *
 * 1. Reconnect backoff. The library retries a lost connection forever, waiting a random time
 *    below a fixed `spinDelay` once every server was tried; it has no growing delay. klog
 *    writes `connectionManager.spinDelay` before each attempt ({@link RawConnection.setReconnectDelay}).
 * 2. A server that stops answering. The library sends pings but never times a read out, so a
 *    hung server or a silent network keeps it "connected" for ever (the Java client drops the
 *    connection after two thirds of the session timeout). The adapter records when bytes last
 *    arrived ({@link RawConnection.lastHeardAt}) and can drop the socket
 *    ({@link RawConnection.dropConnection}); the library then reconnects.
 * 3. A frame cut by a lost connection. The library keeps the unparsed tail of a response frame
 *    (`pendingBuffer`) across a reconnect and glues it to the next connection's first bytes;
 *    that frame does not parse and the library throws from its socket 'data' handler, an
 *    uncaught exception that ends the process ("Unknown code: ..."). The adapter drops the tail
 *    whenever a new connection starts and turns a frame that still does not parse into a
 *    dropped connection.
 * 4. Closing without a server. `close()` queues CLOSE_SESSION and waits for the server to
 *    answer: against a silent or absent server it never completes and the socket stays open.
 *    {@link RawConnection.close} destroys the socket after a grace period.
 * 5. A server that refuses the session. A server that has seen less than the client (one
 *    restarted with its data lost) closes every connection during the handshake ("has seen
 *    zxid ... our last zxid is ..."); the library reconnects for ever and never reports the
 *    session as expired. The adapter counts these refusals ({@link RawConnection.onHandshakeRefused})
 *    so that the client can give the session up and open a new one.
 * 6. Session take-over. `createClient` accepts `sessionId` and `sessionPassword` (ZooKeeper's
 *    own tests use them to expire a session) but the published types omit them; typed here.
 * 7. Version 0 in a transaction. `Transaction.check`, `.setData` and `.remove` read their
 *    version as `version || -1`, so a check of a node at version 0 (every node just created)
 *    checks nothing. {@link commitTransaction} puts the asked versions back into the ops.
 */
import type { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import zookeeper from 'node-zookeeper-client';
import type { Client, Option, Stat as RawStat } from 'node-zookeeper-client';
import type { Logger } from '@klog/logger';

/** The private part of the library's connection manager that the workarounds touch. */
interface ConnectionManagerInternals extends EventEmitter {
  state: number;
  spinDelay: number;
  socket?: Socket;
  pendingBuffer: Buffer | null;
  /** Socket handlers, looked up on the instance when each socket is created. */
  onSocketData(buffer: Buffer): void;
  onSocketConnected(): void;
  onSocketClosed(hadError: boolean): void;
}

/** The library's connection manager states (`ConnectionManager.STATES`, private). */
const STATE_CONNECTING = 1;
const STATE_CONNECTED = 2;
const STATE_CONNECTED_READ_ONLY = 3;

/** Options of {@link createRawConnection}; durations in ms. */
export interface RawConnectionOptions {
  readonly sessionTimeoutMs: number;
  /** First reconnect delay bound (workaround 1). */
  readonly spinDelayMs: number;
  /** Take over this session (workaround 6); both or neither. */
  readonly sessionId?: Buffer;
  readonly sessionPassword?: Buffer;
  readonly logger: Logger;
}

/** Handshake refusals in a row (workaround 5). */
export interface RefusalStreak {
  /** Connections the server closed during the handshake, in a row. */
  readonly count: number;
  /** When the first of them happened, epoch ms. */
  readonly sinceMs: number;
}

/** One library client with the workarounds installed. */
export interface RawConnection {
  /** The library's client, for its public API. */
  readonly client: Client;
  /** Sets the bound of the random wait before the next reconnect attempt, ms (workaround 1). */
  setReconnectDelay(ms: number): void;
  /** Calls back each time the library starts a connection attempt (workaround 1). */
  onConnecting(listener: () => void): void;
  /** When bytes last arrived on the current connection, epoch ms (workaround 2). */
  readonly lastHeardAt: number;
  /** Drops the current connection; the library reconnects and keeps a live session (workaround 2). */
  dropConnection(): void;
  /** Calls back on every handshake refusal with the streak so far (workaround 5). */
  onHandshakeRefused(listener: (streak: RefusalStreak) => void): void;
  /**
   * Closes the session (gracefully: waits up to `graceMs` for the server to confirm) and
   * destroys the socket in any case (workaround 4). Never rejects.
   */
  close(graceMs: number): Promise<void>;
}

/** The library's `createClient` options, with the two the published types omit (workaround 6). */
type CreateOptions = Partial<Option> & { sessionId?: Buffer; sessionPassword?: Buffer };

/** Creates a library client for `connectString` with every workaround installed; not connected yet. */
export function createRawConnection(connectString: string, options: RawConnectionOptions): RawConnection {
  const createOptions: CreateOptions = { sessionTimeout: options.sessionTimeoutMs, spinDelay: options.spinDelayMs, retries: 0 };
  if (options.sessionId && options.sessionPassword) {
    createOptions.sessionId = options.sessionId;
    createOptions.sessionPassword = options.sessionPassword;
  }
  const client = (zookeeper.createClient as (s: string, o: CreateOptions) => Client)(connectString, createOptions);
  const cm = internals(client);
  let lastHeardAt = Date.now();
  let handshaking = false;
  let streak: RefusalStreak | undefined;
  const refusalListeners: Array<(s: RefusalStreak) => void> = [];

  // 3: a new connection starts with no leftover bytes.
  cm.on('state', (state: number) => {
    if (state === STATE_CONNECTING) cm.pendingBuffer = null;
    if (state === STATE_CONNECTED || state === STATE_CONNECTED_READ_ONLY) {
      handshaking = false;
      streak = undefined;
    }
  });
  // 2 + 3: note every byte received; a frame that does not parse drops the connection.
  // eslint-disable-next-line @typescript-eslint/unbound-method -- called below with the manager as `this`
  const parse = cm.onSocketData;
  cm.onSocketData = function guardedOnSocketData(this: ConnectionManagerInternals, buffer: Buffer): void {
    lastHeardAt = Date.now();
    try {
      parse.call(this, buffer);
    } catch (err) {
      this.pendingBuffer = null;
      options.logger.warn({ err: (err as Error).message }, 'ZooKeeper sent a response that does not parse; reconnecting');
      this.socket?.destroy();
    }
  };
  // 5: a socket that connected and closed before the session was established is a refusal.
  // eslint-disable-next-line @typescript-eslint/unbound-method -- called below with the manager as `this`
  const connected = cm.onSocketConnected;
  cm.onSocketConnected = function notedOnSocketConnected(this: ConnectionManagerInternals): void {
    handshaking = true;
    lastHeardAt = Date.now();
    connected.call(this);
  };
  // eslint-disable-next-line @typescript-eslint/unbound-method -- called below with the manager as `this`
  const closed = cm.onSocketClosed;
  cm.onSocketClosed = function notedOnSocketClosed(this: ConnectionManagerInternals, hadError: boolean): void {
    const refused = handshaking && this.state === STATE_CONNECTING;
    if (!handshaking && this.state === STATE_CONNECTING) streak = undefined; // no server there: not a refusal
    handshaking = false;
    if (refused) {
      streak = { count: (streak?.count ?? 0) + 1, sinceMs: streak?.sinceMs ?? Date.now() };
      for (const l of refusalListeners) l(streak);
    }
    closed.call(this, hadError);
  };

  return {
    client,
    setReconnectDelay(ms) {
      cm.spinDelay = ms;
    },
    onConnecting(listener) {
      cm.on('state', (state: number) => {
        if (state === STATE_CONNECTING) listener();
      });
    },
    get lastHeardAt() {
      return lastHeardAt;
    },
    dropConnection() {
      cm.socket?.destroy();
    },
    onHandshakeRefused(listener) {
      refusalListeners.push(listener);
    },
    close(graceMs) {
      return new Promise((resolve) => {
        let done = false;
        const finish = (): void => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          try {
            cm.socket?.destroy();
          } catch {
            // already gone
          }
          resolve();
        };
        const timer = setTimeout(finish, graceMs);
        client.once('disconnected', finish);
        try {
          client.close();
        } catch {
          finish();
        }
      });
    },
  };
}

/** One operation of a ZooKeeper multi (transaction); `version` -1 means any. */
export type TransactionOp =
  | { readonly op: 'check'; readonly path: string; readonly version: number }
  | { readonly op: 'setData'; readonly path: string; readonly data: Buffer; readonly version: number }
  | { readonly op: 'remove'; readonly path: string; readonly version: number }
  | { readonly op: 'create'; readonly path: string; readonly data: Buffer; readonly ephemeral?: boolean };

/** The library's result of one op of a committed multi: `stat` for setData, `err` for a failed op. */
export interface TransactionOpResult {
  readonly stat?: RawStat;
  readonly err?: number;
}

/**
 * Commits `ops` as one ZooKeeper multi: all apply or none does. On success `done` gets the
 * library's result per op; on failure the library's error and the index of the op that failed
 * (undefined when the multi got no answer, e.g. a lost connection: it may or may not have been
 * applied). Workaround 7 applied.
 */
export function commitTransaction(
  client: Client,
  ops: readonly TransactionOp[],
  done: (error: unknown, failedOp?: number, results?: readonly TransactionOpResult[]) => void,
): void {
  const tx = client.transaction();
  for (const o of ops) {
    if (o.op === 'check') tx.check(o.path, o.version);
    else if (o.op === 'setData') tx.setData(o.path, o.data, o.version);
    else if (o.op === 'remove') tx.remove(o.path, o.version);
    else tx.create(o.path, o.data, o.ephemeral === true ? zookeeper.CreateMode.EPHEMERAL : zookeeper.CreateMode.PERSISTENT);
  }
  const queued = (tx as unknown as { ops?: Array<{ version?: number }> }).ops;
  if (!Array.isArray(queued) || queued.length !== ops.length) {
    throw new Error('node-zookeeper-client internals changed: Transaction.ops not found (see zk-adapter.ts)');
  }
  ops.forEach((o, i) => {
    if (o.op !== 'create') queued[i]!.version = o.version;
  });
  tx.commit((error, results: unknown) => {
    const list = Array.isArray(results) ? (results as TransactionOpResult[]) : [];
    if (!error) return done(null, undefined, list);
    const failed = list.findIndex((r) => r.err !== undefined && r.err !== 0 && r.err !== -2);
    done(error, failed < 0 ? undefined : failed);
  });
}

function internals(client: Client): ConnectionManagerInternals {
  const cm = (client as unknown as { connectionManager?: ConnectionManagerInternals }).connectionManager;
  if (!cm || typeof cm.onSocketData !== 'function' || typeof cm.onSocketConnected !== 'function' || typeof cm.onSocketClosed !== 'function') {
    throw new Error('node-zookeeper-client internals changed: connectionManager.onSocketData/onSocketConnected/onSocketClosed not found (see zk-adapter.ts)');
  }
  return cm;
}
