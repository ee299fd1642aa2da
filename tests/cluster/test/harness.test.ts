/**
 * The process controls of the harness (test/harness.ts) on a real broker over the real
 * ZooKeeper: SIGSTOP freezes it until its session expires, SIGCONT brings it back on a new
 * session, SIGTERM stops it cleanly (its registration goes at once), and it restarts on the
 * same log dir with the messages it held.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZkProducer } from '@klog/client';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { type BrokerProcess, ZkClient, killAll, removeLogDirs, startBrokers, waitFor } from './harness.js';
import { replicaBytes, replicaDir } from './replica-files.js';

const SESSION_MS = 2000;

describe('harness: broker processes', () => {
  let connect: string;
  let zk: ZkClient;
  let brokers: BrokerProcess[] = [];

  beforeAll(async () => {
    await assertZooKeeperRunning();
    connect = testConnectString('klog-cluster');
    zk = await ZkClient.connect(connect);
    brokers = await startBrokers(connect, 1, ['--num-partitions', '1', '--flush-messages', '1', '--zk-session-timeout-ms', String(SESSION_MS)]);
  });

  afterAll(async () => {
    await killAll();
    await zk?.close();
    removeLogDirs(brokers);
    await removeChroot(connect);
  });

  it('pause, resume, terminate and restart on the same log dir', async () => {
    const b = brokers[0]!;
    const producer = new ZkProducer({ zookeeper: connect, acks: 2 });
    try {
      await producer.send('h', [{ value: 'one' }, { value: 'two' }]);
    } finally {
      await producer.close();
    }
    const held = await replicaBytes(replicaDir(b.logDir, 'h', 0));
    expect(held).toBeGreaterThan(0);
    const session = (await zk.exists('/brokers/ids/0'))!.ephemeralOwner;

    b.pause();
    await waitFor('the frozen broker\'s registration to expire', async () => (await zk.exists('/brokers/ids/0')) === undefined, 4 * SESSION_MS + 5000);
    expect(b.running).toBe(true);
    b.resume();
    await waitFor('the broker back on a new session', async () => {
      const owner = (await zk.exists('/brokers/ids/0'))?.ephemeralOwner;
      return owner !== undefined && owner !== session;
    }, 20_000);

    const stoppedAt = Date.now();
    expect(await b.terminate()).toBe(0);
    expect(b.running).toBe(false);
    // A clean stop closes its session: the registration goes at once, not after the session timeout.
    await waitFor('registration removed', async () => (await zk.exists('/brokers/ids/0')) === undefined, SESSION_MS);
    expect(Date.now() - stoppedAt).toBeLessThan(SESSION_MS + 1000);

    await b.start();
    await waitFor('registered again', async () => (await zk.exists('/brokers/ids/0')) !== undefined, 10_000);
    expect(await replicaBytes(replicaDir(b.logDir, 'h', 0))).toBe(held);
    expect(b.logged((l) => l['msg'] === 'broker listening')).toHaveLength(2);
  });
});
