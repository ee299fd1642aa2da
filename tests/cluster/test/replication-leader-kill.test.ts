/**
 * docs/replication.md §17.1, leader kill -9 under load, 20 times: 3 brokers, a topic of 4
 * partitions × RF 3 with min.insync.replicas 2, a producer with `acks all` on every partition
 * recording every acknowledgement. Each round waits a random moment of the load, picks a random
 * partition, asks ZooKeeper for its leader and kills that broker with kill -9; the controller
 * elects another ISR member once the session expires, producers ride through, the killed broker
 * restarts on its log dir, truncates and rejoins, and the next round starts once every ISR is
 * full again. At the end: every acknowledged message is read back at its offset, in order per
 * partition, and every replica's segment files are byte-identical.
 *
 * The failover time of a kill is the time from the SIGKILL until every partition has
 * acknowledged (acks all) a send that the producer started after the killed process had exited:
 * the latest, over the partitions, of each partition's first such acknowledgement, minus the
 * time of the kill. Every partition counts, not only those the killed broker led: it was a
 * follower in the ISR of the others, whose `acks all` produces wait until it leaves the ISR.
 * Its p50 (nearest rank) and max over the 20 kills must stay under 2 × the session timeout.
 *
 * The seed of the random choices is printed; KLOG_TEST_SEED=<seed> replays them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seededRandom, sleep, testSeed } from './harness.js';
import { AckedLoad, ReplicatedCluster, checkAcked } from './replication-cluster.js';

const SESSION_MS = 3000;
const TOPIC = 'events';
const PARTITIONS = 4;
const KILLS = 20;
/** Each kill lands at a random moment up to this long into the load of its round, ms. */
const MAX_MOMENT_MS = 2000;

/** The nearest-rank percentile `q` (0..1] of `values`. */
function percentile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!;
}

describe('replication: leader kill -9 under load, 20 times (docs/replication.md §17.1)', () => {
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

  it('loses no acknowledged message, leaves byte-identical replicas, and fails over within 2 × the session timeout', async () => {
    const seed = testSeed();
    const random = seededRandom(seed);
    console.log(`leader kills: seed ${seed} (KLOG_TEST_SEED=${seed} replays the choices), session timeout ${SESSION_MS} ms`);
    const load = new AckedLoad(cluster.connect, TOPIC, PARTITIONS).start();
    await load.waitForCount(200);

    const failovers: number[] = [];
    for (let round = 1; round <= KILLS; round++) {
      await sleep(Math.floor(random() * MAX_MOMENT_MS));
      const partition = Math.floor(random() * PARTITIONS);
      const leaders = await cluster.leaders(TOPIC, PARTITIONS);
      const victim = leaders[partition]!;
      const controller = await cluster.controller();
      const killedAt = Date.now();
      await cluster.brokers[victim]!.kill9();
      const exitedAt = Date.now();

      // A new leader from the ISR for every partition the victim led; the victim leaves every ISR; writes go on with ISR 2.
      const failoverMs = await load.succeedsAfter(killedAt, exitedAt, 4 * SESSION_MS + 20_000);
      failovers.push(failoverMs);
      const after = await cluster.leaders(TOPIC, PARTITIONS);
      expect(after.filter((l) => l < 0 || l === victim), `leaders after the kill of ${victim}: ${JSON.stringify(after)}`).toEqual([]);

      // The victim restarts on its log dir, truncates against the new leaders and rejoins every ISR.
      const restartedAt = Date.now();
      await cluster.brokers[victim]!.start();
      await cluster.waitForIsr(TOPIC, PARTITIONS, 3, 60_000);
      const led = leaders.filter((l) => l === victim).length;
      // The controller notices the death when the session expires; a killed controller is replaced at that moment.
      const seen = cluster.firstLogged(victim === controller ? 'became controller' : 'brokers changed', killedAt);
      const elected = cluster.firstLogged('leader elected', killedAt);
      const since = (t: number | undefined): string => (t === undefined ? '?' : String(t - killedAt));
      console.log(
        `kill ${round}: partition ${partition}, leader ${victim} (led ${led} of ${PARTITIONS}${victim === controller ? ', the controller' : ''}): ` +
          `${victim === controller ? 'new controller' : 'controller saw it gone'} after ${since(seen)} ms, first leader elected after ${since(elected)} ms, ` +
          `producers succeed on every partition after ${failoverMs} ms; restarted, every ISR full after ${Date.now() - restartedAt} ms`,
      );
    }
    await load.waitForCount(load.count + 200);
    await load.stop();

    const p50 = percentile(failovers, 0.5);
    const max = Math.max(...failovers);
    console.log(`failover over ${KILLS} kills: ${failovers.join(', ')} ms; p50 ${p50} ms, max ${max} ms (bound 2 × ${SESSION_MS} ms)`);

    await cluster.waitForIdenticalReplicas(TOPIC, PARTITIONS, 30_000);
    const via = (await cluster.leaders(TOPIC, PARTITIONS))[0]!;
    const read = await cluster.readAll(TOPIC, PARTITIONS, via);
    expect(checkAcked(load.acked, read)).toEqual([]);
    const values = read.flat().map((m) => m.value);
    const duplicates = values.length - new Set(values).size;
    console.log(`${load.count} messages acknowledged, ${values.length} read back (${duplicates} stored twice by a producer's retry), ${load.failures.length} failed sends`);
    expect(load.failures).toEqual([]);
    expect(max).toBeLessThan(2 * SESSION_MS);
  }, 600_000);
});
