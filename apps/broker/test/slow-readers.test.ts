/**
 * Slow readers do not starve the flushes (docs/architecture.md, "Flush", "Fetching"): fetches
 * sent with sendfile(2) to consumers that read slowly never wait for their socket on libuv's
 * thread pool, fdatasync runs on the flusher's own threads, and small answers are copied rather
 * than sent through the pool, so with 8 slow readers a produce with acks 2 (also the first one,
 * which creates its topic with file operations on the pool), a long poll at the log end and any
 * other pool operation are answered as fast as without them, and the readers still get every byte.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import * as fs from 'node:fs';
import { connect, type Socket } from 'node:net';
import { pino } from 'pino';
import { AckLevel, Decoder, ErrorCode, decodeProduceAckResponse, encodeFetchRequest, encodeMessageSet, encodeProduceAckRequest } from '@klog/protocol';
import { flusherKind, sendfileStats, sendfileSupport } from '@klog/storage';
import { startBroker, type Broker } from '../src/index.js';
import { WireClient, removeDir, tempDir } from './helpers.js';

const silent = pino({ level: 'silent' });
const mib = 1024 * 1024;
let broker: Broker | undefined;
const sockets: Socket[] = [];
const clients: WireClient[] = [];
const timers: NodeJS.Timeout[] = [];
let dir: string | undefined;
afterEach(async () => {
  for (const t of timers.splice(0)) clearInterval(t);
  for (const s of sockets.splice(0)) s.destroy();
  for (const c of clients.splice(0)) c.close();
  await broker?.close();
  broker = undefined;
  if (dir) removeDir(dir);
});

/** A consumer reading one FETCH answer: what it got so far, and a switch that lifts its rate limit. */
interface SlowReader {
  /** The whole response frame once it has arrived (size, error code, message set). */
  readonly done: Promise<Buffer>;
  /** Reads at full speed from now on. */
  unthrottle(): void;
}

/** A consumer that asks for 100 MiB at once and reads about `bytesPerSec` of it. */
async function slowReader(port: number, topic: string, bytesPerSec: number): Promise<SlowReader> {
  const s = connect(port, '127.0.0.1');
  sockets.push(s);
  await once(s, 'connect');
  s.on('error', () => {});
  const chunks: Buffer[] = [];
  let got = 0;
  let frameBytes = Infinity;
  let budget = 0;
  let throttled = true;
  const done = new Promise<Buffer>((resolve, reject) => {
    s.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      got += chunk.length;
      if (frameBytes === Infinity && got >= 4) frameBytes = 4 + Buffer.concat(chunks).readInt32BE(0);
      if (got >= frameBytes) resolve(Buffer.concat(chunks));
      budget -= chunk.length;
      if (throttled && budget <= 0) s.pause();
    });
    s.on('close', () => reject(new Error(`connection closed after ${got} bytes`)));
  });
  done.catch(() => {}); // awaited by the test that reads to the end; the others close it early
  const timer = setInterval(() => {
    budget = Math.min(budget + bytesPerSec / 20, bytesPerSec / 20);
    if (budget > 0) s.resume();
  }, 50);
  timers.push(timer);
  s.write(encodeFetchRequest({ topic, partition: 0, offset: 0, maxBytes: 100 * mib }));
  return {
    done,
    unthrottle: () => {
      throttled = false;
      clearInterval(timer);
      s.resume();
    },
  };
}

/** Median ms of `n` calls of `f`, one after another. */
async function medianMs(n: number, f: () => Promise<unknown>): Promise<number> {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await f();
    ms.push(performance.now() - t0);
  }
  ms.sort((a, b) => a - b);
  return ms[Math.floor(n / 2)]!;
}

/** Ms until one produce with acks 2 to `topic` is answered (the first creates the topic). */
async function ackedMs(c: WireClient, topic: string): Promise<number> {
  const messages = encodeMessageSet([Buffer.alloc(200, 3)]);
  const t0 = performance.now();
  const r = await c.request(encodeProduceAckRequest({ acks: AckLevel.Flushed, partitions: [{ topic, partition: 0, messages }] }));
  expect(decodeProduceAckResponse(new Decoder(r.body))[0]!.errorCode).toBe(ErrorCode.None);
  return performance.now() - t0;
}

/**
 * Fills topic `data` with 48 MiB of random 64 KiB messages, all flushed: far more than socket
 * buffers hold, so every send to a slow reader waits on it. @returns the log's bytes (message sets)
 */
async function fill(c: WireClient): Promise<Buffer> {
  const sets: Buffer[] = [];
  for (let i = 0; i < 48; i++) {
    const set = encodeMessageSet(Array.from({ length: 16 }, () => randomBytes(64 * 1024)));
    sets.push(set);
    const r = await c.request(encodeProduceAckRequest({ acks: AckLevel.Appended, partitions: [{ topic: 'data', partition: 0, messages: set }] }));
    expect(decodeProduceAckResponse(new Decoder(r.body))[0]!.errorCode).toBe(ErrorCode.None);
  }
  await broker!.logs.getLog('data', 0)!.flushedThrough(broker!.logs.getLog('data', 0)!.logEndOffset);
  return Buffer.concat(sets);
}

/** Median ms of `n` one-message produces with acks 2, one after another. */
async function ackedMedianMs(c: WireClient, topic: string, n: number): Promise<number> {
  const set = encodeMessageSet([Buffer.alloc(200, 1)]);
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const r = await c.request(encodeProduceAckRequest({ acks: AckLevel.Flushed, partitions: [{ topic, partition: 0, messages: set }] }));
    ms.push(performance.now() - t0);
    expect(decodeProduceAckResponse(new Decoder(r.body))[0]!.errorCode).toBe(ErrorCode.None);
  }
  ms.sort((a, b) => a - b);
  return ms[Math.floor(n / 2)]!;
}

describe.skipIf(!sendfileSupport.available || flusherKind !== 'native')('slow sendfile readers', () => {
  it('do not hold up fdatasync: acks-2 produces are answered as fast with 8 slow readers as without', async () => {
    dir = tempDir();
    broker = await startBroker({ logDir: dir, port: 0 }, silent);
    const c = await WireClient.connect(broker.port);
    clients.push(c);
    await fill(c);
    const alone = await ackedMedianMs(c, 'acked', 30);
    for (let i = 0; i < 8; i++) await slowReader(broker.port, 'data', 512 * 1024);
    await new Promise((r) => setTimeout(r, 1000)); // the socket buffers fill; every send now waits on its reader
    const withReaders = await ackedMedianMs(c, 'acked', 30);
    // With fdatasync on libuv's pool, each waited behind the readers' sends for a pool thread.
    expect(withReaders).toBeLessThan(Math.max(40, alone * 4));

    // A consumer at the log end is answered as fast: a small answer never waits for the pool either.
    const consumer = await WireClient.connect(broker.port);
    clients.push(consumer);
    const ms: number[] = [];
    let offset = broker.logs.getLog('acked', 0)!.visibleEnd;
    for (let i = 0; i < 20; i++) {
      const poll = consumer.request(encodeFetchRequest({ topic: 'acked', partition: 0, offset, maxBytes: 1 << 20, maxWaitMs: 5000 }));
      const t0 = performance.now();
      const sent = await c.request(encodeProduceAckRequest({ acks: AckLevel.Appended, partitions: [{ topic: 'acked', partition: 0, messages: encodeMessageSet([Buffer.alloc(200, 2)]) }] }));
      const r = await poll;
      ms.push(performance.now() - t0);
      expect(r.body.length).toBeGreaterThan(0);
      offset = decodeProduceAckResponse(new Decoder(sent.body))[0]!.nextOffset;
    }
    ms.sort((a, b) => a - b);
    expect(ms[10]).toBeLessThan(Math.max(40, alone * 4));
  }, 60_000);

  it('do not hold libuv\'s thread pool: pool operations and topic creation are as fast, and every byte arrives', async () => {
    dir = tempDir();
    broker = await startBroker({ logDir: dir, port: 0 }, silent);
    const c = await WireClient.connect(broker.port);
    clients.push(c);
    const bytes = await fill(c);
    const stat = (): Promise<fs.Stats> => fs.promises.stat(dir!);
    const statAlone = await medianMs(20, stat);
    const createAlone = await ackedMs(c, 'fresh-alone');
    const eagainBefore = sendfileStats().eagain;
    const readers: SlowReader[] = [];
    for (let i = 0; i < 8; i++) readers.push(await slowReader(broker.port, 'data', 512 * 1024));
    await new Promise((r) => setTimeout(r, 1000)); // the socket buffers fill; every send now waits on its reader
    expect(sendfileStats().eagain).toBeGreaterThanOrEqual(eagainBefore + 8);
    // Before, each send waited for its socket in poll() on a pool thread (100 ms at a time), so
    // the 4 threads were always taken and every fs operation queued behind the waits.
    const statWith = await medianMs(20, stat);
    expect(statWith).toBeLessThan(Math.max(20, statAlone * 4));
    // The first produce to a topic creates it: a directory, a segment file, fsyncs, all on the pool.
    const createWith = await ackedMs(c, 'fresh-with');
    expect(createWith).toBeLessThan(Math.max(100, createAlone * 4));
    for (const r of readers) r.unthrottle();
    for (const r of readers) {
      const frame = await r.done;
      expect(frame.readInt16BE(4)).toBe(ErrorCode.None);
      expect(frame.length - 6).toBe(bytes.length);
      expect(frame.subarray(6).equals(bytes)).toBe(true);
    }
  }, 60_000);
});
