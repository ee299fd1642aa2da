/**
 * `klog produce|consume --zookeeper` as users run them, against a real ZooKeeper (a chroot of
 * its own per test) and two in-process brokers in cluster mode: a clean produce to a new topic
 * logs nothing (no ZooKeeper stack trace, however often it runs), and a group consume of a
 * missing topic or through a mistyped chroot says so.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Broker, startBroker } from '@klog/broker';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runKlog } from './cli-run.js';

describe('klog with --zookeeper', () => {
  let zookeeper: string;
  let work: string;
  let brokers: Broker[];

  beforeAll(async () => {
    await assertZooKeeperRunning();
    zookeeper = testConnectString();
    work = mkdtempSync(join(tmpdir(), 'klog-cli-cluster-io-'));
    brokers = await Promise.all(
      [0, 1].map((brokerId) =>
        startBroker(
          { logDir: join(work, `broker-${brokerId}`), host: '127.0.0.1', port: 0, brokerId, zookeeper, numPartitions: 2, flushIntervalMs: 20 },
          pino({ level: 'silent' }),
        ),
      ),
    );
  });
  afterAll(async () => {
    for (const b of brokers) await b.close();
    await removeChroot(zookeeper);
    rmSync(work, { recursive: true, force: true });
  });

  it('a successful produce to a new topic prints the summary and nothing else, run after run', async () => {
    // The ZooKeeper session used to close under a topic watch's read about one run in five.
    for (let i = 0; i < 15; i++) {
      const r = await runKlog(['produce', '--zookeeper', zookeeper, '--topic', `fresh-${i}`, '--acks', '1'], 'one\ntwo\n');
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr, `run ${i}`).toMatch(/^produced 2 messages .*: 2 sent, 2 acknowledged, 0 failed\n$/);
    }
  }, 120_000);

  it('group consume of a missing topic, or through a mistyped chroot, is one line and exit 1', async () => {
    const missing = await runKlog(['consume', '--zookeeper', zookeeper, '--group', 'g', '--topic', 'nope', '--idle-timeout-ms', '1000']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/^klog consume: error: unknown topic "nope" \(known: fresh-0, fresh-1, .*\) in ZooKeeper at 127\.0\.0\.1:\d+\/\S+\n$/);
    const typo = await runKlog(['consume', '--zookeeper', `${zookeeper}-typo`, '--group', 'g', '--topic', 'fresh-0', '--idle-timeout-ms', '1000']);
    expect(typo.code).toBe(1);
    expect(typo.stderr).toMatch(/^klog consume: error: unknown topic "fresh-0" \(known: none\) in ZooKeeper at \S+-typo, where no broker is registered \(is the chroot right\?\)\n$/);
  });

  it('group consume prints offsets and kcat-like formats with the broker-partition', async () => {
    const r = await runKlog(['consume', '--zookeeper', zookeeper, '--group', 'fmt', '--topic', 'fresh-3', '--from-beginning', '--max-messages', '2', '--print-offsets']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trimEnd().split('\n').sort()).toEqual(expect.arrayContaining([expect.stringMatching(/^\d+\t(one|two)$/)]));
    const f = await runKlog(['consume', '--zookeeper', zookeeper, '--group', 'fmt2', '--topic', 'fresh-4', '--from-beginning', '--max-messages', '2', '--format', '%t %p %o %s\\n']);
    expect(f.code, f.stderr).toBe(0);
    for (const line of f.stdout.trimEnd().split('\n')) expect(line).toMatch(/^fresh-4 [01]-[01] \d+ (one|two)$/);
  });
});
