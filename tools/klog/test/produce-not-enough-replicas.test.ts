/**
 * `klog produce --acks all` to a replicated partition whose ISR is below `min.insync.replicas`
 * (docs/replication.md §11, §13.2): two real brokers in this process over the real ZooKeeper, a
 * topic with replication factor 2 and `min.insync.replicas` 2, the follower closed. The leader
 * stays and refuses every send with NotEnoughReplicas; the CLI retries it for at most
 * `notEnoughReplicasTimeoutMs` (not its 30 retries of a leader change) and its summary names the
 * code it retried.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { startBroker, type Broker } from '@klog/broker';
import { Admin, defaultMaxRetries } from '@klog/client';
import { waitFor } from '@klog/retry';
import { ReplicatedTopicRegistry, ZkClient } from '@klog/zk-registry';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { runKlog } from './cli-run.js';

let cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

beforeAll(async () => {
  await assertZooKeeperRunning();
});

async function clusterBroker(connect: string, brokerId: number): Promise<Broker> {
  const logDir = mkdtempSync(join(tmpdir(), `klog-cli-isr-${brokerId}-`));
  const b = await startBroker({ host: '127.0.0.1', port: 0, logDir, brokerId, zookeeper: connect, replicaFetchWaitMaxMs: 100 }, pino({ level: 'silent' }));
  cleanups.push(async () => {
    await b.close(); // closing twice is a no-op
    rmSync(logDir, { recursive: true, force: true });
  });
  return b;
}

describe('--acks all below min.insync.replicas', () => {
  it('klog produce gives up on NotEnoughReplicas within its bound and names the code it retried', async () => {
    const connect = testConnectString('klog-cli-isr');
    const zk = await ZkClient.connect(connect);
    cleanups.push(async () => {
      await zk.close();
      await removeChroot(connect);
    });
    const brokers = new Map<number, Broker>([
      [1, await clusterBroker(connect, 1)],
      [2, await clusterBroker(connect, 2)],
    ]);
    const admin = new Admin({ zookeeper: connect });
    cleanups.push(() => admin.close());
    await admin.createTopic('events', { partitions: 1, replicationFactor: 2, minInsyncReplicas: 2 });
    const registry = new ReplicatedTopicRegistry(zk);
    const state = async () => (await registry.readPartitionState('events', 0))?.state;
    await waitFor('an ISR of 2', async () => (await state())?.isr.length === 2, 30_000);
    const leader = (await state())!.leader;
    const follower = leader === 1 ? 2 : 1;
    await brokers.get(follower)!.close();
    await waitFor('the ISR shrunk to the leader', async () => (await state())?.isr.join() === String(leader), 30_000);

    const started = Date.now();
    const r = await runKlog(['produce', '--zookeeper', connect, '--topic', 'events', '--acks', 'all', '--linger-ms', '0'], 'a\n', 60_000);
    const tookMs = Date.now() - started;
    expect(r.code, r.stderr).toBe(1);
    const summary = r.stderr.split('\n').find((l) => l.startsWith('produced '));
    const m = /0 acknowledged, 1 failed, (\d+) retr(?:y|ies) \((\d+) NotEnoughReplicas\)$/.exec(summary ?? '');
    expect(m, r.stderr).not.toBeNull();
    expect(m![1]).toBe(m![2]);
    // Bounded by the 10 s of NotEnoughReplicas (about 14 retries at the back-off's 1 s), not by maxRetries.
    expect(Number(m![1])).toBeGreaterThanOrEqual(3);
    expect(Number(m![1])).toBeLessThan(defaultMaxRetries);
    expect(r.stderr).toMatch(/gave up after \d+ retries \(last leader \d, last error NotEnoughReplicas\)/);
    expect(r.stderr).not.toMatch(/across leader changes/);
    console.log(`klog produce to an ISR below min.insync.replicas: failed after ${m![1]} retries, ${tookMs} ms`);
  }, 90_000);
});
