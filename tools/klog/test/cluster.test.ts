/**
 * The cluster commands as users run them: `klog produce|consume|topics|groups --zookeeper`
 * as child processes against a real ZooKeeper and two in-process brokers in cluster mode
 * (2 partitions each), each test in its own chroot (docs/design.md §4, §6).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Broker, startBroker } from '@klog/broker';
import { allPartitions, BrokerRegistry, OffsetRegistry, ZkClient } from '@klog/zk-registry';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { hashPartitioner } from '@klog/client';
import { pino } from 'pino';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';

const main = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

interface Spawned {
  /** Resolves when the process exits. */
  done: Promise<Run>;
  /** Resolves once stdout holds at least `n` lines. */
  lines(n: number): Promise<void>;
  kill(signal: NodeJS.Signals): void;
}

function start(args: string[], input = ''): Spawned {
  const child = spawn(process.execPath, [main, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const lineWaiters: Array<{ n: number; resolve: () => void }> = [];
  child.stdout.on('data', (b: Buffer) => {
    out += b.toString();
    const have = out.split('\n').length - 1;
    for (const w of lineWaiters.filter((x) => have >= x.n)) {
      lineWaiters.splice(lineWaiters.indexOf(w), 1);
      w.resolve();
    }
  });
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  const done = new Promise<Run>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: out, stderr: err });
    });
  });
  child.stdin.on('error', () => {});
  child.stdin.end(input);
  return {
    done,
    lines: (n) =>
      out.split('\n').length - 1 >= n ? Promise.resolve() : new Promise((resolve) => lineWaiters.push({ n, resolve })),
    kill: (signal) => child.kill(signal),
  };
}

const klog = (args: string[], input?: string): Promise<Run> => start(args, input).done;

function expectOneLineError(r: Run, pattern: RegExp): void {
  expect(r.code).not.toBe(0);
  expect(r.code).not.toBeNull();
  expect(r.stderr.trimEnd().split('\n'), r.stderr).toHaveLength(1);
  expect(r.stderr).toMatch(pattern);
}

/** Bytes a message with a payload of `n` bytes takes in the log. */
const messageBytes = (n: number): number => 4 + 1 + 1 + 4 + n;

/** The fields of `topics --describe --json` and `groups --describe --json` read here. */
interface TopicJson {
  partitions: { logEnd: number }[];
}
interface GroupJson {
  consumers: { consumerId: string }[];
  partitions: { owner: string | null; lag: number | null; logEnd: number | null; consumerId: string | null; host: string | null }[];
}

/**
 * No owner, and lag 0 wherever there was something to read. Keyless lines go to a sticky
 * partition per batch (docs/design.md §5), so a partition may have got none: it has no committed
 * offset, and no lag (null), as Kafka's tools show "-" there.
 */
function expectAllCommitted(rows: GroupJson['partitions']): void {
  expect(rows.some((r) => r.logEnd !== null && r.logEnd > 0)).toBe(true);
  for (const row of rows) {
    expect(row.owner, JSON.stringify(row)).toBeNull();
    if (row.logEnd === 0) expect([0, null], JSON.stringify(row)).toContain(row.lag);
    else expect(row.lag, JSON.stringify(row)).toBe(0);
  }
}

describe('klog cluster commands', () => {
  let zookeeper: string;
  let work: string;
  let brokers: Broker[];
  let zk: ZkClient;

  beforeAll(async () => {
    await assertZooKeeperRunning();
  });
  beforeEach(async () => {
    zookeeper = testConnectString();
    work = mkdtempSync(join(tmpdir(), 'klog-cli-cluster-'));
    brokers = await Promise.all(
      [0, 1].map((brokerId) =>
        startBroker(
          { logDir: join(work, `broker-${brokerId}`), host: '127.0.0.1', port: 0, brokerId, zookeeper, numPartitions: 2 },
          pino({ level: 'silent' }),
        ),
      ),
    );
    zk = await ZkClient.connect(zookeeper);
  });
  afterEach(async () => {
    await zk.close();
    for (const b of brokers) await b.close();
    await removeChroot(zookeeper);
    rmSync(work, { recursive: true, force: true });
  });

  it('produce --zookeeper creates the topic on both brokers and partitions by key over the sorted list', async () => {
    const lines = Array.from({ length: 40 }, (_, i) => `key${i % 8}|value ${i}`);
    const p = await klog(['produce', '--zookeeper', zookeeper, '--topic', 'events', '--key-separator', '|', '--acks', '2'], `${lines.join('\n')}\n`);
    expect(p.code, p.stderr).toBe(0);
    expect(p.stderr).toMatch(/^produced 40 messages/m); // after the warning that keys are not stored
    const counts = await new BrokerRegistry(zk).topicPartitions('events');
    expect(counts).toEqual([
      { brokerId: 0, partitions: 2 },
      { brokerId: 1, partitions: 2 },
    ]);
    const list = allPartitions(counts);
    // Read every partition back with the simple consumer: each key in its hashed partition, in order.
    for (const [i, { brokerId, partition }] of list.entries()) {
      const c = await klog(['consume', '--broker', `127.0.0.1:${brokers[brokerId]!.port}`, '--topic', 'events', '--partition', String(partition), '--idle-timeout-ms', '500']);
      expect(c.code, c.stderr).toBe(0);
      const expected = lines.filter((l) => hashPartitioner(Buffer.from(l.split('|')[0]!), 4) === i).map((l) => l.split('|')[1]);
      expect(c.stdout).toBe(expected.map((v) => `${v}\n`).join(''));
    }
  });

  it('topics lists the topics and describes brokers, partitions and log end offsets', async () => {
    // 3 messages to each partition, through the static-list producer so the layout is known.
    for (const [i, b] of brokers.entries()) {
      for (const partition of [0, 1]) {
        const r = await klog(['produce', '--broker-list', `127.0.0.1:${b.port}`, '--topic', 'clicks', '--partition', String(partition), '--acks', '2'], 'a\nbb\n'.repeat(i + partition + 1));
        expect(r.code, r.stderr).toBe(0);
      }
    }
    await klog(['produce', '--zookeeper', zookeeper, '--topic', 'other', '--acks', '1'], 'x\n');
    const list = await klog(['topics', '--zookeeper', zookeeper]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toBe('clicks\nother\n');

    const d = await klog(['topics', '--zookeeper', zookeeper, '--describe', 'clicks']);
    expect(d.code, d.stderr).toBe(0);
    const end = (repeats: number): number => repeats * (messageBytes(1) + messageBytes(2));
    const [a0, a1] = [`127.0.0.1:${brokers[0]!.port}`, `127.0.0.1:${brokers[1]!.port}`];
    const rows = d.stdout.split('\n').map((l) => l.trim().split(/\s+/));
    expect(d.stdout.split('\n')[0]).toBe('topic clicks: 4 partitions on 2 brokers');
    expect(rows).toContainEqual(['0', a0, '2']);
    expect(rows).toContainEqual(['1', a1, '2']);
    expect(rows).toContainEqual(['0-0', '0', a0, String(end(1))]);
    expect(rows).toContainEqual(['0-1', '0', a0, String(end(2))]);
    expect(rows).toContainEqual(['1-0', '1', a1, String(end(2))]);
    expect(rows).toContainEqual(['1-1', '1', a1, String(end(3))]);

    const j = JSON.parse((await klog(['topics', '--zookeeper', zookeeper, '--describe', 'clicks', '--json'])).stdout) as TopicJson;
    expect(j.partitions.map((p: { logEnd: number }) => p.logEnd)).toEqual([end(1), end(2), end(2), end(3)]);

    expectOneLineError(await klog(['topics', '--zookeeper', zookeeper, '--describe', 'nope']), /topic nope is not registered/);
  });

  it('groups lists groups and describes committed offsets, log ends and lag', async () => {
    for (const [brokerId, b] of brokers.entries()) {
      for (const partition of [0, 1]) {
        await klog(['produce', '--broker-list', `127.0.0.1:${b.port}`, '--topic', 'orders', '--partition', String(partition), '--acks', '2'], 'order\n'.repeat(4 + brokerId));
      }
    }
    const perMessage = messageBytes(5);
    const offsets = new OffsetRegistry(zk);
    await offsets.commit('billing', 'orders', { brokerId: 0, partition: 0 }, 0);
    await offsets.commit('billing', 'orders', { brokerId: 0, partition: 1 }, 2 * perMessage);
    await offsets.commit('billing', 'orders', { brokerId: 1, partition: 0 }, 5 * perMessage);
    // 1-1 has no committed offset.
    await offsets.commit('audit', 'orders', { brokerId: 0, partition: 0 }, perMessage);

    const list = await klog(['groups', '--zookeeper', zookeeper]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toBe('audit\nbilling\n');

    const d = await klog(['groups', '--zookeeper', zookeeper, '--describe', 'billing']);
    expect(d.code, d.stderr).toBe(0);
    const rows = d.stdout.split('\n').map((l) => l.trim().split(/\s+/));
    expect(d.stdout).toMatch(/^group billing: 0 consumers\n/);
    // kafka-consumer-groups' columns; PARTITION counts the brokers' partitions in broker-id order.
    expect(rows).toContainEqual(['GROUP', 'TOPIC', 'PARTITION', 'CURRENT-OFFSET', 'LOG-END-OFFSET', 'LAG(BYTES)', 'LAG(MESSAGES)', 'CONSUMER-ID', 'HOST']);
    expect(rows).toContainEqual(['billing', 'orders', '0', '0', String(4 * perMessage), String(4 * perMessage), '4', '-', '-']);
    expect(rows).toContainEqual(['billing', 'orders', '1', String(2 * perMessage), String(4 * perMessage), String(2 * perMessage), '2', '-', '-']);
    expect(rows).toContainEqual(['billing', 'orders', '2', String(5 * perMessage), String(5 * perMessage), '0', '0', '-', '-']);
    expect(rows).toContainEqual(['billing', 'orders', '3', '-', String(5 * perMessage), '-', '-', '-', '-']);

    const j = JSON.parse((await klog(['groups', '--zookeeper', zookeeper, '--describe', 'billing', '--json'])).stdout) as GroupJson;
    const none = { group: 'billing', topic: 'orders', owner: null, consumerId: null, host: null, lagMessagesEstimated: false };
    expect(j.partitions).toEqual([
      { ...none, brokerId: 0, partition: 0, partitionNumber: 0, offset: 0, logEnd: 4 * perMessage, lag: 4 * perMessage, lagMessages: 4 },
      { ...none, brokerId: 0, partition: 1, partitionNumber: 1, offset: 2 * perMessage, logEnd: 4 * perMessage, lag: 2 * perMessage, lagMessages: 2 },
      { ...none, brokerId: 1, partition: 0, partitionNumber: 2, offset: 5 * perMessage, logEnd: 5 * perMessage, lag: 0, lagMessages: 0 },
      { ...none, brokerId: 1, partition: 1, partitionNumber: 3, offset: null, logEnd: 5 * perMessage, lag: null, lagMessages: null },
    ]);

    // A lag of more than one fetch's worth (1 MiB) is estimated from the messages of the first MiB, and marked so.
    const line = 'y'.repeat(199);
    await klog(['produce', '--broker-list', `127.0.0.1:${brokers[0]!.port}`, '--topic', 'bulk', '--partition', '0', '--acks', '2'], `${line}\n`.repeat(6000));
    await offsets.commit('estimates', 'bulk', { brokerId: 0, partition: 0 }, 0);
    const e = await klog(['groups', '--zookeeper', zookeeper, '--describe', 'estimates']);
    expect(e.code, e.stderr).toBe(0);
    const bulk = e.stdout.split('\n').map((l) => l.trim().split(/\s+/)).find((r) => r[0] === 'estimates' && r[2] === '0')!;
    expect(bulk.slice(3, 6)).toEqual(['0', String(6000 * messageBytes(199)), String(6000 * messageBytes(199))]);
    expect(bulk[6]).toMatch(/^~\d+$/);
    expect(Math.abs(Number(bulk[6]!.slice(1)) - 6000)).toBeLessThanOrEqual(1);
    expect(e.stdout).toMatch(/^~ estimated from the messages in the first 1048576 bytes/m);

    expectOneLineError(await klog(['groups', '--zookeeper', zookeeper, '--describe', 'ghost']), /group ghost does not exist/);
  });

  it('consume --zookeeper --group prints every message once, commits what it printed, and resumes there', async () => {
    const lines = Array.from({ length: 60 }, (_, i) => `m${i}`);
    const p = await klog(['produce', '--zookeeper', zookeeper, '--topic', 'jobs', '--acks', '2'], `${lines.join('\n')}\n`);
    expect(p.code, p.stderr).toBe(0);

    // Stop at 25 of 60: exactly 25 printed, and the committed offsets cover exactly those.
    const first = await klog(['consume', '--zookeeper', zookeeper, '--group', 'workers', '--topic', 'jobs', '--from-beginning', '--streams', '2', '--max-messages', '25']);
    expect(first.code, first.stderr).toBe(0);
    const got1 = first.stdout.split('\n').filter((l) => l !== '');
    expect(got1).toHaveLength(25);

    // The rest, from the group's committed offsets (and from the beginning where the first run
    // printed nothing): no message twice, none lost.
    const second = await klog(['consume', '--zookeeper', zookeeper, '--group', 'workers', '--topic', 'jobs', '--from-beginning', '--idle-timeout-ms', '2000']);
    expect(second.code, second.stderr).toBe(0);
    const got2 = second.stdout.split('\n').filter((l) => l !== '');
    expect([...got1, ...got2].sort()).toEqual([...lines].sort());

    // groups --describe: everything committed, lag 0 everywhere.
    const j = JSON.parse((await klog(['groups', '--zookeeper', zookeeper, '--describe', 'workers', '--json'])).stdout) as GroupJson;
    expect(j.partitions).toHaveLength(4);
    expectAllCommitted(j.partitions);
  });

  it('consume --zookeeper --group commits what it printed on SIGINT', async () => {
    const lines = Array.from({ length: 30 }, (_, i) => `s${i}`);
    await klog(['produce', '--zookeeper', zookeeper, '--topic', 'signals', '--acks', '2'], `${lines.join('\n')}\n`);
    const c = start(['consume', '--zookeeper', zookeeper, '--group', 'g', '--topic', 'signals', '--from-beginning', '--commit-interval-ms', '60000']);
    await c.lines(30);
    // The group is live while it runs: owners are listed.
    const during = JSON.parse((await klog(['groups', '--zookeeper', zookeeper, '--describe', 'g', '--json'])).stdout) as GroupJson;
    expect(during.consumers).toHaveLength(1);
    expect(during.partitions.every((r: { owner: string | null }) => r.owner?.startsWith(during.consumers[0]!.consumerId))).toBe(true);
    for (const row of during.partitions) expect(row).toMatchObject({ consumerId: during.consumers[0]!.consumerId, host: hostname() });
    c.kill('SIGINT');
    const r = await c.done;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n').filter((l) => l !== '').sort()).toEqual([...lines].sort());
    const after = JSON.parse((await klog(['groups', '--zookeeper', zookeeper, '--describe', 'g', '--json'])).stdout) as GroupJson;
    expect(after.consumers).toHaveLength(0);
    expectAllCommitted(after.partitions);
  });

  it('rejects bad input with one line and has --help for each command', async () => {
    expectOneLineError(await klog(['consume', '--broker', '127.0.0.1:1', '--zookeeper', zookeeper, '--topic', 't']), /does not go with --zookeeper/);
    expectOneLineError(await klog(['consume', '--zookeeper', zookeeper, '--topic', 't']), /--zookeeper and --group/);
    expectOneLineError(await klog(['consume', '--zookeeper', zookeeper, '--group', 'g', '--topic', 't', '--offset', '5']), /does not go with --offset/);
    expectOneLineError(await klog(['produce', '--topic', 't']), /exactly one of --broker-list and --zookeeper/);
    expectOneLineError(await klog(['produce', '--zookeeper', zookeeper, '--topic', 't', '--partition', '1']), /--partition applies to --broker-list/);
    expectOneLineError(await klog(['topics', '--zookeeper', '127.0.0.1:2181//x']), /invalid chroot/);
    expectOneLineError(await klog(['groups']), /--zookeeper/);
    for (const command of ['topics', 'groups', 'consume', 'produce']) {
      const h = await klog([command, '--help']);
      expect(h.code).toBe(0);
      expect(h.stdout).toMatch(/--zookeeper <connect>/);
    }
  });
});
