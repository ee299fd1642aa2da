import * as fs from 'node:fs';
import { once } from 'node:events';
import * as net from 'node:net';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BufferPool, Log, LogManager, sendfileStats, sendfileSupport, sendRegion, type FlushEvent, type ReadPath } from '../src/index.js';
import { messages, segmentFiles, tempDir } from './helpers.js';

const mib = 1024 * 1024;
const addonFile = path.join(import.meta.dirname, '..', 'build', 'Release', 'klog_sendfile.node');
const paths: ReadPath[] = ['sendfile', 'read-write'];

const sockets: net.Socket[] = [];
const servers: net.Server[] = [];
afterEach(() => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const s of servers.splice(0)) s.close();
});

/** A connected pair of TCP sockets on 127.0.0.1: `server` sends, `client` receives. */
async function socketPair(): Promise<{ server: net.Socket; client: net.Socket }> {
  const srv = net.createServer();
  servers.push(srv);
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const accepted = once(srv, 'connection');
  const client = net.connect((srv.address() as net.AddressInfo).port, '127.0.0.1');
  await once(client, 'connect');
  const [server] = (await accepted) as [net.Socket];
  sockets.push(server, client);
  return { server, client };
}

/** Collects what `client` receives until `bytes` have arrived; `slow` pauses the reader now and then. */
function receive(client: net.Socket, bytes: number, slow = false): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let got = 0;
  if (slow) client.pause();
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    if (slow) {
      // Start reading only after a while, then read in short bursts: the sender meets a full socket.
      const tick = (): void => {
        client.resume();
        setTimeout(() => client.pause(), 2);
        timer = setTimeout(tick, 15);
      };
      timer = setTimeout(tick, 300);
    }
    client.on('data', (c: Buffer) => {
      chunks.push(c);
      got += c.length;
      if (got >= bytes) {
        clearTimeout(timer);
        client.resume();
        resolve(Buffer.concat(chunks));
      }
    });
    client.on('error', reject);
  });
}

/** A log with `count` 1 KiB messages over segments of `segmentBytes`, all flushed. */
async function filledLog(count: number, segmentBytes: number): Promise<{ log: Log; bytes: Buffer; dir: string }> {
  const dir = tempDir();
  const log = Log.open({ dir, topic: 't', partition: 0, config: { segmentBytes, flushIntervalMs: 60_000, flushMessages: 1_000_000 } });
  const sets: Buffer[] = [];
  for (let i = 0; i < count; i += 64) {
    const set = messages(`m${i}`, Math.min(64, count - i), 1024);
    log.append(set, Math.min(64, count - i));
    sets.push(set);
  }
  await log.flush();
  return { log, bytes: Buffer.concat(sets), dir };
}

describe('the sendfile addon', () => {
  it('is available exactly when it was built on Linux', () => {
    const built = process.platform === 'linux' && fs.existsSync(addonFile) && process.env.KLOG_DISABLE_SENDFILE !== '1';
    expect(sendfileSupport.available).toBe(built);
    if (!built) expect(sendfileSupport.reason).toMatch(/./);
    // CI builds it and says so: then it must be there.
    if (process.env.KLOG_REQUIRE_NATIVE === '1' && process.env.KLOG_DISABLE_SENDFILE !== '1') expect(sendfileSupport.available).toBe(true);
  });
});

describe('Log.readRange', () => {
  it('gives the bytes Log.read gives, as a pinned region, across segment ends and at the visible end', async () => {
    const { log } = await filledLog(200, 50_000);
    expect(log.segmentCount).toBeGreaterThan(3);
    const starts = log.segmentStarts();
    const offsets = [0, 1034, starts[1]!, starts[1]! - 1034, starts[2]! - 10, log.visibleEnd - 1034];
    for (const offset of offsets) {
      for (const maxBytes of [0, 5, 1034, 20_000, 10 * mib]) {
        const region = log.readRange(offset, maxBytes);
        const copy = log.read(offset, maxBytes);
        expect(region.length).toBe(copy.length);
        expect(region.offset).toBe(offset);
        expect(region.read(0, region.length).equals(copy)).toBe(true);
        expect(region.read(3, 7).equals(copy.subarray(3, 10))).toBe(true);
        region.release();
        region.release(); // idempotent
      }
    }
    const atEnd = log.readRange(log.visibleEnd, 100);
    expect(atEnd.length).toBe(0);
    expect(atEnd.fd).toBe(-1);
    expect(() => log.readRange(log.visibleEnd + 1, 100)).toThrow(/outside/);
    expect(() => log.readRange(0, -1)).toThrow(RangeError);
    await log.close();
    expect(() => log.readRange(0, 100)).toThrow(/closed/);
  });

  it('keeps a region readable while retention deletes its segment, and closes the file on release', async () => {
    const { log, dir, bytes } = await filledLog(200, 50_000);
    const before = segmentFiles(dir);
    const region = log.readRange(10 * 1034, 30_000);
    const fd = region.fd;
    // Everything aged: retention deletes all but a fresh empty segment, and does not wait for the region.
    const deleted = await log.deleteOldSegments(Date.now() + 365 * 24 * 3600 * 1000);
    expect(deleted).toBe(before.length);
    expect(segmentFiles(dir)).not.toContain(before[0]);
    expect(region.read(0, region.length).equals(bytes.subarray(10 * 1034, 10 * 1034 + region.length))).toBe(true);
    expect(fs.fstatSync(fd).nlink).toBe(0); // unlinked, still open
    const closing = log.close();
    let closed = false;
    void closing.then(() => (closed = true));
    await new Promise((r) => setTimeout(r, 50));
    region.release();
    await closing;
    expect(closed).toBe(true);
  });

  it('makes Log.close wait for a pinned region', async () => {
    const { log } = await filledLog(10, 1_000_000);
    const region = log.readRange(0, 5000);
    let closed = false;
    const closing = log.close().then(() => (closed = true));
    await new Promise((r) => setTimeout(r, 50));
    expect(closed).toBe(false);
    expect(region.read(0, 10).length).toBe(10);
    region.release();
    await closing;
    expect(closed).toBe(true);
  });
});

describe('sendRegion', () => {
  for (const readPath of paths) {
    it(`sends exactly the region's bytes (${readPath}), region after region, ending a segment and cutting a message`, async () => {
      const { log, bytes } = await filledLog(300, 100_000);
      const { server, client } = await socketPair();
      const starts = log.segmentStarts();
      const asks: [number, number][] = [
        [0, 1034],
        [0, 777], // a partial trailing message
        [starts[1]! - 2 * 1034, 100_000], // to the end of a segment, no further
        [starts[2]!, 5],
        [1034 * 7, 3 * mib],
      ];
      const regions = asks.map(([o, m]) => log.readRange(o, m));
      const total = regions.reduce((n, r) => n + r.length, 0);
      const got = receive(client, total);
      for (const r of regions) {
        await waitWritten(server);
        await sendRegion(server, r, { path: readPath });
        r.release();
      }
      const received = await got;
      expect(received.length).toBe(total);
      let at = 0;
      for (const r of regions) {
        expect(received.subarray(at, at + r.length).equals(bytes.subarray(r.offset, r.offset + r.length))).toBe(true);
        at += r.length;
      }
      expect(regions[2]!.offset + regions[2]!.length).toBe(starts[1]);
      await log.close();
    });

    it(`sends 8 MiB to a slow reader while retention deletes the segment (${readPath})`, async () => {
      const { log, bytes } = await filledLog(8 * 1024 + 64, 64 * mib);
      const { server, client } = await socketPair();
      const region = log.readRange(0, 8 * mib);
      expect(region.length).toBe(8 * mib);
      const eagainBefore = sendfileStats().eagain;
      const got = receive(client, region.length, true);
      const sending = sendRegion(server, region, { path: readPath });
      await new Promise((r) => setTimeout(r, 100));
      await log.deleteOldSegments(Date.now() + 365 * 24 * 3600 * 1000);
      await sending;
      region.release();
      const received = await got;
      expect(received.equals(bytes.subarray(0, 8 * mib))).toBe(true);
      if (readPath === 'sendfile' && sendfileSupport.available) expect(sendfileStats().eagain).toBeGreaterThan(eagainBefore);
      await log.close();
    });

    it(`fails, without hanging, when the reader goes away mid-send (${readPath})`, async () => {
      const { log } = await filledLog(8 * 1024, 64 * mib);
      const { server, client } = await socketPair();
      client.pause();
      const region = log.readRange(0, 8 * mib);
      const sending = sendRegion(server, region, { path: readPath });
      setTimeout(() => {
        client.destroy();
        server.destroy();
      }, 100);
      await expect(sending).rejects.toMatchObject({ code: expect.stringMatching(/ERR_SOCKET_CLOSED|EPIPE|ECONNRESET/) as unknown });
      region.release();
      await log.close();
    });
  }

  it('holds no thread of libuv\'s pool while sends wait for their readers (sendfile)', async () => {
    const { log, bytes } = await filledLog(8 * 1024, 64 * mib);
    const pairs = await Promise.all(Array.from({ length: 8 }, () => socketPair()));
    for (const { client } of pairs) client.pause();
    const eagainBefore = sendfileStats().eagain;
    const regions = pairs.map(() => log.readRange(0, 8 * mib));
    const sending = pairs.map(({ server }, i) => sendRegion(server, regions[i]!, { path: 'sendfile' }));
    await new Promise((r) => setTimeout(r, 300)); // every socket is full: 8 sends wait, twice the pool's 4 threads
    if (sendfileSupport.available) expect(sendfileStats().eagain).toBeGreaterThanOrEqual(eagainBefore + 8);
    // Each of these runs on the pool; a send that waited there for its reader kept them queued (100 ms at a time).
    const ms: number[] = [];
    for (let i = 0; i < 10; i++) {
      const t0 = performance.now();
      await fs.promises.stat(addonFile).catch(() => undefined);
      ms.push(performance.now() - t0);
    }
    ms.sort((a, b) => a - b);
    expect(ms[5]).toBeLessThan(20);
    const received = pairs.map(({ client }) => receive(client, 8 * mib));
    for (const { client } of pairs) client.resume();
    await Promise.all(sending);
    for (const got of received) expect((await got).equals(bytes.subarray(0, 8 * mib))).toBe(true);
    for (const r of regions) r.release();
    await log.close();
  });

  for (const readPath of paths) {
    it(`fails with ERR_KLOG_SHORT_FILE when the segment file is cut under the region (${readPath})`, async () => {
      const { log, dir } = await filledLog(8 * 1024, 64 * mib);
      const { server, client } = await socketPair();
      client.pause();
      const region = log.readRange(0, 8 * mib);
      fs.truncateSync(path.join(dir, segmentFiles(dir)[0]!), 3 * mib);
      const sending = sendRegion(server, region, { path: readPath });
      const received = receive(client, 3 * mib);
      setTimeout(() => client.resume(), 200); // the socket fills first: the end is met after a wait
      await expect(sending).rejects.toMatchObject({ code: 'ERR_KLOG_SHORT_FILE' });
      expect((await received).length).toBe(3 * mib);
      region.release();
      await log.close();
    });
  }

  it('refuses to interleave with pending writes', async () => {
    const { log } = await filledLog(10, 1_000_000);
    const { server, client } = await socketPair();
    client.pause();
    server.write(Buffer.alloc(8 * mib));
    const region = log.readRange(0, 100);
    await expect(sendRegion(server, region, { path: 'sendfile' })).rejects.toMatchObject({ code: 'ERR_KLOG_PENDING_WRITES' });
    region.release();
    await log.close();
  });

  it('reuses pooled buffers on the read-write path', async () => {
    const { log } = await filledLog(2048, 64 * mib);
    const { server, client } = await socketPair();
    const pool = new BufferPool(64 * 1024, 4);
    const acquired = new Set<Buffer>();
    const acquire = pool.acquire.bind(pool);
    pool.acquire = () => {
      const b = acquire();
      acquired.add(b);
      return b;
    };
    for (let i = 0; i < 3; i++) {
      const region = log.readRange(0, 2 * mib);
      const got = receive(client, region.length);
      await waitWritten(server);
      await sendRegion(server, region, { path: 'read-write', pool });
      region.release();
      await got;
      client.removeAllListeners('data');
    }
    await waitWritten(server);
    // 3 × 2 MiB in 64 KiB chunks is 96 reads; the pool kept the number of distinct buffers small.
    expect(acquired.size).toBeLessThan(96);
    expect(pool.idle).toBeGreaterThan(0);
    expect(pool.idle).toBeLessThanOrEqual(4);
    await log.close();
  });
});

describe('flush events', () => {
  it('reports every flush with its duration to Log and LogManager listeners, and skips clean logs', async () => {
    const dir = tempDir();
    const log = Log.open({ dir, topic: 't', partition: 3, config: { flushIntervalMs: 60_000 } });
    const events: FlushEvent[] = [];
    const off = log.onFlushDone((e) => events.push(e));
    log.append(messages('a', 2), 2);
    await log.flush();
    await log.flush();
    expect(events).toHaveLength(1); // the second found nothing to sync: no fdatasync, no event
    expect(events[0]).toMatchObject({ topic: 't', partition: 3, segmentsSynced: 1, visibleEnd: 26 });
    expect(events[0]!.durationMs).toBeGreaterThanOrEqual(0);
    off();
    log.append(messages('a', 1), 1);
    await log.flush();
    expect(events).toHaveLength(1);
    await log.close();

    const manager = await LogManager.open({ logDir: tempDir(), flushIntervalMs: 60_000 });
    const seen: FlushEvent[] = [];
    manager.onFlushDone((e) => seen.push(e));
    (await manager.getOrCreateLog('later', 0)).append(messages('b', 1), 1);
    await manager.flushAll();
    expect(seen).toEqual([expect.objectContaining({ topic: 'later', partition: 0, segmentsSynced: 1, visibleEnd: 13 })]);
    await manager.close();
  });
});

/** Waits until everything written to `socket` has left Node's buffers. */
async function waitWritten(socket: net.Socket): Promise<void> {
  while (socket.writableLength > 0) await new Promise((r) => setTimeout(r, 1));
}

