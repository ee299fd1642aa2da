/**
 * docs/replication.md §13 and §14: a group consumer and the mirror maker keep working through a
 * leader kill on a replicated topic. 3 brokers, a topic of 4 partitions × RF 3 with
 * min.insync.replicas 2, a producer with `acks all` recording every acknowledgement; a group of 2
 * members (fixtures/member.mjs, @klog/client's GroupConsumer, committing every 200 ms) reading
 * it; and `klog-mirror-maker` as a child process copying it into a target cluster (a second
 * chroot with one broker: a paper topic, auto-created there). The leader of partition 0 is
 * killed with kill -9 mid-run and restarted later.
 *
 * Checks: the group received every acknowledged message at its (partition, offset), duplicates
 * only at or past the last commit of their partition, counted; its commits of
 * `<topic>/<partition>` only move forward, move on after the kill and reach each partition's
 * high watermark; the target holds every acknowledged message; no member and no mirror exits
 * or restarts, and each exits 0 on SIGTERM at the end.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimpleConsumer } from '@klog/client';
import { ClusterReader, countValues, MirrorProcess, mirrorArgs } from '@klog/mirror-maker/testing';
import { removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { BrokerProcess, Member, type Received, counts, waitFor } from './harness.js';
import { type Acked, AckedLoad, ReplicatedCluster } from './replication-cluster.js';
import { CommitSampler, checkDeliveries } from './group-checks.js';

const SESSION_MS = 3000;
const TOPIC = 'events';
const PARTITIONS = 4;
const GROUP = 'readers';
const MIRROR_GROUP = 'mirror';

describe('replication: a group consumer and the mirror maker through a leader kill (docs/replication.md §13, §14)', () => {
  const cluster = new ReplicatedCluster({
    brokers: 3,
    sessionTimeoutMs: SESSION_MS,
    properties: { 'replica.lag.time.max.ms': 4000, 'replica.fetch.wait.max.ms': 200, 'replica.fetch.backoff.ms': 200 },
  });
  let targetConnect = '';
  let targetDir = '';
  const received: Received[] = [];
  const members: Member[] = [];
  let mirror: MirrorProcess | undefined;
  let target: ClusterReader | undefined;

  beforeAll(async () => {
    await cluster.start();
    await cluster.admin.createTopic(TOPIC, { partitions: PARTITIONS, replicationFactor: 3, minInsyncReplicas: 2 });
    await cluster.waitForIsr(TOPIC, PARTITIONS, 3);
    targetConnect = testConnectString('klog-replication-target');
    targetDir = mkdtempSync(join(tmpdir(), 'klog-replication-target-'));
    await new BrokerProcess(0, targetConnect, targetDir, ['--num-partitions', '2', '--flush-ms', '50', '--zk-session-timeout-ms', String(SESSION_MS)]).start();
    target = new ClusterReader(targetConnect);
  });

  afterAll(async () => {
    await target?.close();
    await mirror?.kill9();
    await cluster.close(); // kills every broker and member (the target's broker too)
    if (targetDir !== '') rmSync(targetDir, { recursive: true, force: true });
    if (targetConnect !== '') await removeChroot(targetConnect);
  });

  it('every acknowledged message reaches the group and the target; commits move forward; nothing exits', async () => {
    for (const id of ['m1', 'm2']) members.push(new Member({ zookeeper: cluster.connect, group: GROUP, topic: TOPIC, consumerId: id, sessionTimeoutMs: SESSION_MS }, received));
    for (const m of members) await m.started();
    const mirrorArgv = mirrorArgs([cluster.connect], targetConnect, MIRROR_GROUP, ['--whitelist', TOPIC, '--num-streams', '2', '--acks', '2']);
    const mm = await new MirrorProcess(mirrorArgv).mirroring(1);
    mirror = mm;
    const copies = target!;
    const groupCommits = new CommitSampler(cluster.zk, GROUP, TOPIC, PARTITIONS);
    const mirrorCommits = new CommitSampler(cluster.zk, MIRROR_GROUP, TOPIC, PARTITIONS);
    const load = new AckedLoad(cluster.connect, TOPIC, PARTITIONS).start();

    /** Throws when a member or the mirror maker is no longer running. */
    const alive = (): void => {
      for (const m of members) if (!running(m.proc)) throw new Error(`member ${m.id} exited (${m.proc.exitCode ?? m.proc.signalCode}): ${m.stderr.join('').slice(-1000)}`);
      if (!running(mm.proc)) throw new Error(`the mirror maker exited (${mm.proc.exitCode ?? mm.proc.signalCode}): ${mm.stderr.join('').slice(-1000)}`);
    };
    const groupHas = (list: readonly Acked[], when: string): Promise<void> =>
      waitFor(`the group to receive every acknowledged message ${when}`, () => {
        alive();
        const got = new Set(received.map((r) => `${r.p}@${r.o}=${r.v}`));
        return list.every((a) => got.has(`${a.partition}@${a.offset}=${a.value}`));
      }, 120_000);
    const targetHas = (list: readonly Acked[], when: string): Promise<void> =>
      waitFor(`the target to hold every acknowledged message ${when}`, async () => {
        alive();
        const got = countValues(await copies.poll([TOPIC]));
        return list.every((a) => got.has(a.value));
      }, 120_000);
    const acks = (n: number, when: string): Promise<void> => waitFor(`${n} acknowledged messages ${when}`, () => (alive(), load.count >= n), 60_000);
    const everyPartitionCommitted = (s: CommitSampler): boolean => s.last().every((o) => o !== undefined && o > 0);

    await waitFor('400 acknowledged messages, every partition committed by the group and by the mirror', () => {
      alive();
      return load.count >= 400 && everyPartitionCommitted(groupCommits) && everyPartitionCommitted(mirrorCommits);
    }, 60_000);
    const victim = (await cluster.leaders(TOPIC, PARTITIONS))[0]!;
    const killedAt = Date.now();
    await cluster.brokers[victim]!.kill9();
    const groupAtKill = groupCommits.last();
    const mirrorAtKill = mirrorCommits.last();

    const recoveryMs = await load.succeedsAfter(killedAt, killedAt + 100, 4 * SESSION_MS + 30_000);
    await acks(load.count + 200, 'with the leader dead');
    // Both keep working without the dead broker: what was acknowledged so far arrives before it is back.
    const ackedWhileDead = load.acked.slice();
    await groupHas(ackedWhileDead, 'with the leader dead');
    await targetHas(ackedWhileDead, 'with the leader dead');
    const caughtUpMs = Date.now() - killedAt;

    await cluster.brokers[victim]!.start();
    await cluster.waitForIsr(TOPIC, PARTITIONS, 3, 60_000);
    await acks(load.count + 200, 'after the restart');
    await load.stop();

    // The group and the mirror catch up with everything acknowledged, and commit up to each high watermark.
    const acked = load.acked;
    await groupHas(acked, 'at the end');
    await targetHas(acked, 'at the end');
    const ends = await highWatermarks(cluster, TOPIC, PARTITIONS, (victim + 1) % 3);
    await waitFor('the group\'s and the mirror\'s commits to reach every high watermark', () => {
      alive();
      return [groupCommits, mirrorCommits].every((s) => s.last().every((o, p) => o === ends[p]));
    }, 60_000);
    await groupCommits.stop();
    await mirrorCommits.stop();

    // Commits of <topic>/<partition> only move forward, and moved on after the kill.
    expect(groupCommits.backwards()).toEqual([]);
    expect(mirrorCommits.backwards()).toEqual([]);
    expect([...groupCommits.strayNames, ...mirrorCommits.strayNames]).toEqual([]);
    for (let p = 0; p < PARTITIONS; p++) {
      expect(groupCommits.last()[p]!).toBeGreaterThan(groupAtKill[p]!);
      expect(mirrorCommits.last()[p]!).toBeGreaterThan(mirrorAtKill[p]!);
    }

    // The group: every acknowledged message (checked above), duplicates only at or past a commit.
    const deliveries = checkDeliveries(members, received, TOPIC);
    expect(deliveries.belowCommit).toEqual([]);
    expect(deliveries.paperNamed).toBe(0);

    // The target: every acknowledged message, at least once.
    const inTarget = countValues(copies.messages);
    expect(acked.filter((a) => !inTarget.has(a.value))).toEqual([]);
    const targetDuplicates = [...inTarget.values()].reduce((n, c) => n + c - 1, 0);
    // Values the source log holds twice (a batch the producer sent again across the kill).
    const stored = [...new Map(received.map((r) => [`${r.p}@${r.o}`, r])).values()];
    const sourceTwice = [...counts(stored).values()].reduce((n, c) => n + c - 1, 0);

    // Nobody exited or restarted: each member started once and reported no error; the mirror mirrors its one source once.
    alive();
    for (const m of members) expect(m.errors).toEqual([]);
    expect(mm.logs('mirroring').length).toBe(1);
    console.log(
      `kill -9 of leader ${victim}: producers acknowledged again after ${recoveryMs} ms, the group and the target held everything acknowledged ${caughtUpMs} ms after the kill; ` +
        `${acked.length} acknowledged (${sourceTwice} values stored twice in the source); group received ${received.length} ` +
        `(${deliveries.duplicates} duplicates, all at or past a commit; rebalances ${members.map((m) => `${m.id} ${m.rebalances().length}`).join(', ')}); ` +
        `target holds ${copies.messages.length} (${targetDuplicates} values more than once); ${load.failures.length} failed sends retried by the test`,
    );
    for (const m of members) await m.stop();
    for (const m of members) expect(m.proc.exitCode).toBe(0);
    expect(await mm.stop()).toBe(0);
  });
});

function running(proc: { exitCode: number | null; signalCode: NodeJS.Signals | null }): boolean {
  return proc.exitCode === null && proc.signalCode === null;
}

/** Each partition's high watermark (OFFSETS latest from its leader, found through broker `via`). */
async function highWatermarks(cluster: ReplicatedCluster, topic: string, partitions: number, via: number): Promise<number[]> {
  const consumer = new SimpleConsumer({ host: '127.0.0.1', port: cluster.brokers[via]!.port, retryTimeoutMs: 30_000 });
  try {
    const out: number[] = [];
    for (let p = 0; p < partitions; p++) out.push(await consumer.latestOffset(topic, p));
    return out;
  } finally {
    await consumer.close();
  }
}
