/**
 * The ZooKeeper producer on a replicated topic (docs/replication.md §13.1, §13.2): leaders come
 * from the partition state nodes; when the leader answers NotLeaderForPartition (the controller
 * has moved it), the producer reads the state again and resends, in order, to the new leader.
 * Broker 1 is a scripted broker that only says it does not lead; broker 2 is a real one. The
 * controller's ZooKeeper side is the stand-in's.
 */
import type { Socket } from 'node:net';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Decoder, decodeProduceAckRequest, encodeProduceAckResponse, ErrorCode, RequestType } from '@klog/protocol';
import { BrokerRegistry, ZkClient } from '@klog/zk-registry';
import { assertZooKeeperRunning, ControllerStandIn, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { Admin, hashPartitioner, ZkProducer } from '../src/index.js';
import { scriptedServer, startTestBroker, type TestBroker } from './helpers.js';
import { storedValues } from './leader-helpers.js';

let connect: string;
let zk: ZkClient;
let controller: ControllerStandIn;
let real: TestBroker;
let cleanups: Array<() => Promise<void> | void> = [];

beforeAll(async () => {
  await assertZooKeeperRunning();
});

beforeEach(async () => {
  connect = testConnectString('klog-zkp-leader');
  zk = await ZkClient.connect(connect);
  real = await startTestBroker();
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

describe('ZkProducer on a replicated topic', () => {
  it('sends keys over the N partitions and follows a leader change in order', async () => {
    let produces = 0;
    const moved = { done: false };
    const s = await scriptedServer((socket: Socket, type, body, reply) => {
      if (type !== RequestType.ProduceAck) return reply(ErrorCode.UnknownRequestType);
      produces++;
      const req = decodeProduceAckRequest(new Decoder(body));
      const errorCode = ErrorCode.NotLeaderForPartition;
      const notLeader = req.partitions.map(({ topic, partition }) => ({ topic, partition, errorCode, offset: -1, nextOffset: -1 }));
      socket.write(encodeProduceAckResponse(notLeader));
      // The controller moves the leadership to broker 2 (it would have before the broker said so).
      if (!moved.done) {
        moved.done = true;
        void controller.setLeader('events', 0, 2, [2]);
      }
    });
    cleanups.push(() => new Promise<void>((resolve) => { for (const so of s.sockets) so.destroy(); s.server.close(() => resolve()); }));
    const brokers = new BrokerRegistry(zk);
    await brokers.registerBroker(1, '127.0.0.1', s.port);
    await brokers.registerBroker(2, real.host, real.port);
    const admin = new Admin({ zookeeper: connect });
    await admin.createTopic('events', { partitions: 1, replicationFactor: 2 });
    await admin.close();
    // The stand-in made broker 1 or 2 the first leader (the replica list's first); start at 1.
    await controller.setLeader('events', 0, 1, [1, 2]);

    const producer = new ZkProducer({ zookeeper: connect, acks: 'all', lingerMs: 0 });
    cleanups.push(() => producer.close());
    const values = Array.from({ length: 30 }, (_x, i) => `v${i}`);
    const sends = [0, 10, 20].map((from) => producer.send('events', values.slice(from, from + 10).map((value) => ({ value, key: value }))));
    const results = (await Promise.all(sends)).flat();
    expect(results.every((r) => r.partition === 0 && r.brokerId === 2)).toBe(true);
    expect(produces).toBeGreaterThanOrEqual(1);
    expect(producer.leaderRetries).toBeGreaterThanOrEqual(1);
    expect(await storedValues(real, 'events', 0)).toEqual(values);
  });

  it('puts a key in partitioner(key, N) of a replicated topic and refuses a brokerId', async () => {
    // A broker that holds partitions 0-3 of any topic it is sent (a standalone broker, num.partitions 4).
    const four = await startTestBroker({ numPartitions: 4 });
    cleanups.push(() => four.stop());
    const brokers = new BrokerRegistry(zk);
    await brokers.registerBroker(2, four.host, four.port);
    const admin = new Admin({ zookeeper: connect });
    await admin.createTopic('keyed', { partitions: 4, replicationFactor: 1 });
    await admin.close();
    const producer = new ZkProducer({ zookeeper: connect, acks: 1 });
    cleanups.push(() => producer.close());
    const [r] = await producer.send('keyed', [{ value: 'x', key: 'user-7' }]);
    expect(r!.partition).toBe(hashPartitioner(Buffer.from('user-7'), 4));
    expect(r!.brokerId).toBe(2);
    await expect(producer.send('keyed', [{ value: 'x', brokerId: 2, partition: 0 }])).rejects.toThrow(/replicated: name its partition \(0\.\.3\) without a brokerId/);
  });
});
