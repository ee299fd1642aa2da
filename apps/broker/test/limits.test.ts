/**
 * The broker's limits, met as a hostile or careless client would meet them (docs/format.md §5,
 * §12, broker settings): brokers are child processes, clients real sockets, logs real files.
 * - METADATA naming 10,000 unknown topics creates none; a log dir of many partitions starts
 *   under a small descriptor limit; creation is bounded (`max.partitions`,
 *   `auto.create.topics.enable`).
 * - 10 connections holding 60 MiB half-sent frames: the request budget keeps the broker's RSS
 *   low, the idle timeout closes them, and the memory goes back; `max.connections` refuses with
 *   a log line.
 * - MULTIFETCH asking for more than one response can carry: InvalidFetchSize, nothing pinned,
 *   and a clean SIGTERM afterwards.
 * - Creating a topic of 1,000 partitions does not hold up an OFFSETS request.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { rssFallsBelow, rssMiB, rssWhile, sendAllButLastByte } from '../src/testing.js';
import { join } from 'node:path';
import {
  AckLevel,
  Decoder,
  ErrorCode,
  OffsetTime,
  decodeMetadataResponse,
  decodeOffsetsResponse,
  decodeProduceAckResponse,
  encodeMessageSet,
  encodeMetadataRequest,
  encodeMultiFetchRequest,
  encodeOffsetsRequest,
  encodeProduceAckRequest,
  encodeProduceRequest,
} from '@klog/protocol';
import { WireClient, removeDir, spawnBroker, tempDir, type BrokerProcess } from './helpers.js';

let dir: string;
const running: BrokerProcess[] = [];
const sockets: Socket[] = [];

beforeEach(() => {
  dir = tempDir('klog-limits-test-');
});
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const b of running.splice(0)) {
    if (b.proc.exitCode === null && b.proc.signalCode === null) {
      b.proc.kill('SIGKILL');
      await b.exited;
    }
  }
  removeDir(dir);
});

async function boot(args: string[], wrap: string[] = []): Promise<BrokerProcess> {
  const b = await spawnBroker(['--log-dir', dir, ...args], wrap);
  running.push(b);
  return b;
}

async function stop(b: BrokerProcess): Promise<number | null> {
  b.proc.kill('SIGTERM');
  return b.exited;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function produceAck(c: WireClient, topic: string, partition: number, payloads: string[]): Promise<{ errorCode: number; offset: number }> {
  const messages = encodeMessageSet(payloads.map((p) => Buffer.from(p)));
  const r = await c.request(encodeProduceAckRequest({ acks: AckLevel.Appended, partitions: [{ topic, partition, messages }] }));
  expect(r.code).toBe(ErrorCode.None);
  return decodeProduceAckResponse(new Decoder(r.body))[0]!;
}

const noFiles = ['prlimit', '--nofile=512', '--'];

describe('topic creation limits', () => {
  it('does not create the 10,000 unknown topics a METADATA request names, and restarts', async () => {
    const b = await boot([], noFiles);
    const c = await WireClient.connect(b.port);
    const topics = Array.from({ length: 10_000 }, (_, i) => `unknown-${i}`);
    const r = await c.request(encodeMetadataRequest(topics));
    expect(r.code).toBe(ErrorCode.None);
    const entries = decodeMetadataResponse(new Decoder(r.body));
    expect(entries).toHaveLength(10_000);
    // Answered with the count a produce would create them with; nothing created.
    expect(entries.every((e) => e.errorCode === ErrorCode.None && e.partitions === 1)).toBe(true);
    expect(readdirSync(dir).filter((n) => n.startsWith('unknown-'))).toEqual([]);
    // A produce does create its topic.
    expect((await produceAck(c, 'unknown-7', 0, ['made'])).errorCode).toBe(ErrorCode.None);
    expect(readdirSync(dir).filter((n) => n.startsWith('unknown-'))).toEqual(['unknown-7-0']);
    c.close();
    expect(await stop(b)).toBe(0);
    const again = await boot([], noFiles);
    expect(again.logs.find((l) => l.msg === 'logs loaded')).toMatchObject({ topics: 1 });
  });

  it('starts on a log dir of 1,500 partitions with 512 descriptors: idle segments hold none', async () => {
    for (let p = 0; p < 1500; p++) {
      mkdirSync(join(dir, `many-${p}`));
      writeFileSync(join(dir, `many-${p}`, '00000000000000000000.kafka'), '');
    }
    const b = await boot(['--max-partitions', '2000'], noFiles);
    expect(b.logs.find((l) => l.msg === 'logs loaded')).toMatchObject({ logs: 1500, topics: 1 });
    const c = await WireClient.connect(b.port);
    for (const p of [0, 700, 1499]) expect((await produceAck(c, 'many', p, [`to ${p}`])).errorCode).toBe(ErrorCode.None);
    c.close();
    expect(await stop(b)).toBe(0);
  });

  it('creates topics on produce only while auto.create.topics.enable and max.partitions allow', async () => {
    const off = await boot(['--auto-create-topics-enable', 'false']);
    let c = await WireClient.connect(off.port);
    const meta = decodeMetadataResponse(new Decoder((await c.request(encodeMetadataRequest(['absent']))).body));
    expect(meta).toEqual([{ topic: 'absent', errorCode: ErrorCode.UnknownTopic, partitions: 0 }]);
    expect(await produceAck(c, 'absent', 0, ['x'])).toMatchObject({ errorCode: ErrorCode.UnknownTopic, offset: -1 });
    expect(readdirSync(dir).filter((n) => n.startsWith('absent'))).toEqual([]);
    c.close();
    expect(await stop(off)).toBe(0);

    const bounded = await boot(['--num-partitions', '2', '--max-partitions', '5']);
    c = await WireClient.connect(bounded.port);
    expect((await produceAck(c, 'first', 0, ['a'])).errorCode).toBe(ErrorCode.None);
    expect((await produceAck(c, 'second', 0, ['b'])).errorCode).toBe(ErrorCode.None);
    expect((await produceAck(c, 'third', 0, ['c'])).errorCode).toBe(ErrorCode.TooManyPartitions);
    expect((await produceAck(c, 'first', 1, ['d'])).errorCode).toBe(ErrorCode.None);
    expect(readdirSync(dir).filter((n) => !n.startsWith('.')).sort()).toEqual(['first-0', 'first-1', 'second-0', 'second-1']);
    c.close();
  });
});

describe('connection limits', () => {
  it('holds 10 connections of 60 MiB half-sent frames under 300 MiB RSS, closes them when idle, and gives the memory back', async () => {
    const b = await boot(['--connections-max-idle-ms', '4000']);
    const pid = b.proc.pid!;
    const baseline = rssMiB(pid);
    const frameBytes = 60 * 1024 * 1024;
    const closed: Promise<unknown>[] = [];
    const writers = Array.from({ length: 10 }, async () => {
      const s = connect(b.port, '127.0.0.1');
      sockets.push(s);
      s.on('error', () => {});
      closed.push(new Promise((resolve) => s.once('close', resolve)));
      await once(s, 'connect');
      const head = Buffer.alloc(6);
      head.writeInt32BE(frameBytes, 0);
      head.writeInt16BE(5, 4); // PRODUCE_ACK, never finished
      await sendAllButLastByte(s, head, frameBytes);
    });
    // The frames are held for 2.5 s, then the idle timeout closes every one of them.
    const { held, peak } = await rssWhile(pid, 2500, async () => {
      await Promise.all(closed);
      await Promise.all(writers);
    });
    expect(held).toBeLessThan(300);
    const idleClosed = (): number => b.logs.filter((l) => l.msg === 'closing idle connection').length;
    for (let i = 0; i < 100 && idleClosed() < 10; i++) await sleep(20);
    expect(idleClosed()).toBe(10);
    expect(peak).toBeLessThan(300);
    // The memory goes back.
    const after = await rssFallsBelow(pid, baseline + 40, 25_000);
    expect(after).toBeLessThan(baseline + 40);
    // And the broker still serves.
    const c = await WireClient.connect(b.port);
    expect((await produceAck(c, 'after', 0, ['still here'])).errorCode).toBe(ErrorCode.None);
    c.close();
  }, 90_000);

  it('refuses connections past max.connections with a log line', async () => {
    const b = await boot(['--max-connections', '3']);
    const clients = await Promise.all([1, 2, 3].map(() => WireClient.connect(b.port)));
    const extra = connect(b.port, '127.0.0.1');
    sockets.push(extra);
    extra.on('error', () => {});
    await once(extra, 'close');
    for (let i = 0; i < 50 && !b.logs.some((l) => l.msg === 'connection refused: max.connections reached'); i++) await sleep(20);
    expect(b.logs.find((l) => l.msg === 'connection refused: max.connections reached')).toMatchObject({ maxConnections: 3, refused: 1 });
    expect((await produceAck(clients[0]!, 'ok', 0, ['served'])).errorCode).toBe(ErrorCode.None);
    for (const c of clients) c.close();
  });
});

describe('MULTIFETCH over 2 GiB', () => {
  it('answers InvalidFetchSize before pinning anything, and SIGTERM still stops cleanly', async () => {
    const b = await boot([]);
    const c = await WireClient.connect(b.port);
    await c.request(encodeProduceAckRequest({ acks: AckLevel.Flushed, partitions: [{ topic: 'big', partition: 0, messages: encodeMessageSet([Buffer.from('one')]) }] }));
    const fetches = Array.from({ length: 22 }, () => ({ topic: 'big', partition: 0, offset: 0, maxBytes: 100 * 1024 * 1024 }));
    const r = await c.request(encodeMultiFetchRequest(fetches));
    expect(r.code).toBe(ErrorCode.InvalidFetchSize);
    expect(r.body.length).toBe(0);
    // A multifetch that fits is served on the same connection.
    const ok = await c.request(encodeMultiFetchRequest(fetches.slice(0, 2)));
    expect(ok.code).toBe(ErrorCode.None);
    c.close();
    expect(await stop(b)).toBe(0);
    expect(b.logs.some((l) => l.msg === 'broker stopped')).toBe(true);
    expect(existsSync(join(dir, '.klog_cleanshutdown'))).toBe(true);
    expect(existsSync(join(dir, '.lock'))).toBe(false);
  });
});

describe('topic creation off the request path', () => {
  it('appends every fire-and-forget set sent to a new topic, even when the producer closes at once', async () => {
    const b = await boot(['--num-partitions', '200', '--flush-ms', '10']);
    const s = connect(b.port, '127.0.0.1');
    sockets.push(s);
    await once(s, 'connect');
    const set = encodeMessageSet([Buffer.from('fire and forget')]);
    for (let i = 0; i < 500; i++) s.write(encodeProduceRequest({ topic: 'at-once', partition: i % 200, messages: set }));
    s.end();
    await once(s, 'close');
    const c = await WireClient.connect(b.port);
    const ends = async (): Promise<number> => {
      let total = 0;
      for (let p = 0; p < 200; p++) {
        const r = await c.request(encodeOffsetsRequest({ topic: 'at-once', partition: p, time: OffsetTime.Latest, maxOffsets: 1 }));
        total += decodeOffsetsResponse(new Decoder(r.body))[0] ?? 0;
      }
      return total;
    };
    let total = await ends();
    for (let i = 0; i < 50 && total < 500 * set.length; i++) {
      await sleep(50);
      total = await ends();
    }
    expect(total).toBe(500 * set.length);
    c.close();
  });

  it('answers OFFSETS within 50 ms while a topic of 1,000 partitions is created', async () => {
    const b = await boot(['--num-partitions', '1000', '--max-partitions', '3000']);
    const creator = await WireClient.connect(b.port);
    const asker = await WireClient.connect(b.port);
    expect((await produceAck(creator, 'steady', 0, ['here'])).errorCode).toBe(ErrorCode.None);
    let creating = true;
    const created = produceAck(creator, 'wide', 999, ['new']).finally(() => (creating = false));
    const latencies: number[] = [];
    while (creating) {
      const t = performance.now();
      const r = await asker.request(encodeOffsetsRequest({ topic: 'steady', partition: 0, time: OffsetTime.Latest, maxOffsets: 1 }));
      latencies.push(performance.now() - t);
      expect(r.code).toBe(ErrorCode.None);
      await sleep(5);
    }
    expect((await created).errorCode).toBe(ErrorCode.None);
    expect(readdirSync(dir).filter((n) => n.startsWith('wide-'))).toHaveLength(1000);
    expect(Math.max(...latencies)).toBeLessThan(50);
    expect(latencies.length).toBeGreaterThan(2); // the creation took long enough for OFFSETS to be asked meanwhile
    creator.close();
    asker.close();
  }, 60_000);
});
