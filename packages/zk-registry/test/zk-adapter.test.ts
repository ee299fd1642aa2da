/**
 * One test per workaround of src/zk-adapter.ts. Each first shows what node-zookeeper-client
 * does on its own (the reason for the workaround: when an upgrade changes it, that assertion
 * fails and says the workaround may go), then that the adapter's workaround holds (when an
 * upgrade moves the internals it reaches into, that part fails).
 */
import { createServer, type Server } from 'node:net';
import zookeeper, { type Client } from 'node-zookeeper-client';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '@klog/logger';
import { commitTransaction, createRawConnection, type RawConnection } from '../src/zk-adapter.js';
import { captureLogger, connectClient, CuttableProxy, freshChroot, onCleanup, waitFor } from './helpers.js';

interface Manager {
  pendingBuffer: Buffer | null;
  socket?: { destroy(): void };
  onSocketData(b: Buffer): void;
}
const managerOf = (client: Client) => (client as unknown as { connectionManager: Manager }).connectionManager;

/** A connection of the adapter, closed after the test. */
function adapted(connectString: string, sessionTimeoutMs = 3000, logger = silentLogger): RawConnection {
  const conn = createRawConnection(connectString, { sessionTimeoutMs, spinDelayMs: 50, logger });
  onCleanup(() => conn.close(0));
  return conn;
}

/** A bare library client, closed after the test. */
function bare(connectString: string, sessionTimeoutMs = 3000): Client {
  const client = zookeeper.createClient(connectString, { sessionTimeout: sessionTimeoutMs, spinDelay: 50, retries: 0 });
  onCleanup(async () => {
    client.close();
    managerOf(client).socket?.destroy();
  });
  return client;
}

const connected = (client: Client): Promise<void> => new Promise((resolve) => client.once('connected', () => resolve()));

/** A chroot that exists, and a proxy in front of the test ZooKeeper. */
async function proxied(): Promise<{ proxy: CuttableProxy; connectString: string; direct: string }> {
  const direct = freshChroot();
  await connectClient(direct); // creates the chroot
  const proxy = new CuttableProxy();
  await proxy.start();
  return { proxy, direct, connectString: `127.0.0.1:${proxy.port}${direct.slice(direct.indexOf('/'))}` };
}

/** A TCP server that closes every connection at once, as ZooKeeper does with a session it refuses. */
async function refusingServer(): Promise<number> {
  const server: Server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(() => new Promise((resolve) => server.close(resolve)));
  return (server.address() as { port: number }).port;
}

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('zk-adapter: workarounds of node-zookeeper-client', () => {
  it('1. reconnect backoff: the library waits below a fixed spinDelay; the adapter sets the bound per attempt', async () => {
    const conn = adapted(`127.0.0.1:${await closedPort()}`);
    let attempts = 0;
    conn.onConnecting(() => void attempts++);
    conn.client.connect();
    await new Promise((r) => setTimeout(r, 600));
    expect(attempts, 'attempts with a 50 ms bound').toBeGreaterThanOrEqual(5); // the library's own loop, fixed delay
    conn.setReconnectDelay(10_000);
    await new Promise((r) => setTimeout(r, 200)); // let an attempt already scheduled go
    const before = attempts;
    await new Promise((r) => setTimeout(r, 1000));
    expect(attempts - before, 'attempts with a 10 s bound').toBeLessThanOrEqual(2);
  });

  it('2. a server that stops answering: the library stays connected; the adapter sees the silence and drops the connection', async () => {
    const { proxy, connectString } = await proxied();
    const client = bare(connectString, 2000);
    const conn = adapted(connectString, 2000);
    const up = Promise.all([connected(client), connected(conn.client)]);
    client.connect();
    conn.client.connect();
    await up;
    proxy.freeze();
    await new Promise((r) => setTimeout(r, 2500)); // longer than the session timeout
    expect(client.getState()).toBe(zookeeper.State.SYNC_CONNECTED); // why: no read timeout in the library
    expect(Date.now() - conn.lastHeardAt).toBeGreaterThan(2000);
    const disconnected = new Promise<void>((resolve) => conn.client.once('disconnected', () => resolve()));
    const back = new Promise<void>((resolve) => conn.client.on('connected', () => resolve()));
    conn.dropConnection();
    await disconnected;
    await back; // a new connection through the proxy: the session is kept
    expect(Date.now() - conn.lastHeardAt).toBeLessThan(1000);
  });

  it('3a. a cut frame: the library keeps its tail across a reconnect; the adapter drops it', async () => {
    const { direct } = await proxied();
    const junk = Buffer.from([0, 0, 0, 40, 0xde, 0xad, 0xbe, 0xef]); // the start of a 40-byte frame
    const client = bare(direct);
    const c1 = connected(client);
    client.connect();
    await c1;
    const cm0 = managerOf(client);
    const kept = new Promise<Buffer | null>((resolve) =>
      client.once('disconnected', () => {
        resolve(cm0.pendingBuffer); // why: still there as the library starts the next connection
        cm0.pendingBuffer = null;
      }),
    );
    cm0.pendingBuffer = Buffer.from(junk);
    cm0.socket?.destroy();
    expect(await kept).toEqual(junk);
    // the adapter: same cut, and the client reconnects and works
    const conn = adapted(direct);
    const up = connected(conn.client);
    conn.client.connect();
    await up;
    const cm = managerOf(conn.client);
    cm.pendingBuffer = Buffer.from(junk);
    const back = new Promise<void>((resolve) => conn.client.once('connected', () => resolve()));
    cm.socket?.destroy();
    await back;
    const path = await new Promise<string>((resolve, reject) =>
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors -- the library's error, passed on as is
      conn.client.create('/after', Buffer.from('w'), (err, p) => (err ? reject(err) : resolve(p))),
    );
    expect(path).toBe('/after');
  });

  it('3b. a frame that does not parse: the library throws; the adapter reconnects', async () => {
    const { direct } = await proxied();
    // A watch notification (xid -1) whose event is cut after 2 bytes.
    const frame = Buffer.alloc(4 + 16 + 2);
    frame.writeInt32BE(18, 0);
    frame.writeInt32BE(-1, 4);
    frame.writeBigInt64BE(1n, 8);
    frame.writeInt32BE(0, 16);
    const client = bare(direct);
    const c1 = connected(client);
    client.connect();
    await c1;
    expect(() => managerOf(client).onSocketData(Buffer.from(frame))).toThrow(); // why
    const logger = captureLogger();
    const conn = adapted(direct, 3000, logger);
    const c2 = connected(conn.client);
    conn.client.connect();
    await c2;
    const back = new Promise<void>((resolve) => conn.client.once('connected', () => resolve()));
    expect(() => managerOf(conn.client).onSocketData(Buffer.from(frame))).not.toThrow();
    expect(logger.messages('warn')).toContain('ZooKeeper sent a response that does not parse; reconnecting');
    await back;
  });

  it('4. closing without a server: the library never finishes; the adapter destroys the socket', async () => {
    const { proxy, connectString } = await proxied();
    const client = bare(connectString);
    const conn = adapted(connectString);
    const up = Promise.all([connected(client), connected(conn.client)]);
    client.connect();
    conn.client.connect();
    await up;
    proxy.hang();
    let closed = false;
    client.once('disconnected', () => void (closed = true));
    client.close();
    const started = Date.now();
    await conn.close(200);
    expect(Date.now() - started).toBeLessThan(1500);
    await new Promise((r) => setTimeout(r, 1000));
    expect(closed, 'the bare client finished closing').toBe(false); // why
  });

  it('5. a server that refuses the session: the library reconnects for ever; the adapter counts the refusals', async () => {
    const port = await refusingServer();
    const client = bare(`127.0.0.1:${port}`);
    const events: string[] = [];
    for (const e of ['connected', 'expired', 'disconnected']) client.on(e, () => void events.push(e));
    client.connect();
    const conn = adapted(`127.0.0.1:${port}`);
    const streaks: Array<{ count: number; sinceMs: number }> = [];
    conn.onHandshakeRefused((s) => void streaks.push(s));
    conn.client.connect();
    await waitFor(() => streaks.length >= 3, 5000, '3 refusals');
    expect(streaks.map((s) => s.count).slice(0, 3)).toEqual([1, 2, 3]);
    expect(new Set(streaks.map((s) => s.sinceMs)).size).toBe(1);
    expect(events).toEqual([]); // why: the library says nothing about it
  });

  it('7. version 0 in a multi: the library checks nothing; the adapter checks it', async () => {
    const { direct } = await proxied();
    const zk = await connectClient(direct);
    await zk.create('/n', 'a'); // version 0
    await zk.setData('/n', 'b'); // version 1
    const conn = adapted(direct);
    const up = connected(conn.client);
    conn.client.connect();
    await up;
    const bareCheck = await new Promise<unknown>((resolve) => conn.client.transaction().check('/n', 0).setData('/m-missing-ok', Buffer.from('x'), -1).commit((err) => resolve(err)));
    expect((bareCheck as { code?: number } | null)?.code).toBe(zookeeper.Exception.NO_NODE); // why: the check at 0 passed, the setData failed
    const result = await new Promise<{ error: unknown; failedOp: number | undefined }>((resolve) =>
      commitTransaction(conn.client, [{ op: 'check', path: '/n', version: 0 }, { op: 'create', path: '/m', data: Buffer.from('x') }], (error, failedOp) => resolve({ error, failedOp })),
    );
    expect(result.failedOp).toBe(0);
    expect((result.error as { code?: number }).code).toBe(zookeeper.Exception.BAD_VERSION);
    expect(await zk.exists('/m')).toBeUndefined();
    const ok = await new Promise<unknown>((resolve) => commitTransaction(conn.client, [{ op: 'check', path: '/n', version: 1 }, { op: 'create', path: '/m', data: Buffer.from('x') }], (error) => resolve(error)));
    expect(ok).toBeNull();
    expect((await zk.getData('/m'))?.data.toString()).toBe('x');
  });
});
