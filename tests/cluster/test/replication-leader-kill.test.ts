/**
 * docs/replication.md §17.1, leader kill -9 under load: 3 brokers, a topic of 4 partitions × RF 3
 * with min.insync.replicas 2, a producer with `acks all` on every partition recording every
 * acknowledgement. The leader of a partition is killed with kill -9; the controller elects
 * another ISR member once the session expires, producers ride through, the killed broker
 * restarts on its log dir, truncates and rejoins. Zero acknowledged messages lost, and every
 * replica's segment files are byte-identical after recovery.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep } from './harness.js';
import { AckedLoad, ReplicatedCluster, checkAcked } from './replication-cluster.js';

const SESSION_MS = 3000;
const TOPIC = 'events';
const PARTITIONS = 4;

describe('replication: leader kill -9 under load (docs/replication.md §17.1)', () => {
  const cluster = new ReplicatedCluster({
    brokers: 3,
    sessionTimeoutMs: SESSION_MS,
    properties: { 'replica.lag.time.max.ms': 4000, 'replica.fetch.wait.max.ms': 200, 'replica.fetch.backoff.ms': 200, 'segment.bytes': 64 * 1024 },
  });

  beforeAll(async () => {
    await cluster.start();
    await cluster.admin.createTopic(TOPIC, { partitions: PARTITIONS, replicationFactor: 3, minInsyncReplicas: 2 });
    await cluster.waitForIsr(TOPIC, PARTITIONS, 3);
  });

  afterAll(async () => {
    await cluster.close();
  });

  it('loses no acknowledged message and leaves byte-identical replicas', async () => {
    const load = new AckedLoad(cluster.connect, TOPIC, PARTITIONS).start();
    await waitForAcks(load, 400);
    const victim = (await cluster.leaders(TOPIC, PARTITIONS))[0]!;
    const ledByVictim = (await cluster.leaders(TOPIC, PARTITIONS)).filter((l) => l === victim).length;
    const killedAt = Date.now();
    await cluster.brokers[victim]!.kill9();
    const ackedAtKill = load.count;

    // A new leader for every partition the victim led, from its ISR; writes go on with ISR 2 = min.insync.replicas.
    const recoveryMs = await load.succeedsAfter(killedAt + 100, 4 * SESSION_MS + 20_000);
    console.log(`kill -9 of leader ${victim} (leading ${ledByVictim} of ${PARTITIONS}): every partition acknowledged again after ${recoveryMs} ms (session timeout ${SESSION_MS} ms)`);
    expect(recoveryMs).toBeLessThan(2 * SESSION_MS + 5000);
    for (const leader of await cluster.leaders(TOPIC, PARTITIONS)) expect(leader === victim || leader < 0).toBe(false);
    await waitForAcks(load, load.count + 200);

    // The victim restarts on its log dir, truncates against the new leaders and rejoins every ISR.
    await cluster.brokers[victim]!.start();
    await cluster.waitForIsr(TOPIC, PARTITIONS, 3, 60_000);
    await waitForAcks(load, load.count + 200);
    await load.stop();
    expect(load.count).toBeGreaterThan(ackedAtKill);

    await cluster.waitForIdenticalReplicas(TOPIC, PARTITIONS, 30_000);
    const read = await cluster.readAll(TOPIC, PARTITIONS, (victim + 1) % 3);
    expect(checkAcked(load.acked, read)).toEqual([]);
    console.log(`${load.count} messages acknowledged, ${read.flat().length} read back, ${load.failures.length} failed sends retried by the test`);
  });
});

async function waitForAcks(load: AckedLoad, n: number, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (load.count < n) {
    if (Date.now() > deadline) throw new Error(`only ${load.count} of ${n} messages acknowledged after ${timeoutMs} ms; last failures: ${JSON.stringify(load.failures.slice(-3))}`);
    await sleep(50);
  }
}
