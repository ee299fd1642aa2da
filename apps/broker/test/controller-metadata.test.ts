/**
 * In-process brokers over real sockets and the real ZooKeeper (docs/replication.md §3, §5.3,
 * §6.6, §13.1): each broker takes the role the controller sent it; any broker answers
 * TOPIC_METADATA from its metadata cache; a produce to a replicated topic's name on a broker
 * that holds no replica of it is refused and creates no paper topic.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import {
  AckLevel,
  Decoder,
  decodeProduceAckResponse,
  decodeTopicMetadataResponse,
  encodeMessageSet,
  encodeProduceAckRequest,
  encodeTopicMetadataRequest,
  ErrorCode,
} from '@klog/protocol';
import { AdminRequestRegistry, assignReplicas, newTopicId, ReplicatedTopicRegistry, ZkClient } from '@klog/zk-registry';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { startBroker, type Broker } from '../src/index.js';
import { removeDir, tempDir, until, WireClient } from './helpers.js';

const silent = pino({ level: process.env['DEBUG_LOG'] ?? 'silent' });
const cleanups: (() => Promise<void> | void)[] = [];
const dirs = new Map<number, string>();

beforeAll(async () => {
  await assertZooKeeperRunning();
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});


async function broker(connect: string, brokerId: number): Promise<Broker> {
  const logDir = tempDir();
  dirs.set(brokerId, logDir);
  const b = await startBroker({ logDir, port: 0, brokerId, zookeeper: connect, zkSessionTimeoutMs: 2000, controlledShutdownRetryBackoffMs: 100 }, silent);
  cleanups.push(async () => {
    await b.close();
    removeDir(logDir);
  });
  return b;
}

describe('brokers and the controller', () => {
  it('take the roles sent, answer TOPIC_METADATA from any broker, and never turn a replicated name into a paper topic', async () => {
    const connect = testConnectString();
    cleanups.push(() => removeChroot(connect));
    const zk = await ZkClient.connect(connect);
    cleanups.push(() => zk.close());
    const brokers: Broker[] = [];
    for (const id of [0, 1, 2]) brokers.push(await broker(connect, id));
    // Replicas on brokers 0 and 1 only: broker 2 holds none.
    const assignment = assignReplicas([0, 1], 2, 2, { startIndex: 0, replicaShift: 0 });
    await new ReplicatedTopicRegistry(zk).createTopic('events', { id: newTopicId(), partitions: assignment, createdMs: Date.now() });

    for (let p = 0; p < 2; p++) {
      const [leader, follower] = assignment[p]!;
      await until(`events/${p} led by ${leader}`, () => brokers[leader!]!.replicas.get('events', p)?.isLeader === true);
      await until(`events/${p} followed by ${follower}`, () => brokers[follower!]!.replicas.get('events', p) !== undefined);
      expect(brokers[follower!]!.replicas.get('events', p)!.isLeader).toBe(false);
    }
    // The followers fetch and join the ISR (docs/replication.md §9.4); every cache sees it.
    const c = await WireClient.connect(brokers[2]!.port);
    cleanups.push(() => c.close());
    const metadata = await until('full ISRs in broker 2 metadata', async () => {
      const r = await c.request(encodeTopicMetadataRequest(['events', 'nope']));
      const m = decodeTopicMetadataResponse(r.code, new Decoder(r.body));
      return m.topics[0]!.partitions.every((p) => p.isr.length === 2) ? m : undefined;
    });
    expect(metadata.brokers.map((b) => b.brokerId)).toEqual([0, 1, 2]);
    expect(metadata.topics[0]).toMatchObject({
      topic: 'events',
      errorCode: ErrorCode.None,
      partitions: assignment.map((replicas, partition) => ({ partition, errorCode: ErrorCode.None, leader: replicas[0], leaderEpoch: 0, replicas })),
    });
    expect(metadata.topics[1]).toEqual({ topic: 'nope', errorCode: ErrorCode.NotReplicatedTopic, partitions: [] });

    const produced = await c.request(
      encodeProduceAckRequest({ acks: AckLevel.Appended, partitions: [{ topic: 'events', partition: 0, messages: encodeMessageSet([Buffer.from('hello')]) }] }),
    );
    expect(decodeProduceAckResponse(new Decoder(produced.body))).toMatchObject([{ topic: 'events', errorCode: ErrorCode.NotLeaderForPartition }]);
    expect(brokers[2]!.logs.partitionCount('events')).toBeUndefined();
  });
});

describe('preferred leaders and topic deletion (§15.1, §5.3)', () => {
  it('moves leadership back to the first replica on request, then deletes the topic: replicas gone from disk, nodes gone from ZooKeeper', async () => {
    const connect = testConnectString();
    cleanups.push(() => removeChroot(connect));
    const zk = await ZkClient.connect(connect);
    cleanups.push(() => zk.close());
    const topics = new ReplicatedTopicRegistry(zk);
    const admin = new AdminRequestRegistry(zk);
    const brokers: Broker[] = [];
    for (const id of [0, 1, 2]) brokers.push(await broker(connect, id));
    const assignment = assignReplicas([0, 1, 2], 3, 2, { startIndex: 0, replicaShift: 0 });
    await topics.createTopic('events', { id: newTopicId(), partitions: assignment, createdMs: Date.now() });
    const full = async (): Promise<boolean> => {
      const s = await topics.readPartitionStates('events');
      return s.size === 3 && [...s.values()].every((n) => n.state.isr.length === 2);
    };
    await until('full ISRs', full);
    // Broker 1 goes (controlled shutdown): events/1 moves to its second replica.
    await brokers[1]!.close();
    const moved = await until('events/1 moved', async () => {
      const n = await topics.readPartitionState('events', 1);
      return n?.state.leader === assignment[1]![1] ? n : undefined;
    });
    expect(moved.state.leaderEpoch).toBeGreaterThanOrEqual(1);
    brokers[1] = await broker(connect, 1);
    await until('full ISRs again', full);
    await admin.requestPreferredLeaderElection({ all: true });
    await until('the request handled', async () => (await admin.readPreferredLeaderElection()) === undefined);
    const after = await topics.readPartitionStates('events');
    for (let p = 0; p < 3; p++) expect(after.get(p)!.state.leader).toBe(assignment[p]![0]);
    expect(after.get(1)!.state.leaderEpoch).toBeGreaterThan(moved.state.leaderEpoch);
    await until('broker 1 leads events/1', () => brokers[1]!.replicas.get('events', 1)?.isLeader === true);

    for (let p = 0; p < 3; p++) for (const b of assignment[p]!) expect(existsSync(join(dirs.get(b)!, `events-${p}`))).toBe(true);
    expect(await admin.requestTopicDeletion('events')).toBe(true);
    await until('the deletion done', async () => !(await admin.isTopicDeletionPending('events')));
    expect(await topics.readDefinition('events')).toBeUndefined();
    expect(await zk.exists('/brokers/topics/events')).toBeUndefined();
    for (let p = 0; p < 3; p++) for (const b of assignment[p]!) expect(existsSync(join(dirs.get(b)!, `events-${p}`))).toBe(false);
  });
});
