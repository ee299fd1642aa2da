import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { parseConnectString, ZkBadVersionError, ZkClient, ZkConnectError, ZkNodeExistsError, ZkNoNodeError, ZkClosedError, ZkSessionExpiredError } from '../src/index.js';
import { expireSession, testZooKeeper } from '../src/testing.js';
import { captureLogger, connectClient, CuttableProxy, freshChroot, nextEvent, waitFor } from './helpers.js';

describe('ZkClient against a real ZooKeeper', () => {
  it('creates a missing chroot and keeps every path under it', async () => {
    const connectString = freshChroot();
    const chroot = connectString.slice(connectString.indexOf('/'));
    const zk = await connectClient(connectString);
    expect(zk.chroot).toBe(chroot);
    await zk.create('/brokers/ids/1', 'v', { mode: 'persistent' });
    const root = await connectClient(parseConnectString(testZooKeeper()).servers);
    expect(await root.exists(chroot)).toBeDefined();
    expect((await root.getData(`${chroot}/brokers/ids/1`))?.data.toString()).toBe('v');
    expect(await root.exists('/brokers/ids/1')).toBeUndefined();
  });

  it('logs to a pino logger', async () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    });
    const zk = await connectClient(freshChroot(), { logger: pino({ level: 'info' }, sink) });
    const entry = lines.map((l) => JSON.parse(l) as { msg: string; sessionId?: string }).findLast((e) => e.msg === 'connected to ZooKeeper');
    expect(entry?.sessionId).toBe(zk.sessionId);
  });

  it('creates with parents, reads, writes, lists and removes recursively', async () => {
    const zk = await connectClient(freshChroot());
    expect(await zk.create('/a/b/c', 'one')).toBe('/a/b/c');
    await expect(zk.create('/a/b/c', 'again')).rejects.toBeInstanceOf(ZkNodeExistsError);
    await expect(zk.create('/x/y', 'v', { createParents: false })).rejects.toBeInstanceOf(ZkNoNodeError);
    const node = await zk.getData('/a/b/c');
    expect(node?.data.toString()).toBe('one');
    expect(node?.stat.version).toBe(0);
    expect(node?.stat.ephemeralOwner).toBeUndefined();
    const stat = await zk.setData('/a/b/c', 'two');
    expect(stat.version).toBe(1);
    await expect(zk.setData('/missing', 'x')).rejects.toBeInstanceOf(ZkNoNodeError);
    await zk.put('/a/b/d', '1');
    await zk.put('/a/b/d', '2');
    expect((await zk.getData('/a/b/d'))?.data.toString()).toBe('2');
    expect(await zk.getChildren('/a/b')).toEqual(['c', 'd']);
    expect(await zk.getChildren('/nothing/here')).toEqual([]);
    expect(await zk.getData('/nothing')).toBeUndefined();
    expect(await zk.remove('/a', { recursive: true })).toBe(true);
    expect(await zk.exists('/a')).toBeUndefined();
    expect(await zk.remove('/a')).toBe(false);
  });

  it('fails fast with a clear error when no ZooKeeper answers', async () => {
    const proxy = new CuttableProxy();
    await proxy.start();
    const port = proxy.port;
    await proxy.stop(); // nothing listens on `port` now
    const started = Date.now();
    const attempt = ZkClient.connect(`127.0.0.1:${port}/klog-test-none`, { connectTimeoutMs: 1500 });
    await expect(attempt).rejects.toBeInstanceOf(ZkConnectError);
    await expect(attempt).rejects.toThrow(/no ZooKeeper answered at 127\.0\.0\.1:\d+ within 1500 ms/);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('ephemeral nodes vanish when their session closes; persistent ones stay', async () => {
    const connectString = freshChroot();
    const owner = await connectClient(connectString);
    const observer = await connectClient(connectString);
    await owner.createEphemeral('/e/one', 'x');
    await owner.registerEphemeral('/e/two', 'y');
    await owner.create('/p/one', 'z');
    expect((await observer.exists('/e/one'))?.ephemeralOwner).toBe(owner.sessionId);
    expect(await observer.getChildren('/e')).toEqual(['one', 'two']);
    await owner.close();
    expect(await observer.getChildren('/e')).toEqual([]);
    expect(await observer.exists('/p/one')).toBeDefined();
    await expect(owner.getData('/p/one')).rejects.toBeInstanceOf(ZkClosedError);
  });

  it('createEphemeral is idempotent for its own session and refuses another session’s node', async () => {
    const connectString = freshChroot();
    const a = await connectClient(connectString);
    const b = await connectClient(connectString);
    await a.createEphemeral('/lock', 'a');
    await a.createEphemeral('/lock', 'a2');
    expect((await b.getData('/lock'))?.data.toString()).toBe('a2');
    await expect(b.createEphemeral('/lock', 'b')).rejects.toBeInstanceOf(ZkNodeExistsError);
    expect(await b.removeOwnEphemeral('/lock')).toBe(false);
    expect(await a.removeOwnEphemeral('/lock')).toBe(true);
    await b.createEphemeral('/lock', 'b');
  });

  it('children watches fire on every change (re-armed) until closed', async () => {
    const connectString = freshChroot();
    const watcher = await connectClient(connectString);
    const writer = await connectClient(connectString);
    const seen: string[][] = [];
    const watch = watcher.watchChildren('/brokers/ids', (children) => void seen.push(children));
    await watch.ready;
    expect(seen).toEqual([[]]); // missing parent reads as no children, and its creation is watched
    const expectLast = (children: string[]) => waitFor(() => JSON.stringify(seen.at(-1)) === JSON.stringify(children), 5000, JSON.stringify(children));
    await writer.createEphemeral('/brokers/ids/1', 'a');
    await expectLast(['1']);
    await writer.createEphemeral('/brokers/ids/2', 'b');
    await expectLast(['1', '2']);
    await writer.remove('/brokers/ids/1');
    await expectLast(['2']);
    await writer.createEphemeral('/brokers/ids/3', 'c');
    await expectLast(['2', '3']);
    expect(seen.length).toBeGreaterThanOrEqual(5);
    watch.close();
    const count = seen.length;
    await writer.createEphemeral('/brokers/ids/4', 'd');
    await new Promise((r) => setTimeout(r, 300));
    expect(seen.length).toBe(count);
  });

  it('data watches fire on every change, including deletion and re-creation', async () => {
    const connectString = freshChroot();
    const watcher = await connectClient(connectString);
    const writer = await connectClient(connectString);
    const seen: (string | undefined)[] = [];
    const watch = watcher.watchData('/cfg', (data) => void seen.push(data?.toString()));
    await watch.ready;
    const expectLast = (v: string | undefined) => waitFor(() => seen.length > 0 && seen.at(-1) === v, 5000, String(v));
    expect(seen).toEqual([undefined]);
    await writer.create('/cfg', '1');
    await expectLast('1');
    await writer.setData('/cfg', '2');
    await expectLast('2');
    await writer.remove('/cfg');
    await expectLast(undefined);
    await writer.create('/cfg', '3');
    await expectLast('3');
    watch.close();
  });

  it('survives a connection loss: logs it, reconnects with backoff and keeps its session', async () => {
    const connectString = freshChroot();
    await (await connectClient(connectString)).close(); // creates the chroot
    const proxy = new CuttableProxy();
    await proxy.start();
    const logger = captureLogger();
    const chroot = connectString.slice(connectString.indexOf('/'));
    const zk = await connectClient(`127.0.0.1:${proxy.port}${chroot}`, { sessionTimeoutMs: 4000, logger });
    const observer = await connectClient(connectString);
    await zk.registerEphemeral('/brokers/ids/5', 'x:h:1');
    const seen: string[][] = [];
    const watch = zk.watchChildren('/brokers/ids', (c) => void seen.push(c));
    await watch.ready;
    const sessionId = zk.sessionId;

    const disconnected = nextEvent(zk, 'disconnected');
    const port = proxy.port;
    await proxy.stop(); // connection refused while it retries
    await disconnected;
    expect(zk.isConnected).toBe(false);
    expect(logger.messages('warn')).toContain('lost the connection to ZooKeeper; reconnecting with backoff');
    // A write issued while disconnected waits for the connection.
    const pendingWrite = zk.put('/while-down', 'queued');
    await new Promise((r) => setTimeout(r, 1200));
    const attempts = logger.entries.filter((e) => e.msg === 'reconnecting to ZooKeeper').map((e) => (e.obj as { maxDelayMs: number }).maxDelayMs);
    expect(attempts.length).toBeGreaterThanOrEqual(2);
    expect(attempts.at(-1)).toBeGreaterThan(attempts[0]!); // the delay grows

    const reconnected = nextEvent<{ sessionId: string; reconnect: boolean }>(zk, 'connected');
    await proxy.start(port);
    expect(await reconnected).toEqual({ sessionId, reconnect: true });
    await pendingWrite;
    expect((await observer.getData('/while-down'))?.data.toString()).toBe('queued');
    expect((await observer.exists('/brokers/ids/5'))?.ephemeralOwner).toBe(sessionId);
    // The watch set before the cut still works.
    await observer.createEphemeral('/brokers/ids/6', 'y:h:2');
    await waitFor(() => JSON.stringify(seen.at(-1)) === '["5","6"]', 5000, 'watch after reconnect');
    watch.close();
  });

  it('drops a connection on which the server stopped answering and reconnects', async () => {
    const connectString = freshChroot();
    await (await connectClient(connectString)).close(); // creates the chroot
    const proxy = new CuttableProxy();
    await proxy.start();
    const logger = captureLogger();
    const chroot = connectString.slice(connectString.indexOf('/'));
    const zk = await connectClient(`127.0.0.1:${proxy.port}${chroot}`, { sessionTimeoutMs: 4500, logger });
    await zk.registerEphemeral('/e', 'x');
    const sessionId = zk.sessionId;
    const reconnected = nextEvent<{ sessionId: string; reconnect: boolean }>(zk, 'connected');
    const started = Date.now();
    proxy.freeze();
    expect(await reconnected).toEqual({ sessionId, reconnect: true });
    expect(Date.now() - started).toBeLessThan(4500);
    expect(logger.messages('warn')).toContain('ZooKeeper stopped answering; dropping the connection');
    expect((await zk.exists('/e'))?.ephemeralOwner).toBe(sessionId);
  });

  it('after a forced session expiry: emits expired, re-creates registered ephemerals, re-arms watches, emits session', async () => {
    const connectString = freshChroot();
    const logger = captureLogger();
    const zk = await connectClient(connectString, { logger });
    const observer = await connectClient(connectString);
    await zk.registerEphemeral('/brokers/ids/1', 'c:h:9092');
    await zk.registerEphemeral('/brokers/topics/t/1', '2');
    await zk.createEphemeral('/consumers/g/owners/t/1-0', 'thread-0'); // one-shot: not re-created
    const seen: string[][] = [];
    const watch = zk.watchChildren('/brokers/ids', (c) => void seen.push(c));
    await watch.ready;
    const oldSession = zk.sessionId;

    const expired = nextEvent<{ sessionId: string }>(zk, 'expired');
    const renewed = nextEvent<{ sessionId: string; previousSessionId: string }>(zk, 'session');
    await expireSession(connectString, zk.sessionCredentials());
    expect(await expired).toEqual({ sessionId: oldSession });
    const info = await renewed;
    expect(info.previousSessionId).toBe(oldSession);
    expect(info.sessionId).not.toBe(oldSession);
    expect(zk.sessionId).toBe(info.sessionId);

    expect((await observer.getData('/brokers/ids/1'))?.data.toString()).toBe('c:h:9092');
    expect((await observer.exists('/brokers/ids/1'))?.ephemeralOwner).toBe(info.sessionId);
    expect((await observer.exists('/brokers/topics/t/1'))?.ephemeralOwner).toBe(info.sessionId);
    expect(await observer.exists('/consumers/g/owners/t/1-0')).toBeUndefined();
    expect(logger.messages('warn')).toContain('ZooKeeper session expired; its ephemeral nodes are gone; opening a new session');

    // The watch lives on in the new session.
    const before = seen.length;
    await observer.createEphemeral('/brokers/ids/2', 'c2:h:9093');
    await waitFor(() => seen.length > before && JSON.stringify(seen.at(-1)) === '["1","2"]', 5000, 'watch in new session');
    watch.close();

    // The new session's ephemerals go when the client closes.
    await zk.close();
    expect(await observer.getChildren('/brokers/ids')).toEqual(['2']);
  });

  it('reports a registered ephemeral that another session took while it was partitioned away', async () => {
    const connectString = freshChroot();
    const chroot = connectString.slice(connectString.indexOf('/'));
    const rival = await connectClient(connectString);
    const proxy = new CuttableProxy();
    await proxy.start();
    const zk = await connectClient(`127.0.0.1:${proxy.port}${chroot}`);
    await zk.registerEphemeral('/brokers/ids/1', 'mine');
    await zk.registerEphemeral('/brokers/ids/2', 'also mine');
    const credentials = zk.sessionCredentials();
    const port = proxy.port;
    // Partition the client away, let its session end and let the rival take id 1 meanwhile.
    const disconnected = nextEvent(zk, 'disconnected');
    await proxy.stop();
    await disconnected;
    await expireSession(connectString, credentials);
    await rival.createEphemeral('/brokers/ids/1', 'rival');
    const conflict = nextEvent<{ path: string; owner: string }>(zk, 'ephemeralConflict');
    const renewed = nextEvent(zk, 'session');
    await proxy.start(port);
    expect(await conflict).toEqual({ path: '/brokers/ids/1', owner: rival.sessionId });
    await renewed;
    expect(zk.registeredEphemerals()).toEqual(['/brokers/ids/2']);
    expect((await rival.getData('/brokers/ids/1'))?.data.toString()).toBe('rival');
    expect((await rival.exists('/brokers/ids/2'))?.ephemeralOwner).toBe(zk.sessionId);
  });

  it('putIf writes only while the condition node is at its version, in the session asked for', async () => {
    const connectString = freshChroot();
    const owner = await connectClient(connectString);
    const rival = await connectClient(connectString);
    await owner.createEphemeral('/owners/p', 'owner-0');
    const claim = await owner.exists('/owners/p');
    const fence = { path: '/owners/p', version: claim!.version, sessionId: owner.sessionId };
    await owner.putIf(fence, '/offsets/p', '10'); // created
    await owner.putIf(fence, '/offsets/p', '20'); // replaced
    expect((await rival.getData('/offsets/p'))?.data.toString()).toBe('20');
    // Another session asking with the owner's fence is refused at once.
    await expect(rival.putIf(fence, '/offsets/p', '5')).rejects.toBeInstanceOf(ZkSessionExpiredError);
    // A claim that changed (here: rewritten) no longer lets the write through, version 0 included.
    await owner.setData('/owners/p', 'owner-0');
    await expect(owner.putIf(fence, '/offsets/p', '5')).rejects.toBeInstanceOf(ZkBadVersionError);
    // A claim that is gone, neither.
    await owner.removeOwnEphemeral('/owners/p');
    await expect(owner.putIf({ ...fence, version: 1 }, '/offsets/p', '5')).rejects.toBeInstanceOf(ZkNoNodeError);
    expect((await rival.getData('/offsets/p'))?.data.toString()).toBe('20');
  });

  it('a registration that could not be written while ZooKeeper was away is written once it is back', async () => {
    const connectString = freshChroot();
    await (await connectClient(connectString)).close(); // creates the chroot
    const proxy = new CuttableProxy();
    await proxy.start();
    const chroot = connectString.slice(connectString.indexOf('/'));
    const zk = await connectClient(`127.0.0.1:${proxy.port}${chroot}`, { sessionTimeoutMs: 20_000, operationTimeoutMs: 1000 });
    const observer = await connectClient(connectString);
    const port = proxy.port;
    const disconnected = nextEvent(zk, 'disconnected');
    await proxy.stop();
    await disconnected;
    await expect(zk.registerEphemeral('/brokers/topics/t/0', '2')).rejects.toThrow(/not connected to ZooKeeper|no reply/);
    expect(zk.registeredEphemerals()).toEqual(['/brokers/topics/t/0']);
    await new Promise((r) => setTimeout(r, 1500)); // longer than the operation timeout
    await proxy.start(port);
    await waitFor(async () => (await observer.exists('/brokers/topics/t/0'))?.ephemeralOwner === zk.sessionId, 10_000, 'the registration written');
    expect((await observer.getData('/brokers/topics/t/0'))?.data.toString()).toBe('2');
  });
});
