/**
 * A group consumer on a replicated topic (docs/replication.md §14): Algorithm 1 over the partition
 * numbers `0..N-1`, owners and offsets as `<topic>/<partition>`, and a fetcher that follows the
 * partition's leader without a rebalance. Broker 1 is real (it holds the partitions' bytes);
 * broker 2 is scripted: it answers every fetch NotLeaderForPartition and names broker 1 as the
 * leader. The controller's ZooKeeper side is the stand-in's.
 */
import type { Socket } from 'node:net';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { encodeTopicMetadataResponse, ErrorCode, RequestType } from '@klog/protocol';
import { BrokerRegistry, replicatedOffsetPath, replicatedOwnerPath, ZkClient } from '@klog/zk-registry';
import { assertZooKeeperRunning, ControllerStandIn, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { Admin, GroupConsumer, type GroupMessage, type MessageStream, Producer } from '../src/index.js';
import { scriptedServer, startTestBroker, type TestBroker } from './helpers.js';

let connect: string;
let zk: ZkClient;
let controller: ControllerStandIn;
let real: TestBroker;
let cleanups: Array<() => Promise<void> | void> = [];

beforeAll(async () => {
  await assertZooKeeperRunning();
});

beforeEach(async () => {
  connect = testConnectString('klog-group-repl');
  zk = await ZkClient.connect(connect);
  real = await startTestBroker({ numPartitions: 2 });
  controller = new ControllerStandIn(zk).start();
});

afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
  await controller.stop();
  await zk.close();
  await real.stop();
  await removeChroot(connect);
});

async function take(stream: MessageStream, n: number, timeoutMs = 15_000): Promise<GroupMessage[]> {
  const out: GroupMessage[] = [];
  const it = stream[Symbol.asyncIterator]();
  const deadline = Date.now() + timeoutMs;
  while (out.length < n) {
    const r = await Promise.race([it.next(), new Promise<'timeout'>((resolve) => setTimeout(() => resolve('timeout'), Math.max(0, deadline - Date.now())))]);
    if (r === 'timeout') throw new Error(`got ${out.length} of ${n} messages`);
    if (r.done) throw new Error('stream ended');
    out.push(r.value);
  }
  return out;
}

describe('GroupConsumer on a replicated topic', () => {
  it('owns and commits <topic>/<partition> and follows a leader it was not started on', async () => {
    let fetchesAtFormer = 0;
    const s = await scriptedServer((socket: Socket, type, _body, reply) => {
      if (type === RequestType.TopicMetadata) {
        socket.write(
          encodeTopicMetadataResponse({
            errorCode: ErrorCode.None,
            brokers: [
              { brokerId: 1, host: real.host, port: real.port },
              { brokerId: 2, host: '127.0.0.1', port: s.port },
            ],
            topics: [
              {
                topic: 'events',
                errorCode: ErrorCode.None,
                partitions: [0, 1].map((partition) => ({ partition, errorCode: ErrorCode.None, leader: 1, leaderEpoch: 1, replicas: [1, 2], isr: [1, 2] })),
              },
            ],
          }),
        );
        return;
      }
      fetchesAtFormer++;
      reply(ErrorCode.NotLeaderForPartition);
    });
    cleanups.push(() => new Promise<void>((resolve) => { for (const so of s.sockets) so.destroy(); s.server.close(() => resolve()); }));
    const brokers = new BrokerRegistry(zk);
    await brokers.registerBroker(1, real.host, real.port);
    await brokers.registerBroker(2, '127.0.0.1', s.port);
    const admin = new Admin({ zookeeper: connect });
    await admin.createTopic('events', { partitions: 2, replicationFactor: 2 });
    await admin.close();
    // ZooKeeper says broker 2 leads partition 1 (the broker itself knows better), broker 1 partition 0.
    await controller.setLeader('events', 0, 1, [1, 2]);
    await controller.setLeader('events', 1, 2, [1, 2]);
    const producer = new Producer({ brokerList: real.address, acks: 2 });
    const values = Array.from({ length: 20 }, (_x, i) => `v${i}`);
    await producer.send('events', values.map((value, i) => ({ value, partition: i % 2 })));
    await producer.close();

    const c = new GroupConsumer({ zookeeper: connect, groupId: 'g', autoOffsetReset: 'smallest', autoCommit: false });
    cleanups.push(() => c.close());
    const [stream] = (await c.createMessageStreams({ events: 1 }))['events']!;
    expect(c.ownedPartitions()).toEqual([
      { topic: 'events', brokerId: -1, partition: 0 },
      { topic: 'events', brokerId: -1, partition: 1 },
    ]);
    expect((await zk.getData(replicatedOwnerPath('g', 'events', 0)))?.data.toString()).toBe(`${c.consumerId}-0`);
    const got = await take(stream!, 20);
    expect(got.map((m) => m.payload.toString()).sort()).toEqual([...values].sort());
    expect(got.every((m) => m.brokerId === -1)).toBe(true);
    for (const p of [0, 1]) expect(got.filter((m) => m.partition === p).map((m) => m.payload.toString())).toEqual(values.filter((_v, i) => i % 2 === p));
    expect(fetchesAtFormer).toBeGreaterThanOrEqual(1);
    await c.commitOffsets();
    expect((await zk.getData(replicatedOffsetPath('g', 'events', 1)))?.data.toString()).toBe(String(5 * 12 + 5 * 13)); // v1, v3 … v9, then v11 … v19
  });

  it('splits the partition numbers between two members (Algorithm 1)', async () => {
    await new BrokerRegistry(zk).registerBroker(1, real.host, real.port);
    const admin = new Admin({ zookeeper: connect });
    await admin.createTopic('events', { partitions: 2, replicationFactor: 1 });
    await admin.close();
    const a = new GroupConsumer({ zookeeper: connect, groupId: 'g', consumerId: 'a' });
    const b = new GroupConsumer({ zookeeper: connect, groupId: 'g', consumerId: 'b' });
    cleanups.push(() => a.close(), () => b.close());
    await a.createMessageStreams({ events: 1 });
    await b.createMessageStreams({ events: 1 });
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && !(a.ownedPartitions().length === 1 && b.ownedPartitions().length === 1)) await new Promise((r) => setTimeout(r, 50));
    expect(a.ownedPartitions()).toEqual([{ topic: 'events', brokerId: -1, partition: 0 }]);
    expect(b.ownedPartitions()).toEqual([{ topic: 'events', brokerId: -1, partition: 1 }]);
  });
});
