/**
 * docs/replication.md §17.3, KIP-101: a follower restarts, and the leader dies before the
 * follower's next fetch. The restarted follower's high watermark is behind its log (it starts
 * at 0: a high watermark is learnt from fetches, never stored), while its log holds, flushed,
 * every message acknowledged with `acks all`. Truncating to that high watermark on becoming
 * follower would cut the acknowledged tail, and the follower, still in the ISR, would then be
 * elected and the tail lost for good. klog's follower truncates only against a leader (§10).
 *
 * A restart that a controller sees takes the broker out of every ISR (§5.3, "a broker back with
 * a new broker epoch"), which rules the scenario out; so the controller, which also leads
 * partitions, is killed with the follower, before the follower's old session expires. The
 * follower F (a short session, so it registers again long before the controller's session
 * expires) is restarted with `replica.fetch.start.delay.ms` far beyond the test: once the next
 * controller is elected, F follows the other live broker B in every ISR it is still part of,
 * waiting before it truncates or fetches; B is killed during that wait. F, the last ISR member
 * alive, leads every partition and must serve every acknowledged message.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from './harness.js';
import { AckedLoad, ReplicatedCluster, checkAcked } from './replication-cluster.js';

/** Session of the controller and of B: long, so that F registers again well before the controller's session expires. */
const LONG_SESSION_MS = 16_000;
/** Session of F: the shortest ZooKeeper allows at its tick of 2 s. */
const SHORT_SESSION_MS = 4000;
const TOPIC = 'kip101';
const PARTITIONS = 4;
/** F's broker id: started last, so never the first controller. */
const F = 2;
/** F's start delay: it never truncates or fetches while the test runs. */
const FETCH_START_DELAY_MS = 600_000;

describe('replication: KIP-101, a follower restarts and its leader dies before its next fetch (docs/replication.md §17.3)', () => {
  let cluster: ReplicatedCluster | undefined;

  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  it('the restarted follower keeps its log, is elected and serves every acknowledged message', async () => {
    cluster = await new ReplicatedCluster({
      brokers: 3,
      sessionTimeoutMs: [LONG_SESSION_MS, LONG_SESSION_MS, SHORT_SESSION_MS],
      // No leader drops F from an ISR while it waits: only the controller changes the ISRs here.
      properties: { 'replica.lag.time.max.ms': 300_000, 'replica.fetch.wait.max.ms': 100, 'replica.fetch.backoff.ms': 200 },
    }).start();
    const c = cluster;
    await c.admin.createTopic(TOPIC, { partitions: PARTITIONS, replicationFactor: 3, minInsyncReplicas: 2 });
    await c.waitForIsr(TOPIC, PARTITIONS, 3);
    const controller = await c.controller();
    expect(controller, 'the first controller is one of the brokers started before F').toBeDefined();
    expect(controller).not.toBe(F);
    const L = controller!;
    const B = 3 - L - F;
    const f = c.brokers[F]!;

    // acks all with the ISR whole: every acknowledged message is flushed on all three replicas.
    const load = new AckedLoad(c.connect, TOPIC, PARTITIONS).start();
    await waitFor('400 messages acknowledged', () => load.count >= 400, 60_000);
    await load.stop();
    expect(load.failures).toEqual([]);

    // F is killed and restarted at once; the controller dies before F's old session expires, so
    // no controller sees F go or come back.
    const restartedAt = f.lines.length;
    const b = c.brokers[B]!;
    await f.kill9();
    const restarted = f.start(['--replica-fetch-start-delay-ms', String(FETCH_START_DELAY_MS)]);
    await c.brokers[L]!.kill9();
    await restarted;

    // The controller's session expires; the next controller elects a leader for every partition
    // L led, from ISRs that still hold F.
    await waitFor('no partition led by the dead controller', async () => (await c.leaders(TOPIC, PARTITIONS)).every((l) => l !== L && l >= 0), 3 * LONG_SESSION_MS);
    for (let p = 0; p < PARTITIONS; p++) expect((await c.state(TOPIC, p))?.isr, `ISR of partition ${p} still holds ${F}`).toContain(F);

    // F follows B in every partition B leads, waiting its start delay: no truncation, no fetch.
    const states = await Promise.all(Array.from({ length: PARTITIONS }, async (_, p) => ({ p, s: (await c.state(TOPIC, p))! })));
    const followed = states.filter(({ s }) => s.leader === B);
    expect(followed.length, `partitions led by ${B}`).toBeGreaterThan(0);
    await waitFor(`${F} following ${B}`, () =>
      followed.every(({ p, s }) => f.logged((l) => l['msg'] === 'following partition' && l['partition'] === p && l['leader'] === B && l['leaderEpoch'] === s.leaderEpoch, restartedAt).length > 0),
    );

    // The leader F follows dies during F's start delay; F is the only ISR member left alive.
    await b.kill9();
    await waitFor(`every partition led by ${F}`, async () => (await c.leaders(TOPIC, PARTITIONS)).every((l) => l === F), 3 * LONG_SESSION_MS);
    // F takes each leadership once the controller's LEADER_AND_ISR reaches it; with the ISR [F] its high watermark is then its log end.
    const epochs = await Promise.all(Array.from({ length: PARTITIONS }, async (_, p) => (await c.state(TOPIC, p))!.leaderEpoch));
    await waitFor(`${F} leading every partition`, () =>
      epochs.every((e, p) => f.logged((l) => l['msg'] === 'leading partition' && l['partition'] === p && l['leaderEpoch'] === e, restartedAt).length > 0),
    );
    expect(f.logged((l) => typeof l['msg'] === 'string' && l['msg'].startsWith('replica log truncated'), restartedAt)).toEqual([]);
    const read = await c.readAll(TOPIC, PARTITIONS, F);
    expect(checkAcked(load.acked, read)).toEqual([]);

    // The others come back as followers of F, truncate against it, catch up; the replicas agree.
    await c.brokers[L]!.start();
    await c.brokers[B]!.start();
    await c.waitForIsr(TOPIC, PARTITIONS, 3, 60_000);
    await c.waitForIdenticalReplicas(TOPIC, PARTITIONS, 30_000);
    expect(checkAcked(load.acked, await c.readAll(TOPIC, PARTITIONS, L))).toEqual([]);
    console.log(`KIP-101: ${load.count} messages acknowledged; ${F} followed ${B} in ${followed.length} partition(s) without truncating, led all ${PARTITIONS} after ${L} and ${B} died, and served all of them`);
  });
});
