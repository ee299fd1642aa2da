/**
 * A replica's high-watermark checkpoint (docs/replication.md §8.1, §9.5) with brokers in this
 * process over real sockets, real files and the real ZooKeeper: a follower writes the high
 * watermark it learnt every `replica.high.watermark.checkpoint.interval.ms` and on a clean
 * shutdown; restarted and made leader with no follower fetching, it starts its high watermark
 * there (consumers read what was committed at once), not at 0.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AckLevel, ErrorCode } from '@klog/protocol';
import { readHighWatermark } from '@klog/storage';
import { assertZooKeeperRunning } from '@klog/zk-registry/testing';
import { payloads, produce, TestCluster, waitFor } from './replication-helpers.js';

const topic = 'events';
let cluster: TestCluster;

beforeAll(async () => {
  await assertZooKeeperRunning();
});

afterEach(async () => {
  await cluster?.stop();
});

const partitionOf = (id: number) => cluster.broker(id).replicas.get(topic, 0)!;

/** Leader 1, followers 2 and 3, every ISR member in; `n` sets acknowledged by all. @returns the high watermark */
async function committed(intervalMs: number, n: number): Promise<number> {
  cluster = new TestCluster();
  await cluster.start([1, 2, 3], { replicaHighWatermarkCheckpointIntervalMs: intervalMs });
  await cluster.createTopic(topic, [[1, 2, 3]], 2);
  expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], [1, 2, 3], 2)).toEqual([ErrorCode.None, ErrorCode.None, ErrorCode.None]);
  await waitFor('the ISR to hold every replica', () => partitionOf(1).isr.length === 3);
  const c = await cluster.client(1);
  let end = 0;
  for (let i = 0; i < n; i++) {
    const r = await produce(c, topic, 0, payloads(10, 100, `s${i}-`), AckLevel.All);
    expect(r.errorCode).toBe(ErrorCode.None);
    end = r.nextOffset;
  }
  await waitFor('follower 2 to learn the high watermark', () => partitionOf(2).highWatermark === end);
  return end;
}

describe('high-watermark checkpoint', () => {
  it('is written every replica.high.watermark.checkpoint.interval.ms while the broker runs', async () => {
    const hw = await committed(100, 5);
    await waitFor('the checkpoint of follower 2 on disk', async () => (await readHighWatermark(cluster.replicaDir(2, topic, 0), Infinity)) === hw);
    await waitFor('the checkpoint of the leader on disk', async () => (await readHighWatermark(cluster.replicaDir(1, topic, 0), Infinity)) === hw);
  });

  it('is written on a clean shutdown, and a restarted follower made leader starts its high watermark from it', async () => {
    const hw = await committed(3_600_000, 5); // no periodic write during the test
    expect(hw).toBeGreaterThan(0);
    await cluster.restart(2);
    expect(await readHighWatermark(cluster.replicaDir(2, topic, 0), Infinity)).toBe(hw);
    await cluster.broker(1).close();
    // Broker 2 leads; broker 3 stays in the ISR but is not told, so no follower fetch moves the high watermark.
    await cluster.elect(topic, 0, 2, [2, 3]);
    expect(await cluster.leaderAndIsr(topic, 0, [1, 2, 3], [2], 2)).toEqual([ErrorCode.None]);
    await waitFor('broker 2 to lead', () => partitionOf(2).isLeader);
    expect(partitionOf(2).highWatermark).toBe(hw);
    expect(partitionOf(2).log!.logEndOffset).toBe(hw);
  });
});
