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
  };
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
