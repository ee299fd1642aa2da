/**
 * `klog load` on a replicated topic (docs/replication.md §14, docs/loader.md): its partitions are
 * `0..N-1`, named `<partition>` in offsets.json, the manifest and the data files (`brokerId` −1),
 * read from each partition's leader, also after the leader moved; a replicated partition without
 * a live leader fails the run. Two in-process brokers in cluster mode (their controller creates
 * the partitions) over the real ZooKeeper, `klog load` as a child process.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Broker, startBroker } from '@klog/broker';
import { Admin, ZkProducer } from '@klog/client';
import { waitFor } from '@klog/retry';
import { ReplicatedTopicRegistry, ZkClient } from '@klog/zk-registry';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { pino } from 'pino';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { id, klog, readRuns, type Run, waitForRegistration } from './load-helpers.js';

describe('klog load on a replicated topic', () => {
  let zookeeper: string;
  let work: string;
  let out: string;
  let zk: ZkClient;
  let brokers: Array<Broker | undefined>;

  const start = (brokerId: number): Promise<Broker> =>
    startBroker(
      { logDir: join(work, `broker-${brokerId}`), host: '127.0.0.1', port: 0, brokerId, zookeeper, numPartitions: 2, zkSessionTimeoutMs: 4000, controlledShutdownRetryBackoffMs: 100 },
      pino({ level: 'silent' }),
    );
  const load = (...extra: string[]): Promise<Run> => klog(['load', '--zookeeper', zookeeper, '--out', out, '--topic', 'events|clicks', ...extra]);
  const leaders = async (topic: string, n: number): Promise<number[]> => {
    const states = await new ReplicatedTopicRegistry(zk).readPartitionStates(topic);
    return Array.from({ length: n }, (_, p) => states.get(p)?.state.leader ?? -1);
  };
  /** Sends `values` with acks all, record i to partition i mod `partitions` (0: a paper topic, created on both brokers, records spread by the producer). */
  const produce = async (topic: string, values: readonly string[], partitions: number): Promise<void> => {
    const producer = new ZkProducer({ zookeeper, acks: 'all', lingerMs: 0 });
    try {
      if (partitions === 0) {
        await producer.partitions(topic);
        await waitForRegistration(zookeeper, topic, [0, 1]);
      }
      await producer.send(topic, values.map((value, i) => ({ value, ...(partitions > 0 && { partition: i % partitions }) })));
    } finally {
      await producer.close();
    }
  };

  beforeAll(async () => {
    await assertZooKeeperRunning();
  });
  beforeEach(async () => {
    zookeeper = testConnectString('klog-load-repl');
    work = mkdtempSync(join(tmpdir(), 'klog-load-repl-'));
    out = join(work, 'out');
    zk = await ZkClient.connect(zookeeper);
    brokers = [await start(0), await start(1)];
  });
  afterEach(async () => {
    for (const b of brokers) await b?.close();
    await zk.close();
    await removeChroot(zookeeper);
    rmSync(work, { recursive: true, force: true });
  });

  it('names replicated partitions <partition> beside paper ones, and goes on from the new leader after a move', async () => {
    const admin = new Admin({ zookeeper });
    await admin.createTopic('events', { partitions: 2, replicationFactor: 2, minInsyncReplicas: 1 });
    await admin.close();
    const values = (prefix: string, n: number, from = 0): string[] => Array.from({ length: n }, (_, i) => `${prefix}-${from + i}`);
    await produce('events', values('e', 40), 2);
    await produce('clicks', values('c', 10), 0);

    const first = await load();
    expect(first.code, first.stderr).toBe(0);
    let { runs } = readRuns(out);
    expect(runs).toHaveLength(1);
    const run1 = runs[0]!;
    expect(Object.keys(run1.offsets['events']!)).toEqual(['0', '1']);
    expect(Object.keys(run1.offsets['clicks']!).every((k) => /^\d+-\d+$/.test(k))).toBe(true);
    const files = run1.manifest.partitions.filter((p) => p.topic === 'events').map((p) => [p.brokerId, p.partition, p.file]);
    expect(files).toEqual([[-1, 0, 'events/0.jsonl'], [-1, 1, 'events/1.jsonl']]);
    const loadedEvents = run1.messages.filter((m) => m.topic === 'events');
    expect(loadedEvents.map((m) => m.partition).sort()).toEqual([...Array<string>(20).fill('0'), ...Array<string>(20).fill('1')]);
    expect(new Set(loadedEvents.map((m) => m.payload.toString()))).toEqual(new Set(values('e', 40)));

    // The leader of partition 0 leaves (controlled shutdown): the next run reads on from the other replica.
    await produce('events', values('e', 20, 40), 2);
    await waitFor('both replicas in every ISR', async () => [...(await new ReplicatedTopicRegistry(zk).readPartitionStates('events')).values()].every((n) => n.state.isr.length === 2), 20_000);
    const [leader0] = await leaders('events', 2);
    await brokers[leader0!]!.close();
    brokers[leader0!] = undefined;
    await waitFor('partition 0 led by the other broker', async () => (await leaders('events', 2)).every((l) => l === 1 - leader0!), 20_000);
    await produce('events', values('e', 20, 60), 2);
    const second = await load('--topic', 'events');
    expect(second.code, second.stderr).toBe(0);
    ({ runs } = readRuns(out)); // checks that each run starts where the last one ended
    expect(runs).toHaveLength(2);
    const all = runs.flatMap((r) => r.messages).filter((m) => m.topic === 'events');
    expect(all.map((m) => m.payload.toString()).sort()).toEqual(values('e', 80).sort());
    expect(new Set(all.map(id)).size).toBe(all.length);
    expect(runs[1]!.offsets['clicks']).toEqual(run1.offsets['clicks']); // kept although --topic no longer matches it
  });

  it('fails, committing nothing, while a replicated partition has no live leader', async () => {
    const admin = new Admin({ zookeeper });
    await admin.createTopic('events', { partitions: 2, replicationFactor: 1, minInsyncReplicas: 1 });
    await admin.close();
    await produce('events', ['a', 'b', 'c', 'd'], 2);
    const ok = await load();
    expect(ok.code, ok.stderr).toBe(0);
    const [, leader1] = await leaders('events', 2);
    await brokers[leader1!]!.close();
    brokers[leader1!] = undefined;
    await waitFor('partition 1 offline', async () => (await leaders('events', 2))[1] === -1, 20_000);
    const r = await load();
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr.trimEnd().split('\n'), r.stderr).toHaveLength(1);
    expect(r.stderr).toMatch(/replicated partitions without a live leader \(offline\): events 1; nothing committed/);
    expect(readRuns(out).runs).toHaveLength(1);
  });
});
