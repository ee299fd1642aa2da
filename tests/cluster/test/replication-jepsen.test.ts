/**
 * docs/replication.md §17.2, Jepsen 2013: both followers of a partition are frozen with SIGSTOP
 * longer than replica.lag.time.max.ms, the leader shrinks the ISR to itself, then dies.
 * With min.insync.replicas 2 every `acks all` produce after the shrink is refused
 * (NotEnoughReplicas) and the partition goes offline rather than elect a replica that is not in
 * the ISR; the old leader, restarted, is elected again and holds every acknowledged message.
 * With min.insync.replicas 1 the leader acknowledges alone after the shrink, and those messages
 * survive because the partition waits for it. With unclean election, a follower is elected, what
 * the leader acknowledged alone is lost and counted, and the replicas agree again.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { sleep, waitFor } from './harness.js';
import { AckedLoad, ReplicatedCluster, checkAcked } from './replication-cluster.js';

const SESSION_MS = 8000;
const LAG_MS = 1500;
const PARTITIONS = 4;
const PROPERTIES = { 'replica.lag.time.max.ms': LAG_MS, 'replica.fetch.wait.max.ms': 100, 'replica.fetch.backoff.ms': 200 };

describe('replication: Jepsen 2013, the ISR shrinks to the leader and the leader dies (docs/replication.md §17.2)', () => {
  let cluster: ReplicatedCluster | undefined;

  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  for (const minIsr of [2, 1]) {
    it(`min.insync.replicas ${minIsr}: nothing acknowledged is lost; the partition waits offline for its last ISR member`, async () => {
      cluster = await new ReplicatedCluster({
        brokers: 3,
        sessionTimeoutMs: SESSION_MS,
        properties: PROPERTIES,
      }).start();
      const topic = `jepsen${minIsr}`;
      await cluster.admin.createTopic(topic, { partitions: PARTITIONS, replicationFactor: 3, minInsyncReplicas: minIsr });
      await cluster.waitForIsr(topic, PARTITIONS, 3);
      const leader = (await cluster.leaders(topic, PARTITIONS))[0]!;
      const followers = cluster.brokers.filter((b) => b.id !== leader);

      // Short retries: a refused send is seen as refused, not retried for a minute.
      const load = new AckedLoad(cluster.connect, topic, PARTITIONS, 5, 1500).start([0]);
      await waitFor('some acknowledged on partition 0', () => load.countOf(0) >= 50, 30_000);
      for (const f of followers) f.pause();
      await waitFor('the ISR of partition 0 shrunk to its leader', async () => (await cluster!.state(topic, 0))?.isr.join() === String(leader), 10 * LAG_MS);
      const ackedAtShrink = load.countOf(0);
      await sleep(1500);
      if (minIsr === 2) {
        // Refused whole with NotEnoughReplicas: nothing acknowledged after the shrink.
        expect(load.countOf(0) - ackedAtShrink).toBeLessThanOrEqual(5);
        // The refusal reaches the test once the producer's retries (1.5 s) give up on it.
        await waitFor('a send refused with NotEnoughReplicas', () => load.failures.some((f) => f.message.includes('NotEnoughReplicas')), 10_000).catch((e: Error) => {
          throw new Error(`${e.message}; failures: ${JSON.stringify(load.failures.slice(-3))}`);
        });
      } else {
        // The leader acknowledges alone.
        await waitFor('acknowledged by the leader alone', () => load.countOf(0) >= ackedAtShrink + 20, 10_000);
      }

      await cluster.brokers[leader]!.kill9();
      for (const f of followers) f.resume();
      await load.stop();
      // The only ISR member is dead: once its session expires the partition is offline, and stays so.
      await waitFor('partition 0 offline', async () => (await cluster!.state(topic, 0))?.leader === -1, 3 * SESSION_MS);
      await sleep(3000);
      expect((await cluster.state(topic, 0))?.leader).toBe(-1);

      // The old leader comes back, is elected (it holds every committed message), and serves them all.
      await cluster.brokers[leader]!.start();
      await waitFor('partition 0 led again', async () => (await cluster!.state(topic, 0))?.leader === leader, 30_000);
      await cluster.waitForIsr(topic, PARTITIONS, 3, 60_000);
      await cluster.waitForIdenticalReplicas(topic, PARTITIONS, 30_000);
      const read = await cluster.readAll(topic, PARTITIONS, leader);
      expect(checkAcked(load.acked, read)).toEqual([]);
      console.log(`min.insync.replicas ${minIsr}: ${load.countOf(0)} acknowledged on partition 0 (${load.countOf(0) - ackedAtShrink} after the shrink), all read back`);
    });
  }

  it('unclean election: a follower is elected, what the leader acknowledged alone is lost and counted, the replicas agree again', async () => {
    cluster = await new ReplicatedCluster({ brokers: 3, sessionTimeoutMs: SESSION_MS, properties: PROPERTIES, flags: ['--metrics-port', '0'] }).start();
    const topic = 'unclean';
    await cluster.admin.createTopic(topic, { partitions: PARTITIONS, replicationFactor: 3, minInsyncReplicas: 1, uncleanLeaderElection: true });
    await cluster.waitForIsr(topic, PARTITIONS, 3);
    const leaders = await cluster.leaders(topic, PARTITIONS);
    const leader = leaders[0]!;
    const led = leaders.flatMap((l, p) => (l === leader ? [p] : []));
    const followers = cluster.brokers.filter((b) => b.id !== leader);
    const load = new AckedLoad(cluster.connect, topic, PARTITIONS, 5, 1500).start([0]);
    await waitFor('some acknowledged on partition 0', () => load.countOf(0) >= 50, 30_000);
    // Acknowledged before the freeze: flushed on all three replicas.
    const ackedBefore = load.acked.slice(0, load.acked.length);
    for (const f of followers) f.pause();
    // Every partition it leads (partition 0 and the idle ones) is left with the leader alone: each
    // election after its death is then unclean, and the count below is exact.
    await waitFor(`the ISRs of partitions ${led.join(', ')} shrunk to their leader`, async () => {
      const states = await Promise.all(led.map((p) => cluster!.state(topic, p)));
      return states.every((s) => s?.isr.join() === String(leader));
    }, 10 * LAG_MS);
    await waitFor('acknowledged by the leader alone', () => load.countOf(0) >= ackedBefore.length + 20, 10_000);
    await cluster.brokers[leader]!.kill9();
    for (const f of followers) f.resume();
    await load.stop();

    // Once the leader's session expires, a live replica outside the ISR is elected.
    await waitFor('partition 0 led by a follower', async () => {
      const s = await cluster!.state(topic, 0);
      return s !== undefined && s.leader >= 0 && s.leader !== leader;
    }, 4 * SESSION_MS);
    let unclean = 0;
    await waitFor('the unclean elections counted', async () => {
      unclean = (await Promise.all(followers.map((f) => f.metric('klog_unclean_leader_elections_total')))).reduce((a, b) => a + b, 0);
      return unclean >= led.length;
    }, 10_000).catch(async (e: Error) => {
      const states = await Promise.all(led.map(async (p) => ({ p, ...(await cluster!.state(topic, p)) })));
      throw new Error(`${e.message}: ${unclean} counted for partitions ${JSON.stringify(states)}\n${cluster!.problems()}`);
    });
    expect(unclean).toBe(led.length);

    // The old leader comes back as a follower, truncates what the new leader never had, and catches up.
    await cluster.brokers[leader]!.start();
    await cluster.waitForIsr(topic, PARTITIONS, 3, 60_000);
    await cluster.waitForIdenticalReplicas(topic, PARTITIONS, 30_000);
    const read = await cluster.readAll(topic, PARTITIONS, followers[0]!.id);
    // Everything acknowledged while the ISR was whole survives; of what the leader acknowledged alone, some is lost.
    expect(checkAcked(ackedBefore, read)).toEqual([]);
    const lost = checkAcked(load.acked, read).length;
    expect(lost).toBeGreaterThan(0);
    console.log(`unclean election: ${lost} of ${load.countOf(0) - ackedBefore.length} messages the leader acknowledged alone lost, ${unclean} unclean election(s) counted`);
  });
});
