/**
 * Helpers for tests that need a real ZooKeeper (`@klog/zk-registry/testing`). They start
 * nothing: a ZooKeeper must already run (`scripts/zookeeper.sh install && scripts/zookeeper.sh start`)
 * at `KLOG_ZK_CONNECT` (default `127.0.0.1:2181`). Each test should use its own chroot from
 * {@link testConnectString} so that tests never see each other's nodes.
 */
import { randomBytes } from 'node:crypto';
import { connect as netConnect } from 'node:net';
import { silentLogger } from '@klog/logger';
import { createRawConnection } from './zk-adapter.js';
import { parseConnectString, ZkClient, type ZkSessionCredentials } from './zk-client.js';

/** Where tests find ZooKeeper when `KLOG_ZK_CONNECT` is not set. */
export const DEFAULT_TEST_ZOOKEEPER = '127.0.0.1:2181';

/** The ZooKeeper connect string tests use: `KLOG_ZK_CONNECT`, else {@link DEFAULT_TEST_ZOOKEEPER}. */
export function testZooKeeper(): string {
  const fromEnv = process.env['KLOG_ZK_CONNECT']?.trim();
  return fromEnv ? fromEnv : DEFAULT_TEST_ZOOKEEPER;
}

/**
 * A connect string with a fresh random chroot under {@link testZooKeeper}, e.g.
 * `127.0.0.1:2181/klog-test-3f9a0c1d2e4b`. The chroot is created on first connect.
 */
export function testConnectString(prefix = 'klog-test'): string {
  const base = testZooKeeper().replace(/\/+$/, '');
  return `${base}/${prefix}-${randomBytes(6).toString('hex')}`;
}

/** Sends a ZooKeeper four-letter word to `host:port` and returns the answer ('' when none). */
export function fourLetterWord(hostPort: string, word: string, timeoutMs = 2000): Promise<string> {
  const colon = hostPort.lastIndexOf(':');
  const host = colon < 0 ? hostPort : hostPort.slice(0, colon);
  const port = colon < 0 ? 2181 : Number(hostPort.slice(colon + 1));
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = netConnect({ host, port });
    const finish = (): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(Buffer.concat(chunks).toString('utf8'));
    };
    const timer = setTimeout(finish, timeoutMs);
    socket.on('connect', () => socket.end(word));
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('close', finish);
    socket.on('error', finish);
  });
}

/**
 * Fails with a clear message unless a server of `connectString` answers `ruok` with `imok`.
 * Use it in a global setup so that a missing ZooKeeper fails the run instead of hanging it.
 */
export async function assertZooKeeperRunning(connectString: string = testZooKeeper()): Promise<void> {
  const { servers } = parseConnectString(connectString);
  for (const server of servers.split(',')) {
    if ((await fourLetterWord(server.trim(), 'ruok')) === 'imok') return;
  }
  throw new Error(
    `No ZooKeeper answers at ${servers} (KLOG_ZK_CONNECT=${process.env['KLOG_ZK_CONNECT'] ?? '(unset)'}). ` +
      `These tests need a real ZooKeeper: run 'bash scripts/zookeeper.sh install && bash scripts/zookeeper.sh start' ` +
      `from the repository root, or set KLOG_ZK_CONNECT to a running ensemble.`,
  );
}

/**
 * Forces the expiry of a live session: a second connection takes the session over with its
 * id and password and closes it, as ZooKeeper's own tests do, until a last take-over attempt
 * is told that the session is expired. The session's ephemeral nodes are gone when this
 * resolves; its original client learns of the expiry when it (re)connects.
 */
export async function expireSession(connectString: string, credentials: ZkSessionCredentials, timeoutMs = 10_000): Promise<void> {
  const { servers } = parseConnectString(connectString);
  const deadline = Date.now() + timeoutMs;
  // The original client may win the session back before the close goes through: repeat.
  while (Date.now() < deadline) {
    if ((await takeOverAndClose(servers, credentials, deadline - Date.now())) === 'expired') return;
  }
  throw new Error(`could not expire session ${credentials.sessionId.toString('hex')} within ${timeoutMs} ms`);
}

function takeOverAndClose(servers: string, credentials: ZkSessionCredentials, timeoutMs: number): Promise<'expired' | 'closed' | 'timeout'> {
  const intruder = createRawConnection(servers, {
    sessionTimeoutMs: 30_000,
    spinDelayMs: 100,
    sessionId: credentials.sessionId,
    sessionPassword: credentials.sessionPassword,
    logger: silentLogger,
  }).client;
  return new Promise((resolve) => {
    let closing = false;
    const finish = (result: 'expired' | 'closed' | 'timeout'): void => {
      clearTimeout(timer);
      intruder.removeAllListeners();
      if (result !== 'closed') intruder.close();
      resolve(result);
    };
    const timer = setTimeout(() => finish('timeout'), Math.max(0, timeoutMs));
    intruder.on('connected', () => {
      closing = true;
      intruder.close();
    });
    intruder.on('disconnected', () => {
      if (closing) finish('closed');
    });
    intruder.on('expired', () => finish('expired'));
    intruder.connect();
  });
}

/** Removes a test chroot and everything under it (connects without chroot). No-op without chroot. */
export async function removeChroot(connectString: string): Promise<void> {
  const { servers, chroot } = parseConnectString(connectString);
  if (chroot === undefined) return;
  const zk = await ZkClient.connect(servers, { connectTimeoutMs: 5000 });
  try {
    await zk.remove(chroot, { recursive: true });
  } finally {
    await zk.close();
  }
}

export { ControllerStandIn } from './controller-stand-in.js';
