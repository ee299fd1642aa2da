/**
 * Slow readers do not starve the flushes (docs/architecture.md, "Flush"): fetches sent with
 * sendfile(2) to consumers that read slowly hold libuv's thread pool, but fdatasync runs on the
 * flusher's own threads, and small answers are copied rather than sent through the pool, so a
 * produce with acks 2, and a long poll at the log end, are answered as fast with 8 slow readers
 * as without them.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { pino } from 'pino';
import { AckLevel, Decoder, ErrorCode, decodeProduceAckResponse, encodeFetchRequest, encodeMessageSet, encodeProduceAckRequest } from '@klog/protocol';
import { flusherKind, sendfileSupport } from '@klog/storage';
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

/** A consumer that asks for 100 MiB at once and reads about `bytesPerSec` of it. */
async function slowReader(port: number, topic: string, bytesPerSec: number): Promise<void> {
  const s = connect(port, '127.0.0.1');
  sockets.push(s);
  await once(s, 'connect');
  s.on('error', () => {});
  let budget = 0;
  s.on('data', (chunk: Buffer) => {
    budget -= chunk.length;
    if (budget <= 0) s.pause();
  });
  timers.push(
    setInterval(() => {
      budget = Math.min(budget + bytesPerSec / 20, bytesPerSec / 20);
      if (budget > 0) s.resume();
    }, 50),
  );
  s.write(encodeFetchRequest({ topic, partition: 0, offset: 0, maxBytes: 100 * mib }));
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
    // 48 MiB for the readers: far more than socket buffers hold, so every send waits on its reader.
    const chunk = encodeMessageSet(Array.from({ length: 16 }, () => Buffer.alloc(64 * 1024, 7)));
    for (let i = 0; i < 48; i++) {
      const r = await c.request(encodeProduceAckRequest({ acks: AckLevel.Appended, partitions: [{ topic: 'data', partition: 0, messages: chunk }] }));
      expect(decodeProduceAckResponse(new Decoder(r.body))[0]!.errorCode).toBe(ErrorCode.None);
    }
    await broker.logs.getLog('data', 0)!.flushedThrough(broker.logs.getLog('data', 0)!.logEndOffset);
    const alone = await ackedMedianMs(c, 'acked', 30);
    for (let i = 0; i < 8; i++) await slowReader(broker.port, 'data', 512 * 1024);
    await new Promise((r) => setTimeout(r, 1000)); // the socket buffers fill; every send now waits in the pool
    const withReaders = await ackedMedianMs(c, 'acked', 30);
    // Before, each fdatasync waited behind the readers' sends (up to 100 ms each) for a pool thread.
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
});
