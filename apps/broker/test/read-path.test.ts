/**
 * The read path (SPEC §3): fetches answered with sendfile(2) and with the read-and-write
 * fallback send the same bytes, byte for byte, whatever the fetch; the path in use is logged at
 * start-up and can be forced; metrics are served over HTTP.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { once } from 'node:events';
import { connect } from 'node:net';
import { pino } from 'pino';
import {
  AckLevel,
  Decoder,
  ErrorCode,
  crcSupport,
  decodeProduceAckResponse,
  encodeFetchRequest,
  encodeMessageSet,
  encodeMultiFetchRequest,
  encodeOffsetsRequest,
  encodeProduceAckRequest,
  encodeProduceRequest,
  iterateMessageSet,
  type FetchRequest,
} from '@klog/protocol';
import { sendfileStats, sendfileSupport, type ReadPath } from '@klog/storage';
import { startBroker, type Broker, type BrokerConfig } from '../src/index.js';
import { WireClient, removeDir, spawnBroker, tempDir, type BrokerProcess } from './helpers.js';

const silent = pino({ level: 'silent' });
const mib = 1024 * 1024;

const brokers: Broker[] = [];
const clients: WireClient[] = [];
const dirs: string[] = [];
let spawned: BrokerProcess | undefined;
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const b of brokers.splice(0)) await b.close();
  if (spawned && spawned.proc.exitCode === null) {
    spawned.proc.kill('SIGTERM');
    await spawned.exited;
  }
  spawned = undefined;
  for (const d of dirs.splice(0)) removeDir(d);
});

async function start(readPath: ReadPath, settings: Partial<BrokerConfig> = {}): Promise<Broker> {
  const logDir = tempDir();
  dirs.push(logDir);
  // Without the addon (KLOG_DISABLE_SENDFILE=1, or not built) `sendfile` cannot be asked for; `auto` falls back.
  const asked = readPath === 'sendfile' && !sendfileSupport.available ? 'auto' : readPath;
  const b = await startBroker({ logDir, port: 0, flushMessages: 1, readPath: asked, ...settings }, silent);
  brokers.push(b);
  expect(b.readPath).toBe(readPath === 'sendfile' && !sendfileSupport.available ? 'read-write' : readPath);
  return b;
}

async function client(b: Broker): Promise<WireClient> {
  const c = await WireClient.connect(b.port);
  clients.push(c);
  return c;
}

/** Payloads of varied sizes (so messages straddle segment ends at varied places), numbered. */
function payloads(n: number, seed: number): Buffer[] {
  return Array.from({ length: n }, (_, i) => {
    const b = Buffer.alloc(50 + ((i * 7919 + seed) % 900), (i + seed) % 251);
    b.writeUInt32BE(i, 0);
    return b;
  });
}

/** Produces the same batches to every broker and returns the log bytes they all hold. */
async function produceSame(bs: Broker[], topic: string, batches: Buffer[][]): Promise<Buffer> {
  const sets = batches.map((b) => encodeMessageSet(b));
  for (const b of bs) {
    const c = await client(b);
    for (const set of sets) {
      const r = await c.request(encodeProduceAckRequest({ acks: AckLevel.Flushed, partitions: [{ topic, partition: 0, messages: set }] }));
      expect(decodeProduceAckResponse(new Decoder(r.body))[0]!.errorCode).toBe(ErrorCode.None);
    }
  }
  return Buffer.concat(sets);
}

/** Sends one request on a fresh socket and reads the whole response frame; `slow` makes the reader stall and sip. */
async function rawRequest(port: number, frame: Buffer, slow: boolean): Promise<Buffer> {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  const chunks: Buffer[] = [];
  let got = 0;
  let timer: NodeJS.Timeout | undefined;
  try {
    return await new Promise<Buffer>((resolve, reject) => {
      if (slow) {
        socket.pause();
        const tick = (): void => {
          socket.resume();
          setTimeout(() => socket.pause(), 2);
          timer = setTimeout(tick, 15);
        };
        timer = setTimeout(tick, 300);
      }
      socket.on('data', (c: Buffer) => {
        chunks.push(c);
        got += c.length;
        if (got >= 4) {
          const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
          if (got >= 4 + all.readInt32BE(0)) resolve(all);
        }
      });
      socket.on('error', reject);
      socket.on('close', () => reject(new Error(`closed after ${got} bytes`)));
      socket.write(frame);
    });
  } finally {
    clearTimeout(timer);
    socket.destroy();
  }
}

describe('read path: sendfile and read-write send identical bytes', () => {
  it('for fetches at and across segment ends, partial trailing messages, errors and MULTIFETCH', async () => {
    const a = await start('sendfile', { segmentBytes: 16 * 1024 });
    const b = await start('read-write', { segmentBytes: 16 * 1024 });
    const batches = Array.from({ length: 40 }, (_, i) => payloads(7, i));
    const log = await produceSame([a, b], 'same', batches);
    const starts = a.logs.getLog('same', 0)!.segmentStarts();
    expect(starts.length).toBeGreaterThan(5);
    expect(b.logs.getLog('same', 0)!.segmentStarts()).toEqual(starts);
    const boundaries = [...iterateMessageSet(log)].map((m) => m.offset);
    const fetches: FetchRequest[] = [];
    for (const offset of [0, ...boundaries.filter((_, i) => i % 13 === 0), starts[2]!, starts[3]!, log.length]) {
      for (const maxBytes of [1, 7, 100, 1000, 4096, 16 * 1024, 64 * 1024, 10 * mib]) fetches.push({ topic: 'same', partition: 0, offset, maxBytes });
    }
    // Errors: not a boundary, out of range, bad size, wrong partition; and an unknown topic.
    fetches.push({ topic: 'same', partition: 0, offset: 3, maxBytes: 10_000 });
    fetches.push({ topic: 'same', partition: 0, offset: log.length + 1, maxBytes: 100 });
    fetches.push({ topic: 'same', partition: 0, offset: 0, maxBytes: -1 });
    fetches.push({ topic: 'same', partition: 1, offset: 0, maxBytes: 100 });
    fetches.push({ topic: 'nobody', partition: 0, offset: 0, maxBytes: 100 });
    const ca = await client(a);
    const cb = await client(b);
    let withData = 0;
    for (const f of fetches) {
      const [ra, rb] = await Promise.all([ca.request(encodeFetchRequest(f)), cb.request(encodeFetchRequest(f))]);
      expect(ra.code).toBe(rb.code);
      expect(ra.body.equals(rb.body)).toBe(true);
      if (ra.code === ErrorCode.None && ra.body.length > 0) {
        withData++;
        // And they are the log's bytes from the offset, cut at the segment's end.
        const segEnd = Math.min(...starts.filter((s) => s > f.offset), log.length);
        expect(ra.body.equals(log.subarray(f.offset, f.offset + Math.min(f.maxBytes, segEnd - f.offset)))).toBe(true);
      }
    }
    expect(withData).toBeGreaterThan(150);
    // Pipelined on one connection: responses stay framed and in order.
    const pipelined = fetches.slice(0, 80);
    const [pa, pb] = await Promise.all([
      Promise.all(pipelined.map((f) => ca.request(encodeFetchRequest(f)))),
      Promise.all(pipelined.map((f) => cb.request(encodeFetchRequest(f)))),
    ]);
    pa.forEach((r, i) => expect(r.body.equals(pb[i]!.body)).toBe(true));
    // MULTIFETCH: several regions in one response.
    const multi = encodeMultiFetchRequest(fetches.filter((_, i) => i % 9 === 0));
    const [ma, mb] = await Promise.all([ca.request(multi), cb.request(multi)]);
    expect(ma.code).toBe(ErrorCode.None);
    expect(ma.body.length).toBeGreaterThan(1000);
    expect(ma.body.equals(mb.body)).toBe(true);
  });

  it('for 8 MiB fetches to a slow reader (the socket fills up) while retention deletes the segments', async () => {
    const settings = { segmentBytes: 64 * mib, maxFetchBytes: 16 * mib };
    const a = await start('sendfile', settings);
    const b = await start('read-write', settings);
    const batches = Array.from({ length: 90 }, (_, i) => Array.from({ length: 100 }, (_, j) => Buffer.alloc(1000, (i * 100 + j) % 251)));
    const log = await produceSame([a, b], 'big', batches);
    expect(log.length).toBeGreaterThan(8 * mib);
    const frame = encodeFetchRequest({ topic: 'big', partition: 0, offset: 0, maxBytes: 8 * mib });
    const eagainBefore = sendfileStats().eagain;
    const pending = [rawRequest(a.port, frame, true), rawRequest(b.port, frame, true)];
    await new Promise((r) => setTimeout(r, 150));
    // Retention deletes every aged segment while both responses are still being sent.
    const year = 365 * 24 * 3600 * 1000;
    expect(await a.logs.cleanupExpired(Date.now() + year)).toBeGreaterThan(0);
    expect(await b.logs.cleanupExpired(Date.now() + year)).toBeGreaterThan(0);
    const [fa, fb] = (await Promise.all(pending)) as [Buffer, Buffer];
    expect(fa.length).toBe(4 + 2 + 8 * mib);
    expect(fa.equals(fb)).toBe(true);
    expect(fa.subarray(6).equals(log.subarray(0, 8 * mib))).toBe(true);
    if (sendfileSupport.available) {
      expect(sendfileStats().eagain).toBeGreaterThan(eagainBefore);
      expect(await a.metrics.value('klog_sendfile_eagain_total')).toBeGreaterThan(eagainBefore);
    }
    // The data is gone now: both answer OffsetOutOfRange at 0, and the brokers still serve.
    for (const broker of [a, b]) {
      const r = await (await client(broker)).request(encodeFetchRequest({ topic: 'big', partition: 0, offset: 0, maxBytes: 100 }));
      expect(r.code).toBe(ErrorCode.OffsetOutOfRange);
    }
  });

  it('closes a connection whose reader disappears mid-response and keeps serving', async () => {
    const a = await start('sendfile', { segmentBytes: 64 * mib, maxFetchBytes: 16 * mib });
    await produceSame([a], 'gone', [Array.from({ length: 9000 }, () => Buffer.alloc(1000, 7))]);
    const socket = connect(a.port, '127.0.0.1');
    await once(socket, 'connect');
    socket.pause();
    socket.write(encodeFetchRequest({ topic: 'gone', partition: 0, offset: 0, maxBytes: 8 * mib }));
    await new Promise((r) => setTimeout(r, 200));
    socket.destroy();
    await new Promise((r) => setTimeout(r, 300));
    const r = await (await client(a)).request(encodeFetchRequest({ topic: 'gone', partition: 0, offset: 0, maxBytes: 1010 }));
    expect(r.code).toBe(ErrorCode.None);
    expect(r.body.length).toBe(1010);
    // Nothing stays pinned: closing the broker closes every segment (a pinned one would hold it up).
    const closed = await Promise.race([a.close().then(() => 'closed'), new Promise((r) => setTimeout(() => r('still pinned'), 3000))]);
    expect(closed).toBe('closed');
  });
});

describe('read path selection', () => {
  it('logs the read path in the "broker listening" line and --read-path read-write forces the fallback', async () => {
    const logDir = tempDir();
    dirs.push(logDir);
    spawned = await spawnBroker(['--log-dir', logDir]);
    const listening = (p: BrokerProcess) => p.logs.find((l) => l.msg === 'broker listening')!;
    expect(listening(spawned).readPath).toBe(sendfileSupport.available ? 'sendfile' : 'read-write');
    expect(listening(spawned).crcPath).toBe(crcSupport.path);
    spawned.proc.kill('SIGTERM');
    await spawned.exited;
    spawned = await spawnBroker(['--log-dir', logDir, '--read-path', 'read-write']);
    expect(listening(spawned).readPath).toBe('read-write');
    expect(listening(spawned).sendfileUnavailable).toBeUndefined();
    await expect(spawnBroker(['--log-dir', logDir, '--read-path', 'mmap'])).rejects.toThrow(/--read-path: expected one of auto, sendfile, read-write, got "mmap"/);
  });

  it('refuses read.path=sendfile when the addon is not available, and says why it fell back under auto (and so for the CRC addon)', async () => {
    const logDir = tempDir();
    dirs.push(logDir);
    process.env.KLOG_DISABLE_SENDFILE = '1';
    process.env.KLOG_DISABLE_NATIVE_CRC = '1';
    try {
      await expect(spawnBroker(['--log-dir', logDir, '--read-path', 'sendfile'])).rejects.toThrow(/exited with 2 .*read.path=sendfile but sendfile is not available: KLOG_DISABLE_SENDFILE=1/);
      spawned = await spawnBroker(['--log-dir', logDir]);
    } finally {
      delete process.env.KLOG_DISABLE_SENDFILE;
      delete process.env.KLOG_DISABLE_NATIVE_CRC;
    }
    const line = spawned.logs.find((l) => l.msg === 'broker listening')!;
    expect(line).toMatchObject({ readPath: 'read-write', sendfileUnavailable: 'KLOG_DISABLE_SENDFILE=1', crcPath: 'js', crcAddonUnavailable: 'KLOG_DISABLE_NATIVE_CRC=1' });
    // The fallbacks serve: produce (its CRCs checked in JavaScript) and fetch through the child broker.
    const c = await WireClient.connect(spawned.port);
    clients.push(c);
    const set = encodeMessageSet([Buffer.from('via read-write')]);
    await c.request(encodeProduceAckRequest({ acks: AckLevel.Flushed, partitions: [{ topic: 'rw', partition: 0, messages: set }] }));
    const r = await c.request(encodeFetchRequest({ topic: 'rw', partition: 0, offset: 0, maxBytes: 1000 }));
    expect(r.body.equals(set)).toBe(true);
  });
});

describe('metrics', () => {
  it('serves Prometheus metrics over HTTP with the counts of a produce and a fetch', async () => {
    const a = await start('sendfile', { metricsPort: 0, numPartitions: 2 });
    expect(a.metricsPort).toBeGreaterThan(0);
    const c = await client(a);
    const set = encodeMessageSet(payloads(25, 1));
    await c.request(encodeProduceAckRequest({ acks: AckLevel.Flushed, partitions: [{ topic: 'm', partition: 1, messages: set }] }));
    const fetched = await c.request(encodeFetchRequest({ topic: 'm', partition: 1, offset: 0, maxBytes: 1_000_000 }));
    expect(fetched.body.length).toBe(set.length);
    await c.request(encodeFetchRequest({ topic: 'm', partition: 1, offset: 1, maxBytes: 1000 })); // not a boundary
    const res = await fetch(`http://127.0.0.1:${a.metricsPort}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/text\/plain/);
    const text = await res.text();
    const sampleOf =
      (body: string) =>
      (name: string, labels: string): number => {
        const line = body.split('\n').find((l) => l.startsWith(`${name}{${labels}} `) || (labels === '' && l.startsWith(`${name} `)));
        if (line === undefined) throw new Error(`no sample ${name}{${labels}} in:\n${body}`);
        return Number(line.slice(line.lastIndexOf(' ') + 1));
      };
    const sample = sampleOf(text);
    expect(sample('klog_messages_in_total', 'topic="m"')).toBe(25);
    expect(sample('klog_bytes_in_total', 'topic="m"')).toBe(set.length);
    expect(sample('klog_bytes_out_total', 'topic="m"')).toBe(set.length);
    expect(sample('klog_fetch_responses_total', 'topic="m"')).toBe(1);
    expect(sample('klog_requests_total', 'type="Fetch"')).toBe(2);
    expect(sample('klog_requests_total', 'type="ProduceAck"')).toBe(1);
    expect(sample('klog_errors_total', 'code="InvalidMessageOffset"')).toBe(1);
    // Totals always; the per-partition gauges only when asked for.
    expect(sample('klog_partitions', '')).toBe(2);
    expect(sample('klog_logs_size_bytes', '')).toBe(set.length);
    expect(sample('klog_logs_unflushed_bytes', '')).toBe(0);
    expect(text).not.toMatch(/^klog_log_end_offset/m);
    const perPartition = await (await fetch(`http://127.0.0.1:${a.metricsPort}/metrics?partitions=true`)).text();
    const partitionSample = sampleOf(perPartition);
    expect(partitionSample('klog_log_end_offset', 'topic="m",partition="1"')).toBe(set.length);
    expect(partitionSample('klog_log_flushed_end_offset', 'topic="m",partition="1"')).toBe(set.length);
    expect(partitionSample('klog_log_size_bytes', 'topic="m",partition="1"')).toBe(set.length);
    expect(partitionSample('klog_log_segments', 'topic="m",partition="1"')).toBe(1);
    expect(partitionSample('klog_log_end_offset', 'topic="m",partition="0"')).toBe(0);
    expect(perPartition).toMatch(/^# TYPE klog_log_end_offset gauge$/m);
    // Request latency by type (two fetches and one acknowledged produce), connections, messages out, the process.
    expect(sample('klog_request_duration_seconds_count', 'type="Fetch"')).toBe(2);
    expect(sample('klog_request_duration_seconds_bucket', 'le="+Inf",type="ProduceAck"')).toBe(1);
    expect(sample('klog_request_duration_seconds_sum', 'type="Fetch"')).toBeGreaterThan(0);
    expect(sample('klog_connections_open', '')).toBe(1);
    expect(sample('klog_messages_out_estimated_total', 'topic="m"')).toBe(25);
    expect(sample('process_cpu_user_seconds_total', '')).toBeGreaterThan(0);
    expect(text).toMatch(/^nodejs_eventloop_lag_seconds /m);
    expect(sample('klog_flushes_total', 'result="ok"')).toBeGreaterThanOrEqual(1);
    expect(sample('klog_flush_duration_seconds_count', '')).toBe(sample('klog_flushes_total', 'result="ok"'));
    const active = sendfileSupport.available ? 'sendfile' : 'read-write';
    expect(sample('klog_read_path', `path="${active}"`)).toBe(1);
    expect(sample('klog_read_path', `path="${active === 'sendfile' ? 'read-write' : 'sendfile'}"`)).toBe(0);
    expect(sample('klog_crc_path', `path="${crcSupport.path}"`)).toBe(1);
    expect(sample('klog_crc_path', `path="${crcSupport.path === 'native' ? 'js' : 'native'}"`)).toBe(0);
    expect((await fetch(`http://127.0.0.1:${a.metricsPort}/other`)).status).toBe(404);
  });

  it('counts rejected produces in klog_errors_total: too large and wrong partition, fire-and-forget and acknowledged', async () => {
    const a = await start('sendfile', { numPartitions: 2, maxMessageBytes: 100 });
    const c = await client(a);
    const big = encodeMessageSet([Buffer.alloc(101)]);
    const small = encodeMessageSet([Buffer.from('ok')]);
    await c.request(encodeProduceAckRequest({ acks: AckLevel.Appended, partitions: [{ topic: 'e', partition: 0, messages: small }] })); // topic e: 2 partitions
    c.send(encodeProduceRequest({ topic: 'e', partition: 0, messages: big })); // fire-and-forget: no answer to carry the error
    c.send(encodeProduceRequest({ topic: 'e', partition: 5, messages: small }));
    const acked = decodeProduceAckResponse(
      new Decoder((await c.request(encodeProduceAckRequest({ acks: AckLevel.Appended, partitions: [{ topic: 'e', partition: 0, messages: big }, { topic: 'e', partition: 7, messages: small }] }))).body),
    );
    expect(acked.map((r) => r.errorCode)).toEqual([ErrorCode.MessageSizeTooLarge, ErrorCode.WrongPartition]);
    expect((await c.request(encodeOffsetsRequest({ topic: 'e', partition: 9, time: -1, maxOffsets: 1 }))).code).toBe(ErrorCode.WrongPartition);
    expect(await a.metrics.value('klog_errors_total', { code: 'MessageSizeTooLarge' })).toBe(2);
    expect(await a.metrics.value('klog_errors_total', { code: 'WrongPartition' })).toBe(3);
  });

  it('logs the metrics port chosen for --metrics-port 0', async () => {
    const logDir = tempDir();
    dirs.push(logDir);
    spawned = await spawnBroker(['--log-dir', logDir, '--metrics-port', '0']);
    const port = spawned.logs.find((l) => l.msg === 'broker listening')!.metricsPort as number;
    expect(port).toBeGreaterThan(0);
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(text).toMatch(/^klog_read_path\{path="(sendfile|read-write)"\} 1$/m);
  });
});
