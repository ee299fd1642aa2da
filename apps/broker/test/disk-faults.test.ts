/**
 * The broker against its disk, as a deployment meets it: the log dir lock after `kill -9` when
 * the dead broker's pid names a live process (PID 1 in a container, a reused pid), a full disk
 * (a small tmpfs this test mounts, when root), and the fsync of a partition directory when a
 * segment is rolled or deleted (seen with strace, when installed), and an fdatasync that fails
 * under a Kafka produce (failed by strace).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import {
  AckLevel,
  Decoder,
  ErrorCode,
  decodeFetchResponse,
  decodeProduceAckResponse,
  encodeFetchRequest,
  encodeMessageSet,
  encodeProduceAckRequest,
  iterateMessageSet,
} from '@klog/protocol';
import { ApiKey, encodeKafkaMessageSet, encodeRequest, type KafkaWriter } from '@klog/kafka-protocol';
import { WireClient, brokerMain, removeDir, spawnBroker, tempDir, type BrokerProcess } from './helpers.js';

let dir: string;
const running: BrokerProcess[] = [];
const cleanups: (() => void)[] = [];

beforeEach(() => {
  dir = tempDir('klog-disk-test-');
});
afterEach(async () => {
  for (const b of running.splice(0)) {
    if (b.proc.exitCode === null && b.proc.signalCode === null) {
      b.proc.kill('SIGKILL');
      await b.exited;
    }
  }
  for (const f of cleanups.splice(0).reverse()) f();
  removeDir(dir);
});

async function boot(args: string[], wrap: string[] = []): Promise<BrokerProcess> {
  const b = await spawnBroker(['--log-dir', dir, ...args], wrap);
  running.push(b);
  return b;
}

type Landed = { errorCode: number; offset: number; nextOffset: number };

async function produce(c: WireClient, topic: string, payloads: Buffer[], acks: 1 | 2 = AckLevel.Appended): Promise<Landed> {
  const r = await c.request(encodeProduceAckRequest({ acks, partitions: [{ topic, partition: 0, messages: encodeMessageSet(payloads) }] }));
  expect(r.code).toBe(ErrorCode.None);
  return decodeProduceAckResponse(new Decoder(r.body))[0]!;
}

const isRoot = process.getuid?.() === 0;
const has = (cmd: string): boolean => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;

describe('log dir lock', () => {
  it('restarts after kill -9 when the lock file names a live pid (this test, PID 1), and keeps a second broker out', async () => {
    const first = await boot([]);
    const second = await spawnBroker(['--log-dir', dir]).then(
      (b) => (running.push(b), 'started'),
      (err: Error) => err.message,
    );
    expect(second).toMatch(/in use by process/);
    first.proc.kill('SIGKILL');
    await first.exited;
    for (const pid of [process.pid, 1]) {
      // The dead broker's lock names a pid that runs: this test's own (a reused pid), or PID 1.
      writeFileSync(join(dir, '.lock'), `${pid}\n`);
      const b = await boot([]);
      b.proc.kill('SIGKILL');
      await b.exited;
    }
  });

  it.skipIf(!isRoot || !has('unshare'))('restarts a broker that is PID 1 of its pid namespace after kill -9 (root and unshare)', async () => {
    /** Starts the broker as PID 1 of a new pid namespace; resolves with the host pid of the broker. */
    const startAsPid1 = (): Promise<{ hostPid: number; nsPid: number; exited: Promise<number | null> }> => {
      const proc = spawn('unshare', ['--pid', '--fork', process.execPath, brokerMain, '--port', '0', '--log-dir', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
      const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
      cleanups.push(() => proc.kill('SIGKILL'));
      let stderr = '';
      proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      return new Promise((resolve, reject) => {
        createInterface({ input: proc.stdout }).on('line', (line) => {
          const entry = JSON.parse(line) as Record<string, unknown>;
          if (entry.msg !== 'broker listening') return;
          const hostPid = Number(execFileSync('pgrep', ['-P', String(proc.pid)]).toString().trim());
          resolve({ hostPid, nsPid: entry.pid as number, exited });
        });
        void exited.then((code) => reject(new Error(`broker exited with ${code} before listening: ${stderr}`)));
      });
    };
    const first = await startAsPid1();
    expect(first.nsPid).toBe(1);
    expect(readFileSync(join(dir, '.lock'), 'utf8')).toBe('1\n');
    process.kill(first.hostPid, 'SIGKILL');
    await first.exited;
    expect(existsSync(join(dir, '.lock'))).toBe(true); // left behind, naming PID 1
    const again = await startAsPid1();
    expect(again.nsPid).toBe(1);
    process.kill(again.hostPid, 'SIGTERM');
    await again.exited;
  });
});

describe('disk full', () => {
  it.skipIf(!isRoot)('answers an acknowledged producer DiskFull, logs it and counts it, and keeps serving (a 1 MiB tmpfs, root)', async () => {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir]);
    cleanups.push(() => execFileSync('umount', ['-l', dir]));
    const b = await boot(['--metrics-port', '0']);
    const c = await WireClient.connect(b.port);
    const payload = Buffer.alloc(60 * 1024, 'x');
    let result = await produce(c, 'fills', [payload], AckLevel.Flushed);
    expect(result.errorCode).toBe(ErrorCode.None);
    let appended = 1;
    for (let i = 0; i < 40 && result.errorCode === ErrorCode.None; i++) {
      result = await produce(c, 'fills', [payload], AckLevel.Flushed);
      if (result.errorCode === ErrorCode.None) appended++;
    }
    expect(result).toMatchObject({ errorCode: ErrorCode.DiskFull, offset: -1 });
    for (let i = 0; i < 100 && !b.logs.some((l) => l.msg === 'disk full: produce rejected'); i++) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(b.logs.find((l) => l.msg === 'disk full: produce rejected')).toMatchObject({ topic: 'fills', code: 'DiskFull', logDir: dir });
    const metricsPort = b.logs.find((l) => l.msg === 'broker listening')!.metricsPort as number;
    const metrics = await new Promise<string>((resolve, reject) =>
      get(`http://127.0.0.1:${metricsPort}/metrics`, (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve(body));
      }).on('error', reject),
    );
    expect(metrics).toMatch(/klog_errors_total\{code="DiskFull"\} [1-9]/);
    // What was acknowledged is all there, nothing torn after it.
    const r = await c.request(encodeFetchRequest({ topic: 'fills', partition: 0, offset: 0, maxBytes: 4 * 1024 * 1024 }));
    const f = decodeFetchResponse(r.code, new Decoder(r.body));
    expect(f.errorCode).toBe(ErrorCode.None);
    expect([...iterateMessageSet(f.messages, 0)]).toHaveLength(appended);
    c.close();
    b.proc.kill('SIGTERM');
    expect(await b.exited).toBe(0);
  });
});

/** fsync calls on a descriptor opened on `path`, from an `strace -f -e trace=openat,fsync` log. */
function fsyncsOf(traceFile: string, path: string): number {
  const fdPaths = new Map<string, string>();
  const pending = new Map<string, string>();
  let count = 0;
  for (const line of readFileSync(traceFile, 'utf8').split('\n')) {
    const pid = /^(\d+)\s/.exec(line)?.[1] ?? '';
    let m = /openat\([^,]+, "([^"]+)".*\) = (\d+)/.exec(line);
    if (m) {
      fdPaths.set(m[2]!, m[1]!);
      continue;
    }
    m = /openat\([^,]+, "([^"]+)".*<unfinished/.exec(line);
    if (m) {
      pending.set(pid, m[1]!);
      continue;
    }
    m = /<\.\.\. openat resumed>.*= (\d+)/.exec(line);
    if (m && pending.has(pid)) {
      fdPaths.set(m[1]!, pending.get(pid)!);
      pending.delete(pid);
      continue;
    }
    m = /fsync\((\d+)/.exec(line);
    if (m && !line.includes('fdatasync') && fdPaths.get(m[1]!) === path) count++;
  }
  return count;
}

describe('partition directory fsync', () => {
  it.skipIf(!has('strace'))('fsyncs the partition directory on every roll and every retention delete (strace)', async () => {
    const trace = join(tempDir('klog-strace-'), 'trace');
    cleanups.push(() => removeDir(join(trace, '..')));
    const b = await boot(['--segment-bytes', '1024', '--retention-bytes', '2048', '--retention-check-interval-ms', '200'], ['strace', '-f', '-qq', '-e', 'trace=openat,fsync', '-o', trace]);
    const c = await WireClient.connect(b.port);
    const payload = Buffer.alloc(700, 'r');
    for (let i = 0; i < 6; i++) expect((await produce(c, 'rolls', [payload], AckLevel.Flushed)).errorCode).toBe(ErrorCode.None);
    // 6 sets of ~710 bytes in 1024-byte segments: 5 rolls; retention keeps about 2048 bytes.
    let deleted = 0;
    for (let i = 0; i < 100 && deleted === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      deleted = b.logs.filter((l) => l.msg === 'retention deleting segment').length;
    }
    expect(deleted).toBeGreaterThan(0);
    const rolls = 5;
    // A deletion is logged before its file is removed: wait for the files to go.
    const segments = (): number => readdirSync(join(dir, 'rolls-0')).length;
    for (let i = 0; i < 100 && segments() !== rolls + 1 - deleted; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      deleted = b.logs.filter((l) => l.msg === 'retention deleting segment').length;
    }
    expect(segments()).toBe(rolls + 1 - deleted);
    c.close();
    process.kill(b.logs[0]!.pid as number, 'SIGTERM');
    await b.exited;
    // One for the partition's creation, one per roll, one per delete.
    expect(fsyncsOf(trace, join(dir, 'rolls-0'))).toBeGreaterThanOrEqual(1 + rolls + deleted);
  });
});

/** One Kafka request on a new connection to `port`: its response frame, or undefined when the broker closed the connection first. */
async function kafkaCall(port: number, apiKey: number, apiVersion: number, body: (w: KafkaWriter) => void): Promise<Buffer | undefined> {
  const socket = connect(port, '127.0.0.1');
  try {
    await once(socket, 'connect');
    socket.write(encodeRequest({ apiKey, apiVersion, correlationId: 1, clientId: 'disk-faults' }, body));
    let got = Buffer.alloc(0);
    const closed = once(socket, 'close').then(() => undefined);
    while (got.length < 4 || got.length < 4 + got.readInt32BE(0)) {
      const chunk = await Promise.race([once(socket, 'data').then(([d]) => d as Buffer), closed]);
      if (chunk === undefined) return undefined;
      got = Buffer.concat([got, chunk]);
    }
    return got.subarray(4, 4 + got.readInt32BE(0));
  } finally {
    socket.destroy();
  }
}

/** Produce v2 with `acks` of one message to partition 0 of each of `topics`. */
function kafkaProduce(port: number, acks: number, topics: string[]): Promise<Buffer | undefined> {
  const set = encodeKafkaMessageSet([{ key: null, value: Buffer.from('v'), timestamp: Date.now() }], 1);
  return kafkaCall(port, ApiKey.Produce, 2, (w) =>
    w
      .int16(acks)
      .int32(30_000)
      .array(topics, (w, t) => w.string(t).array([0], (w, p) => w.int32(p).bytes(set))),
  );
}

/**
 * Makes every fdatasync of process `pid` fail with EIO, or with `delayMs` wait `delayMs` ms
 * before it runs (strace attached to it), until the returned function is called.
 */
async function faultFdatasyncs(pid: number, delayMs?: number): Promise<() => Promise<void>> {
  const fault = delayMs === undefined ? 'error=EIO' : `delay_enter=${delayMs * 1000}`;
  const inject = ['-e', 'trace=fdatasync', '-e', `inject=fdatasync:${fault}`];
  const strace = spawn('strace', ['-f', '-qq', '-o', '/dev/null', ...inject, '-p', String(pid)], { stdio: 'ignore' });
  cleanups.push(() => void strace.kill('SIGKILL'));
  await new Promise((resolve) => setTimeout(resolve, 500)); // attached
  return async () => {
    strace.kill('SIGINT');
    await once(strace, 'exit');
    await new Promise((resolve) => setTimeout(resolve, 200));
  };
}

describe('a flush that fails under a produce', () => {
  it.skipIf(!has('strace') || !isRoot)('answers a PRODUCE_ACK with acks 2 whose flush failed with an error for that partition, and the broker stays up (root)', async () => {
    const b = await boot([]);
    const c = await WireClient.connect(b.port);
    expect((await produce(c, 'synced', [Buffer.from('v')], AckLevel.Flushed)).errorCode).toBe(ErrorCode.None);
    const stop = await faultFdatasyncs(b.proc.pid!);
    const messages = encodeMessageSet([Buffer.from('v')]);
    const r = await c.request(encodeProduceAckRequest({ acks: AckLevel.Flushed, partitions: ['synced', 'fresh'].map((topic) => ({ topic, partition: 0, messages })) }));
    expect(r.code).toBe(ErrorCode.None);
    const [synced] = decodeProduceAckResponse(new Decoder(r.body));
    expect(synced!.errorCode).not.toBe(ErrorCode.None);
    await stop();
    expect(b.proc.exitCode).toBeNull();
    expect((await produce(c, 'synced', [Buffer.from('w')], AckLevel.Flushed)).errorCode).toBe(ErrorCode.None);
    c.close();
  });

  it.skipIf(!has('strace') || !isRoot)('closes the connection of an acks -1 produce whose flush failed while the request still waited, and the broker stays up (fdatasync failed by strace attached to it, root)', async () => {
    const b = await boot(['--kafka-port', '0']);
    const kafkaPort = b.logs.find((l) => l.msg === 'broker listening')!.kafkaPort as number;
    expect(await kafkaProduce(kafkaPort, 1, ['synced'])).toBeDefined();
    const stop = await faultFdatasyncs(b.proc.pid!);
    // `synced` is appended and its flush fails while the request waits for `fresh` to be created.
    expect(await kafkaProduce(kafkaPort, -1, ['synced', 'fresh'])).toBeUndefined();
    await stop();
    expect(b.proc.exitCode).toBeNull();
    expect(await kafkaCall(kafkaPort, ApiKey.ApiVersions, 0, () => undefined)).toBeDefined();
    expect(b.logs.some((l) => l.msg === 'Kafka request failed, closing connection')).toBe(true);
  });
});

describe('a flush slower than connections.max.idle.ms', () => {
  it.skipIf(!has('strace') || !isRoot)('keeps the connection of a produce waiting for it, on both listeners, and answers it (fdatasync delayed 2.5 s by strace, root)', async () => {
    const b = await boot(['--kafka-port', '0', '--connections-max-idle-ms', '800']);
    const kafkaPort = b.logs.find((l) => l.msg === 'broker listening')!.kafkaPort as number;
    const c = await WireClient.connect(b.port);
    expect((await produce(c, 'slow', [Buffer.from('v')], AckLevel.Flushed)).errorCode).toBe(ErrorCode.None);
    expect(await kafkaProduce(kafkaPort, 1, ['slow-kafka'])).toBeDefined();
    const stop = await faultFdatasyncs(b.proc.pid!, 2500);
    try {
      const started = Date.now();
      const [klogAnswer, kafkaAnswer] = await Promise.all([produce(c, 'slow', [Buffer.from('w')], AckLevel.Flushed), kafkaProduce(kafkaPort, -1, ['slow-kafka'])]);
      expect(Date.now() - started).toBeGreaterThan(2000); // the flushes were slowed
      expect(klogAnswer.errorCode).toBe(ErrorCode.None);
      expect(kafkaAnswer).toBeDefined(); // answered, not closed as idle
      expect(kafkaAnswer!.readInt16BE(4 + 4 + 2 + 'slow-kafka'.length + 4 + 4)).toBe(0); // the partition's error code
    } finally {
      await stop();
    }
    expect(b.logs.some((l) => String(l.msg).includes('idle'))).toBe(false);
    c.close();
  });
});
