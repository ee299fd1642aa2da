/**
 * Replicated partitions between brokers (docs/replication.md §9, §10, §11): three brokers in
 * this process, real sockets, real files, the real ZooKeeper; roles given by LEADER_AND_ISR and
 * STOP_REPLICA sent over the wire, as the controller sends them.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  AckLevel,
  Decoder,
  ErrorCode,
  OffsetTime,
  decodeOffsetsResponse,
  encodeFetchRequest,
  encodeMessageSet,
  encodeOffsetsRequest,
  encodeProduceRequest,
  iterateMessageSet,
} from '@klog/protocol';
import { removePartitionStateOps, removeTopicOps } from '@klog/zk-registry';
import { assertZooKeeperRunning, expireSession } from '@klog/zk-registry/testing';
import { existsSync, readdirSync } from 'node:fs';
import { filesOf, payloads, produce, TestCluster, waitFor } from './replication-helpers.js';

const topic = 'events';
let cluster: TestCluster;

beforeAll(async () => {
  await assertZooKeeperRunning();
});

afterEach(async () => {
  await cluster?.stop();
});

/** A topic of one partition on brokers 1, 2, 3 with leader 1, every broker told its role. */
async function replicated(minIsr: number, settings: Parameters<TestCluster['start']>[1] = {}, to = [1, 2, 3]): Promise<void> {
  cluster = new TestCluster();
  await cluster.start([1, 2, 3], settings);
  await cluster.createTopic(topic, [[1, 2, 3]], minIsr);
  expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], to, minIsr)).toEqual(to.map(() => ErrorCode.None));
}

const partitionOf = (id: number) => cluster.broker(id).replicas.get(topic, 0)!;

async function fullIsr(): Promise<void> {
  await waitFor('the ISR to hold every replica', async () => (await cluster.state(topic, 0)).state.isr.length === 3 && partitionOf(1).isr.length === 3);
}

describe('replication between brokers', () => {
  it('followers catch up, join the ISR, and their segment files are byte-identical to the leader’s', async () => {
    await replicated(2, { segmentBytes: 4096 });
    const c = await cluster.client(1);
    await fullIsr();
    expect((await cluster.state(topic, 0)).state.isNew).toBe(false);
    for (let i = 0; i < 30; i++) expect((await produce(c, topic, 0, payloads(20, 50, `b${i}-`))).errorCode).toBe(ErrorCode.None);
    const leaderLog = partitionOf(1).log!;
    expect(leaderLog.segmentCount).toBeGreaterThan(3);
    await leaderLog.flush();
    await waitFor('followers at the leader’s log end', () => [2, 3].every((id) => partitionOf(id).log!.visibleEnd === leaderLog.logEndOffset));
    await waitFor('the high watermark at the log end', () => partitionOf(1).highWatermark === leaderLog.logEndOffset);
    const leaderFiles = filesOf(cluster.replicaDir(1, topic, 0));
    expect([...leaderFiles.keys()].filter((n) => n.endsWith('.kafka')).length).toBe(leaderLog.segmentCount);
    for (const id of [2, 3]) expect(filesOf(cluster.replicaDir(id, topic, 0))).toEqual(leaderFiles);
    expect(await cluster.broker(1).metrics.value('klog_partitions_led')).toBe(1);
    expect(await cluster.broker(1).metrics.value('klog_isr_expands_total')).toBeGreaterThanOrEqual(1);
  });

  it('acks all is answered only once every ISR member flushed the set, and after a stopped follower left the ISR', async () => {
    await replicated(2, { replicaLagTimeMaxMs: 1500 });
    const c = await cluster.client(1);
    await fullIsr();
    const r = await produce(c, topic, 0, payloads(5, 100), AckLevel.All);
    expect(r.errorCode).toBe(ErrorCode.None);
    for (const id of [2, 3]) expect(partitionOf(id).log!.visibleEnd).toBeGreaterThanOrEqual(r.nextOffset);

    // Broker 3 stops fetching: an acks all produce waits until the leader drops it from the ISR.
    expect(await cluster.stopReplica(topic, 0, 3, partitionOf(3).leaderEpoch)).toBe(ErrorCode.None);
    const sent = Date.now();
    const waited = await produce(c, topic, 0, payloads(5, 100, 'late'), AckLevel.All);
    expect(waited.errorCode).toBe(ErrorCode.None);
    expect(Date.now() - sent).toBeGreaterThanOrEqual(1000);
    expect(partitionOf(3).log!.logEndOffset).toBeLessThan(waited.nextOffset);
    expect(partitionOf(2).log!.visibleEnd).toBeGreaterThanOrEqual(waited.nextOffset);
    expect((await cluster.state(topic, 0)).state.isr).toEqual([1, 2]);
    expect(await cluster.broker(1).metrics.value('klog_isr_shrinks_total')).toBe(1);
    expect(await cluster.broker(1).metrics.value('klog_under_replicated_partitions')).toBe(1);
  });

  it('refuses acks all with NotEnoughReplicas, appending nothing, while the ISR is below min.insync.replicas', async () => {
    await replicated(2, {}, [1]); // the followers are never told: the ISR stays [1]
    const c = await cluster.client(1);
    await waitFor('the leader to accept produces', () => partitionOf(1).isLeader);
    const log = partitionOf(1).log!;
    const r = await produce(c, topic, 0, payloads(3, 10), AckLevel.All);
    expect(r.errorCode).toBe(ErrorCode.NotEnoughReplicas);
    expect(log.logEndOffset).toBe(0);
    expect(await cluster.broker(1).metrics.value('klog_under_min_isr_partitions')).toBe(1);
    // acks 1 still appends.
    expect((await produce(c, topic, 0, payloads(3, 10))).errorCode).toBe(ErrorCode.None);
    expect(log.logEndOffset).toBeGreaterThan(0);
    // A broker that does not lead answers NotLeaderForPartition.
    expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], [2], 2)).toEqual([ErrorCode.None]);
    const follower = await cluster.client(2);
    expect((await produce(follower, topic, 0, payloads(1, 10))).errorCode).toBe(ErrorCode.NotLeaderForPartition);
    // A fire-and-forget set sent to a follower is dropped and counted.
    follower.send(encodeProduceRequest({ topic, partition: 0, messages: encodeMessageSet(payloads(1, 10)) }));
    await waitFor('the dropped set to be counted', async () => (await cluster.broker(2).metrics.value('klog_errors_total', { code: 'NotLeaderForPartition' })) >= 2);
    expect(partitionOf(2).log!.logEndOffset).toBeLessThanOrEqual(log.logEndOffset);
  });

  it('answers the acks all produces waiting on a leader that is stopped with NotLeaderForPartition', async () => {
    await replicated(2);
    const c = await cluster.client(1);
    await fullIsr();
    for (const id of [2, 3]) await cluster.stopReplica(topic, 0, id, 0);
    const waiting = produce(c, topic, 0, payloads(2, 10), AckLevel.All);
    await new Promise((r) => setTimeout(r, 200));
    expect(await cluster.stopReplica(topic, 0, 1, 0)).toBe(ErrorCode.None);
    expect((await waiting).errorCode).toBe(ErrorCode.NotLeaderForPartition);
  });

  it('a leader given a new epoch with a smaller ISR keeps its high watermark and the acks all produces waiting on the replica that left', async () => {
    await replicated(2, { replicaLagTimeMaxMs: 60_000 }); // the leader itself never shrinks the ISR here
    const c = await cluster.client(1);
    await fullIsr();
    const first = await produce(c, topic, 0, payloads(5, 100), AckLevel.All);
    expect(first.errorCode).toBe(ErrorCode.None);
    const hw = partitionOf(1).highWatermark;
    expect(hw).toBe(first.nextOffset);

    // Broker 3 stops fetching: an acks all produce waits on it.
    expect(await cluster.stopReplica(topic, 0, 3, partitionOf(3).leaderEpoch)).toBe(ErrorCode.None);
    const waiting = produce(c, topic, 0, payloads(5, 100, 'waiting'), AckLevel.All);
    await waitFor('the waiting set to be appended', () => partitionOf(1).log!.logEndOffset > first.nextOffset);

    // The controller takes broker 3 out of the ISR (as when it died): a new epoch, the same leader.
    await cluster.elect(topic, 0, 1, [1, 2]);
    expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], [1, 2], 2)).toEqual([ErrorCode.None, ErrorCode.None]);
    expect(partitionOf(1).leaderEpoch).toBe(1);
    expect(partitionOf(1).highWatermark).toBeGreaterThanOrEqual(hw); // §9.5: never backwards
    const latest = await c.request(encodeOffsetsRequest({ topic, partition: 0, time: OffsetTime.Latest, maxOffsets: 1 }));
    expect(decodeOffsetsResponse(new Decoder(latest.body))[0]).toBeGreaterThanOrEqual(hw);
    const waited = await waiting;
    expect(waited.errorCode).toBe(ErrorCode.None); // answered by the new ISR's high watermark, not retried
    expect(partitionOf(2).log!.visibleEnd).toBeGreaterThanOrEqual(waited.nextOffset);
  });

  it('consumers never see past the high watermark; between it and the log end they get an empty set', async () => {
    await replicated(1);
    const c = await cluster.client(1);
    await fullIsr();
    const first = await produce(c, topic, 0, payloads(4, 20), AckLevel.All);
    expect(first.errorCode).toBe(ErrorCode.None);
    // The followers stop: the leader's log end moves on, the high watermark does not.
    for (const id of [2, 3]) await cluster.stopReplica(topic, 0, id, partitionOf(id).leaderEpoch);
    const second = await produce(c, topic, 0, payloads(4, 20, 'unsafe'), AckLevel.Appended);
    await partitionOf(1).log!.flush();
    const hw = partitionOf(1).highWatermark;
    expect(hw).toBe(first.nextOffset);
    expect(partitionOf(1).log!.visibleEnd).toBe(second.nextOffset);
    const fetched = await c.request(encodeFetchRequest({ topic, partition: 0, offset: 0, maxBytes: 1 << 20 }));
    expect(fetched.code).toBe(ErrorCode.None);
    expect(fetched.body.length).toBe(hw);
    expect([...iterateMessageSet(fetched.body)].every((m) => !m.message.payload.toString().startsWith('unsafe'))).toBe(true);
    const atHw = await c.request(encodeFetchRequest({ topic, partition: 0, offset: second.offset, maxBytes: 1 << 20 }));
    expect(atHw).toEqual({ code: ErrorCode.None, body: Buffer.alloc(0) });
    const past = await c.request(encodeFetchRequest({ topic, partition: 0, offset: second.nextOffset + 1000, maxBytes: 100 }));
    expect(past.code).toBe(ErrorCode.OffsetOutOfRange);
    const latest = await c.request(encodeOffsetsRequest({ topic, partition: 0, time: OffsetTime.Latest, maxOffsets: 5 }));
    expect(decodeOffsetsResponse(new Decoder(latest.body))[0]).toBe(hw);
    const onFollower = await (await cluster.client(2)).request(encodeFetchRequest({ topic, partition: 0, offset: 0, maxBytes: 100 }));
    expect(onFollower.code).toBe(ErrorCode.NotLeaderForPartition);
    const offsetsOnFollower = await (await cluster.client(2)).request(encodeOffsetsRequest({ topic, partition: 0, time: OffsetTime.Latest, maxOffsets: 5 }));
    expect(offsetsOnFollower.code).toBe(ErrorCode.NotLeaderForPartition);
    // A long poll at the high watermark is answered when the high watermark moves past it.
    const poll = c.request(encodeFetchRequest({ topic, partition: 0, offset: hw, maxBytes: 1 << 20, maxWaitMs: 5000 }));
    await new Promise((r) => setTimeout(r, 100));
    expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], [2, 3], 1)).toEqual([ErrorCode.None, ErrorCode.None]);
    const polled = await poll;
    expect(polled.code).toBe(ErrorCode.None);
    expect(polled.body.length).toBe(second.nextOffset - hw);
  });

  it('a follower with a diverged tail truncates it via OFFSET_FOR_LEADER_EPOCH and fetches the leader’s bytes (KIP-279)', async () => {
    await replicated(1);
    const a = await cluster.client(1);
    await fullIsr();
    const m1 = await produce(a, topic, 0, payloads(3, 30, 'm1-'), AckLevel.All);
    // B (2) stops fetching; A (1) writes m2 at epoch 0, which C (3) fetches.
    await cluster.stopReplica(topic, 0, 2, 0);
    const m2 = await produce(a, topic, 0, payloads(3, 30, 'm2-'));
    await partitionOf(1).log!.flush();
    await waitFor('C to hold m2', () => partitionOf(3).log!.visibleEnd === m2.nextOffset);
    // Epoch 1: B leads alone and writes m3 where A and C hold m2.
    await cluster.stopReplica(topic, 0, 1, 0);
    await cluster.stopReplica(topic, 0, 3, 0);
    await cluster.elect(topic, 0, 2, [2]);
    expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], [2], 1)).toEqual([ErrorCode.None]);
    const b = await cluster.client(2);
    const m3 = await produce(b, topic, 0, payloads(2, 50, 'm3-'));
    expect(m3.offset).toBe(m1.nextOffset);
    await partitionOf(2).log!.flush();
    // Epoch 2: C leads (it never had epoch 1); A and B follow it.
    await cluster.elect(topic, 0, 3, [3, 1]);
    expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], [3, 1, 2], 1)).toEqual([ErrorCode.None, ErrorCode.None, ErrorCode.None]);
    const c = await cluster.client(3);
    const m4 = await produce(c, topic, 0, payloads(2, 30, 'm4-'));
    await partitionOf(3).log!.flush();
    await waitFor('every replica at C’s log end', () => [1, 2].every((id) => partitionOf(id).log!.visibleEnd === m4.nextOffset));
    const cFiles = filesOf(cluster.replicaDir(3, topic, 0));
    for (const id of [1, 2]) expect(filesOf(cluster.replicaDir(id, topic, 0))).toEqual(cFiles);
    expect(partitionOf(2).log!.leaderEpochs.entries).toEqual([
      { epoch: 0, startOffset: 0 },
      { epoch: 2, startOffset: m2.nextOffset },
    ]);
    expect(await cluster.broker(2).metrics.value('klog_truncated_bytes_total')).toBe(m3.nextOffset - m3.offset);
    expect(await cluster.broker(1).metrics.value('klog_truncated_bytes_total')).toBe(0);
  });

  it('a restarted follower keeps its whole log until a leader says otherwise, and serves every acknowledged message once elected (KIP-101)', async () => {
    await replicated(2);
    const a = await cluster.client(1);
    await fullIsr();
    const acked = await produce(a, topic, 0, payloads(5, 40), AckLevel.All);
    expect(acked.errorCode).toBe(ErrorCode.None);
    // B (2) restarts and waits before it truncates or fetches (its high watermark, learnt anew, is 0).
    await cluster.restart(2, { replicaFetchStartDelayMs: 60_000 });
    expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], [2], 2)).toEqual([ErrorCode.None]);
    expect(partitionOf(2).role).toBe('follower');
    expect(partitionOf(2).log!.logEndOffset).toBe(acked.nextOffset);
    // The leader goes before B's first fetch; B, still in the ISR, is elected.
    await cluster.stopReplica(topic, 0, 1, 0);
    await cluster.stopReplica(topic, 0, 3, 0);
    await cluster.elect(topic, 0, 2, [2, 3]);
    expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], [2, 3], 2)).toEqual([ErrorCode.None, ErrorCode.None]);
    await waitFor('B’s high watermark at the acknowledged end', () => partitionOf(2).highWatermark >= acked.nextOffset);
    const fetched = await (await cluster.client(2)).request(encodeFetchRequest({ topic, partition: 0, offset: 0, maxBytes: 1 << 20 }));
    expect(fetched.code).toBe(ErrorCode.None);
    expect(fetched.body.length).toBe(acked.nextOffset);
    expect(await cluster.broker(2).metrics.value('klog_truncated_bytes_total')).toBe(0);
  });

  it('a follower told its leader again at the same epoch but a new address fetches from the new address', async () => {
    await replicated(2);
    await fullIsr();
    // The leader restarts on a new port within its epoch (no controller saw it go) and is told again of the same state.
    await cluster.restart(1);
    expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], [1, 2, 3], 2)).toEqual([ErrorCode.None, ErrorCode.None, ErrorCode.None]);
    const acked = await produce(await cluster.client(1), topic, 0, payloads(5, 40), AckLevel.Flushed);
    expect(acked.errorCode).toBe(ErrorCode.None);
    await waitFor('both followers at the leader’s log end', () => [2, 3].every((id) => partitionOf(id).log!.logEndOffset === acked.nextOffset));
  });

  it('a follower whose latest epoch wrote nothing drops that epoch and fetches from the next leader', async () => {
    await replicated(1);
    const a = await cluster.client(1);
    await fullIsr();
    const m1 = await produce(a, topic, 0, payloads(3, 20), AckLevel.All);
    // Broker 2 leads epoch 1 and writes nothing; broker 3 leads epoch 2.
    await cluster.stopReplica(topic, 0, 1, 0);
    await cluster.elect(topic, 0, 2, [2, 3]);
    expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], [2], 1)).toEqual([ErrorCode.None]);
    expect(partitionOf(2).log!.leaderEpochs.latestEpoch).toBe(1);
    await cluster.elect(topic, 0, 3, [3, 2]);
    expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], [3, 2, 1], 1)).toEqual([ErrorCode.None, ErrorCode.None, ErrorCode.None]);
    const m2 = await produce(await cluster.client(3), topic, 0, payloads(3, 20, 'n'));
    await partitionOf(3).log!.flush();
    await waitFor('broker 2 to fetch from broker 3', () => partitionOf(2).log!.visibleEnd === m2.nextOffset, 5000);
    expect(partitionOf(2).log!.leaderEpochs.entries).toEqual([
      { epoch: 0, startOffset: 0 },
      { epoch: 2, startOffset: m1.nextOffset },
    ]);
    expect(filesOf(cluster.replicaDir(2, topic, 0))).toEqual(filesOf(cluster.replicaDir(3, topic, 0)));
  });

  it('drops a zombie fetch answer of an old epoch, and fetches again only once the leader has the new one', async () => {
    await replicated(1, { replicaFetchWaitMaxMs: 3000 });
    const a = await cluster.client(1);
    await fullIsr();
    const first = await produce(a, topic, 0, payloads(2, 20), AckLevel.All);
    await new Promise((r) => setTimeout(r, 200)); // broker 2's next fetch (epoch 0) is now parked at the leader
    // Broker 2 learns of epoch 1 (same leader) before the leader does.
    await cluster.elect(topic, 0, 1, [1, 2, 3]);
    expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], [2], 1)).toEqual([ErrorCode.None]);
    // The leader, still at epoch 0, answers the parked fetch with new bytes: the answer must be dropped.
    const zombie = await produce(a, topic, 0, payloads(2, 20, 'z'));
    await partitionOf(1).log!.flush();
    await new Promise((r) => setTimeout(r, 500));
    expect(partitionOf(2).log!.logEndOffset).toBe(first.nextOffset);
    expect(await cluster.broker(2).metrics.value('klog_replica_fetch_errors_total', { code: 'UnknownLeaderEpoch' })).toBeGreaterThan(0);
    // Once the leader has epoch 1, broker 2 truncates against it and fetches.
    expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], [1], 1)).toEqual([ErrorCode.None]);
    await waitFor('broker 2 to fetch the bytes', () => partitionOf(2).log!.visibleEnd === zombie.nextOffset);
    expect(filesOf(cluster.replicaDir(2, topic, 0)).get('00000000000000000000.kafka')).toEqual(filesOf(cluster.replicaDir(1, topic, 0)).get('00000000000000000000.kafka'));
  });

  it('fences every partition it leads when its ZooKeeper session expires', async () => {
    await replicated(1);
    const c = await cluster.client(1);
    await fullIsr();
    await expireSession(cluster.connect, cluster.broker(1).cluster!.zk.sessionCredentials());
    await waitFor('the leader to be fenced', () => partitionOf(1).role === 'fenced');
    const r = await produce(c, topic, 0, payloads(1, 10), AckLevel.All);
    expect(r.errorCode).toBe(ErrorCode.NotLeaderForPartition);
    expect(await cluster.broker(1).metrics.value('klog_partitions_led')).toBe(0);
  });

  it('renames aside, at start, a replica whose topic was deleted while the broker was down', async () => {
    await replicated(1);
    await fullIsr();
    await cluster.broker(2).close();
    await cluster.zk.multi([...removePartitionStateOps(topic, 0), ...removeTopicOps(topic)]);
    await cluster.restart(2);
    expect(existsSync(cluster.replicaDir(2, topic, 0))).toBe(false);
    expect(readdirSync(cluster.dirs.get(2)!).filter((n) => n.startsWith(`${topic}-0.`) && n.endsWith('.stale'))).toHaveLength(1);
    expect(await cluster.broker(2).metrics.value('klog_stale_replica_dirs')).toBe(1);
  });

  it('answers LEADER_AND_ISR for an older leader epoch with FencedLeaderEpoch, and an older controller epoch with StaleControllerEpoch', async () => {
    await replicated(1);
    await fullIsr(); // the leader's own ISR writes are done: the controller's write below is at the version it reads
    await cluster.elect(topic, 0, 1, [1, 2, 3]);
    expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], [1], 1)).toEqual([ErrorCode.None]);
    const node = await cluster.state(topic, 0);
    expect(partitionOf(1).leaderEpoch).toBe(node.state.leaderEpoch);
    expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], [1], 1, { leaderEpoch: node.state.leaderEpoch - 1 })).toEqual([ErrorCode.FencedLeaderEpoch]);
    expect(partitionOf(1).isLeader).toBe(true);
    cluster.controllerEpoch = 0;
    expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], [1], 1)).toEqual([ErrorCode.StaleControllerEpoch]);
    cluster.controllerEpoch = 1;
    expect(await cluster.leaderAndIsr(topic, 0, [4, 5], [2], 1)).toEqual([ErrorCode.NotReplica]);
  });
});
