/**
 * docs/replication.md §17.7, the controller dies in the middle of elections: 5 brokers, a topic of
 * 250 partitions × RF 3 with min.insync.replicas 2, so that the partitions of one broker are
 * written in two fenced multis (at most 100 partitions each, §3.3) and
 * `controller.batch.delay.ms` holds the controller between them. A leader is killed with kill -9;
 * once the controller's first multi is in ZooKeeper (some of the dead leader's partitions moved,
 * none of them sent to any broker; the others still name the dead leader), the controller is
 * killed with kill -9 (or frozen with SIGSTOP, and resumed after its session expired). Another
 * broker takes over at a higher epoch and sends every live broker the full state (§5.3). Every
 * partition ends with exactly one leader, the same in ZooKeeper, in every live broker's
 * TOPIC_METADATA and in each broker's `klog_partitions_led`; an `acks all` producer running
 * meanwhile loses nothing; the replicas are byte-identical once the dead brokers are back.
 * With SIGSTOP the resumed controller resigns, and no state it would have written lands: the
 * partitions that carry its epoch are at most those of its first multi.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { ControllerInfo } from '@klog/zk-registry';
import { waitFor } from './harness.js';
import { AckedLoad, ReplicatedCluster, checkAcked } from './replication-cluster.js';

const SESSION_MS = 3000;
const BATCH_DELAY_MS = 5000;
const TOPIC = 'events';
const PARTITIONS = 250;
/** The partitions the producer writes to (a few led by each broker). */
/** Each case starts its own cluster of 250 partitions: minutes at a load average of 20. */
const TEST_MS = 480_000;
const LOADED = Array.from({ length: 15 }, (_, p) => p);

let cluster: ReplicatedCluster | undefined;

afterEach(async () => {
  await cluster?.close();
  cluster = undefined;
}, 180_000);

/** 5 brokers and the topic, every ISR full and every broker agreeing on the leaders. */
async function startCluster(): Promise<ReplicatedCluster> {
  cluster = new ReplicatedCluster({
    brokers: 5,
    sessionTimeoutMs: SESSION_MS,
    properties: {
      'controller.batch.delay.ms': BATCH_DELAY_MS,
      'replica.fetch.wait.max.ms': 200,
      'replica.fetch.backoff.ms': 200,
      'segment.bytes': 64 * 1024,
    },
    flags: ['--metrics-port', '0'],
  });
  await cluster.start();
  await cluster.admin.createTopic(TOPIC, { partitions: PARTITIONS, replicationFactor: 3, minInsyncReplicas: 2, timeoutMs: 120_000 });
  await cluster.waitForIsr(TOPIC, PARTITIONS, 3, 120_000);
  await cluster.waitForLeaderAgreement(TOPIC, PARTITIONS, 60_000);
  return cluster;
}

/**
 * Kills a leader that is not the controller, and waits until the controller's first multi of
 * elections is in ZooKeeper while its second is not.
 * @returns the controller, the killed leader, and the partitions the first multi moved
 */
async function killLeaderAndCatchFirstBatch(c: ReplicatedCluster): Promise<{ controller: ControllerInfo; victim: number; moved: number[] }> {
  const controller = (await c.controllerInfo())!;
  const victim = (controller.brokerId + 1) % c.brokers.length;
  const leaders = await c.leaders(TOPIC, PARTITIONS);
  const led = leaders.flatMap((l, p) => (l === victim ? [p] : []));
  await c.brokers[victim]!.kill9();
  let moved: number[] = [];
  await waitFor(
    `the controller's first multi after broker ${victim} died`,
    async () => {
      const now = await c.leaders(TOPIC, PARTITIONS);
      moved = led.filter((p) => now[p] !== victim);
      return moved.length > 0 && moved.length < led.length;
    },
    4 * SESSION_MS + 60_000,
    250,
  );
  return { controller, victim, moved };
}

/** Waits for a controller other than `old`, at a higher epoch. */
async function nextController(c: ReplicatedCluster, old: ControllerInfo): Promise<ControllerInfo> {
  let info: ControllerInfo | undefined;
  await waitFor('another controller', async () => {
    info = await c.controllerInfo();
    return info !== undefined && info.brokerId !== old.brokerId && info.epoch > old.epoch;
  }, 4 * SESSION_MS + 30_000, 200);
  return info!;
}

describe('replication: the controller dies in the middle of elections (docs/replication.md §17.7)', () => {
  it('kill -9 of the controller between two multis: another takes over, every partition has one leader known to every broker, no acknowledged loss', async () => {
    const c = await startCluster();
    const load = new AckedLoad(c.connect, TOPIC, PARTITIONS).start(LOADED);
    await load.waitForCount(300);

    const { controller, victim, moved } = await killLeaderAndCatchFirstBatch(c);
    const killedAt = Date.now();
    await c.brokers[controller.brokerId]!.kill9();
    const stillOnVictim = (await c.leaders(TOPIC, PARTITIONS)).filter((l) => l === victim).length;
    // The second multi never came: part of the dead leader's partitions still name it.
    expect(stillOnVictim).toBeGreaterThan(0);

    const next = await nextController(c, controller);
    const electedMs = Date.now() - killedAt;
    await c.waitForLeaderAgreement(TOPIC, PARTITIONS, 60_000);
    const agreedMs = Date.now() - killedAt;
    for (const leader of await c.leaders(TOPIC, PARTITIONS)) expect([victim, controller.brokerId]).not.toContain(leader);
    console.log(
      `leader ${victim} killed; controller ${controller.brokerId} (epoch ${controller.epoch}) killed after its first multi moved ${moved.length} of its partitions, ${stillOnVictim} left; ` +
        `broker ${next.brokerId} controller at epoch ${next.epoch} after ${electedMs} ms, every broker agreeing after ${agreedMs} ms (session ${SESSION_MS} ms, batch delay ${BATCH_DELAY_MS} ms)`,
    );

    await finish(c, load, [victim, controller.brokerId]);
  }, TEST_MS);

  it('SIGSTOP of the controller between two multis, resumed after its session expired: its writes are fenced and it resigns', async () => {
    const c = await startCluster();
    const load = new AckedLoad(c.connect, TOPIC, PARTITIONS).start(LOADED);
    await load.waitForCount(300);

    const before = await leaderEpochs(c);
    const { controller, victim, moved } = await killLeaderAndCatchFirstBatch(c);
    const old = c.brokers[controller.brokerId]!;
    old.pause();
    const frozenAt = Date.now();
    // Its first multi: the elections and ISR removals it wrote before it froze.
    const firstMulti = await writtenSince(c, controller.epoch, before);
    expect(firstMulti).toEqual(expect.arrayContaining(moved));
    const next = await nextController(c, controller);
    const electedMs = Date.now() - frozenAt;
    // The new controller moves every partition off the dead leader and the frozen one.
    await c.waitForLeaderAgreement(TOPIC, PARTITIONS, 60_000, new Set([controller.brokerId]));

    const resignedBefore = resignations(c, controller.brokerId);
    old.resume();
    await waitFor(`broker ${controller.brokerId} to resign`, () => resignations(c, controller.brokerId) > resignedBefore, 30_000);
    await c.waitForLeaderAgreement(TOPIC, PARTITIONS, 60_000);
    // Nothing the old controller still had to write (its second multi) landed.
    const after = await writtenSince(c, controller.epoch, before);
    expect(after.filter((p) => !firstMulti.includes(p))).toEqual([]);
    expect(await old.metric('klog_active_controller')).toBe(0);
    const active = await Promise.all(c.brokers.filter((b) => b.running).map((b) => b.metric('klog_active_controller')));
    expect(active.reduce((a, b) => a + b, 0)).toBe(1);
    const why = old.logged((l) => l['msg'] === 'resigned as controller').at(-1)?.['reason'];
    console.log(
      `leader ${victim} killed; controller ${controller.brokerId} (epoch ${controller.epoch}) frozen after its first multi wrote ${firstMulti.length} states (${moved.length} elections); ` +
        `broker ${next.brokerId} controller at epoch ${next.epoch} ${electedMs} ms after the freeze; resumed, it resigned (${String(why)})`,
    );

    await finish(c, load, [victim]);
  }, TEST_MS);
});

/** The leader epoch of every partition, by partition. */
async function leaderEpochs(c: ReplicatedCluster): Promise<Map<number, number>> {
  return new Map([...(await c.registry.readPartitionStates(TOPIC))].map(([p, s]) => [p, s.state.leaderEpoch]));
}

/**
 * The partitions whose state the controller of `epoch` wrote since `before` was read: its
 * epoch in the state and a higher leader epoch (every controller write bumps it; a leader's
 * own ISR writes keep both, §3.1).
 */
async function writtenSince(c: ReplicatedCluster, epoch: number, before: ReadonlyMap<number, number>): Promise<number[]> {
  const states = await c.registry.readPartitionStates(TOPIC);
  return [...states].flatMap(([p, s]) => (s.state.controllerEpoch === epoch && s.state.leaderEpoch > (before.get(p) ?? -1) ? [p] : [])).sort((a, b) => a - b);
}

/** How often broker `id` resigned as controller (every run of it). */
function resignations(c: ReplicatedCluster, id: number): number {
  return c.brokers[id]!.logged((l) => l['msg'] === 'resigned as controller').length;
}

/** Restarts the dead brokers, waits for full ISRs, stops the load and checks every acknowledged message and the replicas' files. */
async function finish(c: ReplicatedCluster, load: AckedLoad, dead: readonly number[]): Promise<void> {
  // A partition with both dead brokers among its replicas has one live replica, below min.insync.replicas: acks all waits for them.
  const restartedAt = Date.now();
  for (const id of dead) await c.brokers[id]!.start();
  await c.waitForIsr(TOPIC, PARTITIONS, 3, 120_000);
  await c.waitForLeaderAgreement(TOPIC, PARTITIONS, 60_000);
  await load.succeedsAfter(restartedAt, restartedAt, 60_000);
  await load.waitForCount(load.count + 200);
  await load.stop();
  await c.waitForIdenticalReplicas(TOPIC, PARTITIONS, 60_000);
  const read = await c.readAll(TOPIC, PARTITIONS, (dead[0]! + 1) % c.brokers.length);
  expect(checkAcked(load.acked, read)).toEqual([]);
  console.log(`${load.count} messages acknowledged, ${read.flat().length} read back, ${load.failures.length} failed sends retried by the test, ${load.retries} producer retries`);
}
