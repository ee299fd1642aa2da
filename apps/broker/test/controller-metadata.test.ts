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
import { assignReplicas, newTopicId, ReplicatedTopicRegistry, ZkClient } from '@klog/zk-registry';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { startBroker, type Broker } from '../src/index.js';
import { removeDir, tempDir, WireClient } from './helpers.js';

const silent = pino({ level: process.env['DEBUG_LOG'] ?? 'silent' });
const cleanups: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  await assertZooKeeperRunning();
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function until<T>(what: string, f: () => Promise<T | undefined | false> | T | undefined | false, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function broker(connect: string, brokerId: number): Promise<Broker> {
  const logDir = tempDir();
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
