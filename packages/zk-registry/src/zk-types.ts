/**
 * The shapes of klog's ZooKeeper client (options, stats, watches, events) and the conversion of
 * the library's results and errors into them.
 */
import type { Exception as RawException, Stat as RawStat } from 'node-zookeeper-client';
import {
  ZkBadVersionError,
  ZkError,
  ZkErrorCode,
  ZkNoNodeError,
  ZkNodeExistsError,
  ZkSessionExpiredError,
} from './errors.js';
import type { Logger } from '@klog/logger';

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
  /**
   * The zxid of the transaction that created the node (ZooKeeper's `czxid`), a 64-bit number
   * read as a JavaScript number: exact while ZooKeeper's own epoch (the high 32 bits) is below
   * 2^21. A node created again gets a larger one: the `czxid` of `/brokers/ids/<id>` is the
   * **broker epoch** (docs/replication.md §2).
   */
  readonly czxid: number;
}

/**
 * One operation of {@link ZkClient.multi} (docs/replication.md §3.3). Paths are relative to the
 * chroot; `version` is the node's data version the op requires, -1 for any.
 * - `create`: a node with `data` (empty by default), `mode` persistent (default) or ephemeral
 *   (owned by the session the multi runs in). Its parent must exist (or be created by an
 *   earlier op of the same multi): a multi creates no parents.
 * - `setData`: replaces the data of a node at `version`.
 * - `remove`: removes a node (without children) at `version`.
 * - `check`: writes nothing; fails the multi unless the node exists at `version`.
 */
export type ZkOp =
  | { readonly op: 'create'; readonly path: string; readonly data?: Buffer | string; readonly mode?: 'persistent' | 'ephemeral' }
  | { readonly op: 'setData'; readonly path: string; readonly data: Buffer | string; readonly version: number }
  | { readonly op: 'remove'; readonly path: string; readonly version: number }
  | { readonly op: 'check'; readonly path: string; readonly version: number };

/**
 * What one op of a committed {@link ZkClient.multi} did, in the order of the ops: `create` the
 * path created; `setData` the node's new stat (its `version` is the one to write at next);
 * `remove` and `check` nothing more.
 */
export type ZkOpResult =
  | { readonly op: 'create'; readonly path: string }
  | { readonly op: 'setData'; readonly path: string; readonly stat: ZkStat }
  | { readonly op: 'remove'; readonly path: string }
  | { readonly op: 'check'; readonly path: string };

/** Why one op of a multi failed (ZooKeeper's error code by name); `Other` for any other code. */
export type ZkMultiFailure = 'BadVersion' | 'NodeExists' | 'NoNode' | 'NotEmpty' | 'NoChildrenForEphemerals' | 'Other';

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

/** ZooKeeper's error code carried by `error`, if any. */
export function rawCode(error: unknown): number | undefined {
  if (error instanceof ZkError) return error.code;
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

/** The library's stat as a {@link ZkStat}. */
export function toStat(stat: RawStat): ZkStat {
  const owner = stat.ephemeralOwner.toString('hex');
  return {
    version: stat.version,
    cversion: stat.cversion,
    dataLength: stat.dataLength,
    numChildren: stat.numChildren,
    ctimeMs: Number(stat.ctime.readBigInt64BE(0)),
    mtimeMs: Number(stat.mtime.readBigInt64BE(0)),
    ephemeralOwner: /^0+$/.test(owner) ? undefined : owner,
    czxid: zxid(stat.czxid),
  };
}

/** A zxid (8 bytes, big-endian) as a number. */
function zxid(bytes: Buffer): number {
  return bytes.readUInt32BE(0) * 2 ** 32 + bytes.readUInt32BE(4);
}

/** Node data as bytes (a string as UTF-8, nothing as empty). */
export function toBuffer(data: Buffer | string | undefined): Buffer {
  if (data === undefined) return Buffer.alloc(0);
  return typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
}

/** Maps a library error to a klog error; klog errors pass through. */
export function toZkError(error: unknown, what: string, path: string): ZkError {
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
