/**
 * What the `klog load` tests share: running the CLI as a child process, producing known messages
 * to two brokers, and reading an output directory back run by run.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { Producer } from '@klog/client';
import { BrokerRegistry, ZkClient } from '@klog/zk-registry';
import type { Broker } from '@klog/broker';

export const main = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');

export interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface Spawned {
  readonly pid: number;
  done: Promise<Run>;
  /** Resolves once stderr holds at least `n` lines (or the process has exited). */
  stderrLines(n: number): Promise<void>;
  kill(signal: NodeJS.Signals): void;
}

export function start(args: string[]): Spawned {
  const child = spawn(process.execPath, [main, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString()));
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  const wake = (all: boolean): void => {
    const have = err.split('\n').length - 1;
    for (const w of waiters.filter((x) => all || have >= x.n)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  };
  child.stderr.on('data', (b: Buffer) => {
    err += b.toString();
    wake(false);
  });
  child.on('close', () => wake(true));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const done = new Promise<Run>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: out, stderr: err });
    });
  });
  return {
    pid: child.pid!,
    done,
    stderrLines: (n) => (err.split('\n').length - 1 >= n || child.exitCode !== null ? Promise.resolve() : new Promise((resolve) => waiters.push({ n, resolve }))),
    kill: (signal) => child.kill(signal),
  };
}

export const klog = (args: string[]): Promise<Run> => start(args).done;

/** One message as produced: where it went and its payload. */
export interface Sent {
  readonly topic: string;
  /** `<brokerId>-<partition>`. */
  readonly partition: string;
  readonly payload: Buffer;
}

/** Waits until every broker of `brokerIds` has registered `topic` in ZooKeeper (brokers register a new topic in the background). */
export async function waitForRegistration(zookeeper: string, topic: string, brokerIds: readonly number[]): Promise<void> {
  const zk = await ZkClient.connect(zookeeper);
  try {
    const registry = new BrokerRegistry(zk);
    for (let i = 0; i < 200; i++) {
      const registered = new Set((await registry.topicPartitions(topic)).map((c) => c.brokerId));
      if (brokerIds.every((b) => registered.has(b))) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`brokers ${brokerIds.join(', ')} did not all register ${topic}`);
  } finally {
    await zk.close();
  }
}

/**
 * Sends `payloads` to `topic` over the brokers (each with `perBroker` partitions), record i to
 * partition i mod the partition count, acknowledged once flushed and registered, so a run started afterwards sees them.
 */
export async function produce(zookeeper: string, brokers: readonly Broker[], topic: string, payloads: readonly Buffer[], perBroker = 2): Promise<Sent[]> {
  const producer = new Producer({ brokerList: brokers.map((b) => `127.0.0.1:${b.port}`), acks: 2, lingerMs: 0 });
  try {
    const n = brokers.length * perBroker;
    const results = await producer.send(
      topic,
      payloads.map((value, i) => ({ value, partition: i % n })),
    );
    expectLength(results.length, payloads.length);
    await waitForRegistration(zookeeper, topic, brokers.map((_, i) => i));
    return payloads.map((payload, i) => ({
      topic,
      partition: `${Math.floor((i % n) / perBroker)}-${(i % n) % perBroker}`,
      payload,
    }));
  } finally {
    await producer.close();
  }
}

function expectLength(got: number, want: number): void {
  if (got !== want) throw new Error(`producer acknowledged ${got} of ${want} records`);
}

/** A message read back from a data file. */
export interface Loaded {
  readonly topic: string;
  readonly partition: string;
  /** Null in raw format, which does not carry offsets. */
  readonly offset: number | null;
  readonly payload: Buffer;
}

interface ManifestPartition {
  topic: string;
  brokerId: number;
  partition: number;
  from: number;
  to: number;
  messages: number;
  logBytes: number;
  bytes: number;
  fileBytes: number;
  file: string | null;
  gaps: { from: number; to: number }[];
}

export interface Manifest {
  run: number;
  format: 'json' | 'raw';
  gzip: boolean;
  messages: number;
  logBytes: number;
  gaps: { topic: string; brokerId: number; partition: number; from: number; to: number }[];
  partitions: ManifestPartition[];
}

export interface LoadedRun {
  readonly seq: number;
  readonly name: string;
  readonly manifest: Manifest;
  readonly offsets: Record<string, Record<string, number>>;
  readonly messages: Loaded[];
}

/**
 * Reads every committed run of `out` in order, checking that each is complete: offsets.json and
 * manifest.json parse, every file the manifest lists exists and holds its message count, there is
 * no other file, and each partition starts where the previous run's offsets left it.
 * @returns the runs and the names of other entries of `out` (temp directories)
 */
export function readRuns(out: string): { runs: LoadedRun[]; others: string[] } {
  const names = existsSync(out) ? readdirSync(out).sort() : [];
  const runs: LoadedRun[] = [];
  const others: string[] = [];
  let previous: Record<string, Record<string, number>> = {};
  for (const name of names) {
    const m = /^run-(\d{8})$/.exec(name);
    if (!m) {
      others.push(name);
      continue;
    }
    const dir = join(out, name);
    const offsets = JSON.parse(readFileSync(join(dir, 'offsets.json'), 'utf8')) as Record<string, Record<string, number>>;
    const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as Manifest;
    if (manifest.run !== Number(m[1])) throw new Error(`${name}: manifest says run ${manifest.run}`);
    const expectedFiles = new Set(['offsets.json', 'manifest.json']);
    const messages: Loaded[] = [];
    for (const p of manifest.partitions) {
      const key = partitionName(p.brokerId, p.partition);
      const before = previous[p.topic]?.[key];
      const gapTo = p.gaps.at(0)?.from === before ? p.gaps.at(0)?.to : undefined;
      if (before !== undefined && p.from !== before && p.from !== gapTo) {
        throw new Error(`${name}: ${p.topic} ${key} starts at ${p.from}, the previous run ended at ${before}`);
      }
      if (offsets[p.topic]?.[key] !== p.to) throw new Error(`${name}: offsets.json disagrees with the manifest for ${p.topic} ${key}`);
      if (p.file === null) {
        if (p.messages !== 0) throw new Error(`${name}: ${p.topic} ${key} has messages but no file`);
        continue;
      }
      expectedFiles.add(p.file);
      if (statSync(join(dir, p.file)).size !== p.fileBytes) throw new Error(`${name}: ${p.file} is not ${p.fileBytes} bytes`);
      const got = readDataFile(join(dir, p.file), p.topic, key, manifest.format);
      if (got.length !== p.messages) throw new Error(`${name}: ${p.file} holds ${got.length} messages, the manifest says ${p.messages}`);
      for (const g of got) {
        if (g.offset !== null && (g.offset < p.from || g.offset >= p.to)) throw new Error(`${name}: offset ${g.offset} outside [${p.from}, ${p.to})`);
      }
      messages.push(...got);
    }
    const files = listFiles(dir);
    const extra = files.filter((f) => !expectedFiles.has(f));
    if (extra.length > 0) throw new Error(`${name}: unexpected files ${extra.join(', ')}`);
    for (const f of expectedFiles) if (!files.includes(f)) throw new Error(`${name}: ${f} is missing`);
    runs.push({ seq: manifest.run, name, manifest, offsets, messages });
    previous = offsets;
  }
  return { runs, others };
}

function listFiles(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const e of readdirSync(join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix === '' ? e.name : `${prefix}/${e.name}`;
    if (e.isDirectory()) out.push(...listFiles(dir, rel));
    else out.push(rel);
  }
  return out;
}

/** The messages of one data file (jsonl or raw, gzipped when its name ends in .gz). */
export function readDataFile(path: string, topic: string, partition: string, format: 'json' | 'raw'): Loaded[] {
  if (!existsSync(path)) throw new Error(`${path} is missing`);
  let bytes = readFileSync(path);
  if (path.endsWith('.gz')) bytes = gunzipSync(bytes);
  const out: Loaded[] = [];
  let start = 0;
  for (let i = bytes.indexOf(0x0a); i >= 0; i = bytes.indexOf(0x0a, start)) {
    const line = bytes.subarray(start, i);
    start = i + 1;
    if (format === 'raw') {
      out.push({ topic, partition, offset: null, payload: Buffer.from(line) });
      continue;
    }
    const j = JSON.parse(line.toString('utf8')) as { topic: string; brokerId: number; partition: number; offset: number; payload: string };
    if (j.topic !== topic || partitionName(j.brokerId, j.partition) !== partition) throw new Error(`${path}: a line of ${j.topic} ${partitionName(j.brokerId, j.partition)}`);
    out.push({ topic, partition, offset: j.offset, payload: Buffer.from(j.payload, 'base64') });
  }
  if (start !== bytes.length) throw new Error(`${path}: the last line has no newline`);
  return out;
}

/** A partition's name in the loader's output: `<brokerId>-<partition>`, or `<partition>` for a replicated topic's (`brokerId` −1, docs/replication.md §14). */
export const partitionName = (brokerId: number, partition: number): string => (brokerId === -1 ? String(partition) : `${brokerId}-${partition}`);

/** A message as a comparable string: `topic partition payload(hex)`. */
export const id = (m: { topic: string; partition: string; payload: Buffer }): string => `${m.topic} ${m.partition} ${m.payload.toString('hex')}`;

/** The messages grouped per `topic partition`, in the order given. */
export function perPartition(messages: readonly { topic: string; partition: string; payload: Buffer }[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const m of messages) {
    const k = `${m.topic} ${m.partition}`;
    let list = out.get(k);
    if (!list) out.set(k, (list = []));
    list.push(m.payload.toString('hex'));
  }
  return out;
}

/** `count` distinct text payloads `<prefix>-<i>`. */
export const payloads = (prefix: string, count: number, from = 0): Buffer[] =>
  Array.from({ length: count }, (_, i) => Buffer.from(`${prefix}-${from + i}-${'x'.repeat((from + i) % 17)}`));
