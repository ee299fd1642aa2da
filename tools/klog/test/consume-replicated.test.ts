/**
 * `klog consume --broker` (simple mode) and `klog offsets` on a replicated topic
 * (docs/replication.md §13.1): any broker of the cluster will do; the partitions are `0..N-1`
 * and each is read from its leader, also one the asked broker does not hold. Two in-process
 * brokers in cluster mode over the real ZooKeeper, `klog` as a child process.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Broker, startBroker } from '@klog/broker';
import { Admin, ZkProducer } from '@klog/client';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { klog } from './load-helpers.js';

describe('klog consume --broker and klog offsets on a replicated topic', () => {
  let zookeeper: string;
  let work: string;
  let brokers: Broker[] = [];

  beforeAll(async () => {
    await assertZooKeeperRunning();
    zookeeper = testConnectString('klog-consume-repl');
    work = mkdtempSync(join(tmpdir(), 'klog-consume-repl-'));
    for (const brokerId of [0, 1]) {
      brokers.push(
        await startBroker(
          { logDir: join(work, `broker-${brokerId}`), host: '127.0.0.1', port: 0, brokerId, zookeeper, numPartitions: 1, zkSessionTimeoutMs: 4000, controlledShutdownRetryBackoffMs: 100 },
          pino({ level: 'silent' }),
        ),
      );
    }
    const admin = new Admin({ zookeeper });
    // RF 1 over two brokers: each broker holds one of the two partitions only.
    await admin.createTopic('events', { partitions: 2, replicationFactor: 1 });
    await admin.close();
    const producer = new ZkProducer({ zookeeper, acks: 'all', lingerMs: 0 });
    try {
      await producer.send('events', Array.from({ length: 10 }, (_, i) => ({ value: `e-${i}`, partition: i % 2 })));
    } finally {
      await producer.close();
    }
  }, 60_000);
  afterAll(async () => {
    for (const b of brokers) await b.close();
    brokers = [];
    await removeChroot(zookeeper);
    rmSync(work, { recursive: true, force: true });
  }, 60_000);

  it('reads every partition through any broker, and refuses a partition past the last', async () => {
    for (const b of brokers) {
      const broker = `127.0.0.1:${b.port}`;
      for (const partition of [0, 1]) {
        const r = await klog(['consume', '--broker', broker, '--topic', 'events', '--partition', String(partition), '--offset', 'earliest', '-e']);
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout.split('\n').filter((l) => l !== '')).toEqual(Array.from({ length: 5 }, (_, i) => `e-${2 * i + partition}`));
        const o = await klog(['offsets', '--broker', broker, '--topic', 'events', '--partition', String(partition), '--time', 'latest']);
        expect(o.code, o.stderr).toBe(0);
        expect(Number(o.stdout.trim())).toBeGreaterThan(0);
      }
      const past = await klog(['consume', '--broker', broker, '--topic', 'events', '--partition', '2', '--offset', 'earliest', '-e']);
      expect(past.code).toBe(1);
      expect(past.stderr).toMatch(/unknown topic "events"|partition 2/);
    }
  }, 120_000);
});
