/**
 * `klog load` as users run it: a child process against a real ZooKeeper (one chroot per test)
 * and two in-process brokers with 2 partitions each, reading back what it committed.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Broker, type BrokerConfig, startBroker } from '@klog/broker';
import { SimpleConsumer } from '@klog/client';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { pino } from 'pino';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { id, klog, waitForRegistration, payloads, perPartition, produce, readDataFile, readRuns, type Run, type Sent } from './load-helpers.js';

/** One line on stderr and exit code `code`: 1 for a failure at run time, 2 for a usage error (README, "Exit codes"). */
function expectOneLineError(r: Run, pattern: RegExp, code = 1): void {
  expect(r.code, r.stderr).toBe(code);
  expect(r.stderr.trimEnd().split('\n'), r.stderr).toHaveLength(1);
  expect(r.stderr).toMatch(pattern);
}

describe('klog load', () => {
  let zookeeper: string;
  let work: string;
  let out: string;
  let brokers: Broker[];

  const startBrokers = async (settings: Partial<BrokerConfig> = {}): Promise<void> => {
    brokers = await Promise.all(
      [0, 1].map((brokerId) =>
        startBroker(
          { logDir: join(work, `broker-${brokerId}`), host: '127.0.0.1', port: 0, brokerId, zookeeper, numPartitions: 2, ...settings },
          pino({ level: 'silent' }),
        ),
      ),
    );
  };
  const load = (...extra: string[]): Promise<Run> => klog(['load', '--zookeeper', zookeeper, '--out', out, ...extra]);

  beforeAll(async () => {
    await assertZooKeeperRunning();
  });
  beforeEach(() => {
    zookeeper = testConnectString();
    work = mkdtempSync(join(tmpdir(), 'klog-load-'));
    out = join(work, 'out');
    brokers = [];
  });
  afterEach(async () => {
    for (const b of brokers) await b.close();
    await removeChroot(zookeeper);
    rmSync(work, { recursive: true, force: true });
  });

  it('loads each message exactly once over several runs, in partition order, and commits an empty run when nothing is new', async () => {
    await startBrokers();
    const sent: Sent[] = [];
    sent.push(...(await produce(zookeeper, brokers, 'events', payloads('e', 120))));
    sent.push(...(await produce(zookeeper, brokers, 'clicks', payloads('c', 40))));
    await produce(zookeeper, brokers, 'audit', payloads('a', 10)); // not matched by the pattern

    const r1 = await load('--topic', 'events|clicks');
    expect(r1.code, r1.stderr).toBe(0);
    expect(r1.stdout).toMatch(/^run 1 committed to .*run-00000001: 8 partitions, 160 messages, .* s\n$/);
    // Not a terminal: one plain line per partition, no bar.
    expect(r1.stderr).toMatch(/^events 0-0: 30 messages, /m);
    expect(r1.stderr).not.toMatch(/\r|\[#/);

    sent.push(...(await produce(zookeeper, brokers, 'events', payloads('e', 60, 120))));
    const r2 = await load('--topic', 'events|clicks');
    expect(r2.code, r2.stderr).toBe(0);
    expect(r2.stdout).toMatch(/^run 2 committed .*: 8 partitions, 60 messages/);

    sent.push(...(await produce(zookeeper, brokers, 'clicks', payloads('c', 7, 40))));
    sent.push(...(await produce(zookeeper, brokers, 'events', payloads('e', 3, 180))));
    const r3 = await load('--topic', 'events|clicks');
    expect(r3.code, r3.stderr).toBe(0);
    expect(r3.stdout).toMatch(/: 8 partitions, 10 messages/);

    const r4 = await load('--topic', 'events|clicks');
    expect(r4.code, r4.stderr).toBe(0);
    expect(r4.stdout).toMatch(/^run 4 committed .*: 8 partitions, 0 messages/);

    const { runs, others } = readRuns(out);
    expect(others).toEqual([]);
    expect(runs.map((r) => r.name)).toEqual(['run-00000001', 'run-00000002', 'run-00000003', 'run-00000004']);
    expect(runs[3]!.messages).toEqual([]);
    expect(readdirSync(join(out, 'run-00000004')).sort()).toEqual(['manifest.json', 'offsets.json']);
    expect(runs[3]!.offsets).toEqual(runs[2]!.offsets);
    expect(Object.keys(runs[0]!.offsets)).toEqual(['clicks', 'events']);

    const loaded = runs.flatMap((r) => r.messages);
    expect(loaded.map(id).sort()).toEqual(sent.map(id).sort());
    // Per partition: the order they were sent in, with offsets increasing across the runs.
    expect(perPartition(loaded)).toEqual(perPartition(sent));
    for (const k of new Set(loaded.map((m) => `${m.topic} ${m.partition}`))) {
      const offsets = loaded.filter((m) => `${m.topic} ${m.partition}` === k).map((m) => m.offset!);
      expect(offsets).toEqual([...offsets].sort((a, b) => a - b));
    }
  });

  it('round-trips binary payloads in json, text in raw, each with and without gzip', async () => {
    await startBrokers();
    const binary = Array.from({ length: 64 }, (_, i) => Buffer.from([i, 0, 0xff, 0x0a, 0x0d, 0x22, 0x5c, 0x80 + i, ...Buffer.from('é€😀')]));
    const text = payloads('line with "quotes", tabs\tand unicode é', 50);
    const sentBinary = await produce(zookeeper, brokers, 'bin', binary);
    const sentText = await produce(zookeeper, brokers, 'txt', text);
    for (const [format, gzip, topic, sent] of [
      ['json', false, 'bin', sentBinary],
      ['json', true, 'bin', sentBinary],
      ['raw', false, 'txt', sentText],
      ['raw', true, 'txt', sentText],
    ] as const) {
      out = join(work, `out-${format}-${gzip}`);
      const r = await load('--topic', topic, '--format', format, ...(gzip ? ['--gzip'] : []));
      expect(r.code, r.stderr).toBe(0);
      const { runs } = readRuns(out);
      expect(runs).toHaveLength(1);
      const files = runs[0]!.manifest.partitions.map((p) => p.file);
      const ext = `.${format === 'json' ? 'jsonl' : 'raw'}${gzip ? '.gz' : ''}`;
      expect(files).toEqual(['0-0', '0-1', '1-0', '1-1'].map((k) => `${topic}/${k}${ext}`));
      if (gzip) expect(readFileSync(join(out, 'run-00000001', files[0]!)).subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
      expect(perPartition(runs[0]!.messages)).toEqual(perPartition(sent));
    }

    // Raw output cannot hold a payload with a newline: the run fails, naming it, and commits nothing.
    out = join(work, 'out-raw-binary');
    const bad = await load('--topic', 'bin', '--format', 'raw');
    expectOneLineError(bad, /topic bin partition 0-0: --format raw: the message at offset 0 .* holds a newline byte.*use --format json.*nothing committed/);
    expect(readdirSync(out)).toEqual([]);
    // One data file read by hand: a JSON line per message with the fields documented.
    const line = readFileSync(join(work, 'out-json-false', 'run-00000001', 'bin', '1-0.jsonl'), 'utf8').split('\n')[0]!;
    expect(JSON.parse(line)).toEqual({ topic: 'bin', brokerId: 1, partition: 0, offset: 0, payload: binary[2]!.toString('base64') });
    expect(readDataFile(join(work, 'out-json-false', 'run-00000001', 'bin', '1-0.jsonl'), 'bin', '1-0', 'json')[0]!.payload).toEqual(binary[2]);
  });

  it('fails cleanly and commits nothing when a broker of a loaded partition is down, then resumes once it is back', async () => {
    await startBrokers();
    const sent = await produce(zookeeper, brokers, 'events', payloads('e', 40));
    expect((await load('--topic', 'events')).code).toBe(0);
    const more = await produce(zookeeper, brokers, 'events', payloads('e', 40, 40));

    // Broker 1 shuts down: its partitions are no longer registered.
    await brokers[1]!.close();
    const down = await load('--topic', 'events');
    expectOneLineError(down, /^klog load: error: partitions loaded by earlier runs are not registered in ZooKeeper now \(is their broker down\?\): events 1-0, events 1-1; nothing committed\n$/);
    expect(readdirSync(out)).toEqual(['run-00000001']);

    // Back on the same log dir: the next run loads what was missed, once.
    brokers[1] = await startBroker(
      { logDir: join(work, 'broker-1'), host: '127.0.0.1', port: 0, brokerId: 1, zookeeper, numPartitions: 2 },
      pino({ level: 'silent' }),
    );
    await waitForRegistration(zookeeper, 'events', [1]);
    const r = await load('--topic', 'events');
    expect(r.code, r.stderr).toBe(0);
    const { runs, others } = readRuns(out);
    expect(others).toEqual([]);
    expect(runs.flatMap((x) => x.messages).map(id).sort()).toEqual([...sent, ...more].map(id).sort());
  });

  it('fails cleanly when a registered broker does not answer (killed, its session not expired yet)', async () => {
    await startBrokers();
    const child = await startChildBroker(zookeeper, join(work, 'broker-2'), 2);
    try {
      const sent = await produce(zookeeper, [...brokers, { port: child.port } as Broker], 'events', payloads('e', 30));
      expect(sent.filter((s) => s.partition.startsWith('2-'))).toHaveLength(10);
      const first = await load('--topic', 'events');
      expect(first.code, first.stderr).toBe(0);
      expect(first.stdout).toMatch(/6 partitions, 30 messages/);
      await produce(zookeeper, brokers, 'events', payloads('f', 8));
      child.kill();
      await child.exited;
      const r = await load('--topic', 'events');
      expectOneLineError(r, /topic events partition 2-0: .*127\.0\.0\.1:\d+.*; nothing committed/);
      expect(readdirSync(out)).toEqual(['run-00000001']);
    } finally {
      child.kill();
    }
  });

  it('names the range retention deleted before it was loaded, and continues past it with --allow-gaps', async () => {
    // Small segments, at most ~2 KiB kept per partition, retention checked often.
    await startBrokers({ segmentBytes: 512, retentionBytes: 2048, retentionCheckIntervalMs: 50 });
    const first = await produce(zookeeper, brokers, 'events', payloads('e', 40));
    const r1 = await load('--topic', 'events');
    expect(r1.code, r1.stderr).toBe(0);
    const stored = readRuns(out).runs[0]!.offsets['events']!['0-0']!;

    // Far more than retention keeps: the start of what run 2 would read is deleted.
    const lost = await produce(zookeeper, brokers, 'events', payloads('g', 800));
    const consumer = new SimpleConsumer({ host: '127.0.0.1', port: brokers[0]!.port });
    let earliest = 0;
    try {
      for (let i = 0; i < 100 && earliest <= stored; i++) {
        earliest = await consumer.earliestOffset('events', 0);
        if (earliest <= stored) await new Promise((resolve) => setTimeout(resolve, 50));
      }
    } finally {
      await consumer.close();
    }
    expect(earliest).toBeGreaterThan(stored);

    const r2 = await load('--topic', 'events');
    expectOneLineError(
      r2,
      new RegExp(`topic events partition 0-0: offsets \\[${stored}, \\d+\\) were deleted by retention before they were loaded .*nothing committed; rerun with --allow-gaps`),
    );
    expect(readdirSync(out)).toEqual(['run-00000001']);

    const r3 = await load('--topic', 'events', '--allow-gaps');
    expect(r3.code, r3.stderr).toBe(0);
    expect(r3.stdout).toMatch(/4 gaps skipped \(see manifest.json\)/);
    const { runs } = readRuns(out);
    const run2 = runs[1]!;
    expect(run2.manifest.gaps).toHaveLength(4);
    const gap00 = run2.manifest.gaps.find((g) => g.brokerId === 0 && g.partition === 0)!;
    expect(gap00.from).toBe(stored);
    expect(gap00.to).toBeGreaterThanOrEqual(earliest);
    // Log bytes read: each partition's [from, to), the skipped range lying before `from`.
    for (const p of run2.manifest.partitions) expect(p.logBytes, `${p.brokerId}-${p.partition}`).toBe(p.to - p.from);
    expect(run2.manifest.logBytes).toBe(run2.manifest.partitions.reduce((n, p) => n + p.logBytes, 0));
    // What run 2 loaded is a suffix of each partition's messages: nothing out of order, nothing twice.
    const all = perPartition([...first, ...lost]);
    for (const [k, got] of perPartition(run2.messages)) {
      const want = all.get(k)!;
      expect(got.length).toBeGreaterThan(0);
      expect(want.slice(want.length - got.length)).toEqual(got);
    }
    expect(runs[0]!.messages.map(id).sort()).toEqual(first.map(id).sort());
  });

  it('rejects bad input with one line', async () => {
    await startBrokers();
    await produce(zookeeper, brokers, 'events', payloads('e', 4));
    expectOneLineError(await load('--topic', 'nothing.*'), /no topic in ZooKeeper matches \^\(\?:nothing\.\*\)\$/);
    expectOneLineError(await load('--topic', '('), /--topic/, 2);
    expectOneLineError(await load('--topic', 'events', '--format', 'csv'), /--format/, 2);
    expect(existsSync(join(out, 'run-00000001'))).toBe(false);
    // A directory that cannot be made (under /proc, mkdir gives ENOENT although the parent exists)
    // is one error naming it, not Node's recursive mkdir retrying for ever.
    const proc = await klog(['load', '--zookeeper', zookeeper, '--out', '/proc/klog-no-such-dir/out', '--topic', 'events']);
    expectOneLineError(proc, /cannot create directory \/proc\/klog-no-such-dir/);
    const h = await klog(['load', '--help']);
    expect(h.code).toBe(0);
    expect(h.stdout).toMatch(/--allow-gaps/);
    expect(h.stdout).not.toMatch(/--throttle-ms/);
  });
});

const brokerMain = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'apps', 'broker', 'dist', 'main.js');

/** A broker in a child process (so that it can be killed without closing its ZooKeeper session); resolves once it listens. */
async function startChildBroker(zookeeper: string, logDir: string, brokerId: number): Promise<{ port: number; kill(): void; exited: Promise<void> }> {
  const child = spawn(
    process.execPath,
    [brokerMain, '--broker-id', String(brokerId), '--host', '127.0.0.1', '--port', '0', '--log-dir', logDir, '--zookeeper', zookeeper, '--num-partitions', '2', '--zk-session-timeout-ms', '30000'],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const port = await new Promise<number>((resolve, reject) => {
    let text = '';
    child.stdout.on('data', (b: Buffer) => {
      text += b.toString();
      const line = text.split('\n').find((l) => l.includes('"broker listening"'));
      const port = line === undefined ? undefined : /"port":(\d+)/.exec(line);
      if (port) resolve(Number(port[1]));
    });
    child.on('exit', (code) => reject(new Error(`broker exited with ${code}: ${text}`)));
  });
  return { port, kill: () => child.kill('SIGKILL'), exited };
}
