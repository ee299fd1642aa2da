/**
 * The admin of replicated topics (docs/replication.md §15.1) against the real ZooKeeper, with the
 * controller's ZooKeeper side played by {@link ControllerStandIn}: create (with its refusals and
 * its wait for leaders), describe (status and the high watermark from the leader), delete, and
 * preferred-leader elections.
 */
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BrokerRegistry, ZkClient } from '@klog/zk-registry';
import { assertZooKeeperRunning, ControllerStandIn, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { Admin, AdminTimeoutError, Producer, TopicRefusedError, UnknownTopicError } from '../src/index.js';
import { startTestBroker, type TestBroker } from './helpers.js';

let connect: string;
let zk: ZkClient;
let controller: ControllerStandIn;
let admin: Admin;
let real: TestBroker;

beforeAll(async () => {
  await assertZooKeeperRunning();
});

beforeEach(async () => {
  connect = testConnectString('klog-admin');
  zk = await ZkClient.connect(connect);
  real = await startTestBroker();
  const brokers = new BrokerRegistry(zk);
  // Broker 1 is a real broker (it answers OFFSETS); 0 and 2 are registered only.
  await brokers.registerBroker(0, '127.0.0.1', 1);
  await brokers.registerBroker(1, real.host, real.port);
  await brokers.registerBroker(2, '127.0.0.1', 1);
  controller = new ControllerStandIn(zk).start();
  admin = new Admin({ zookeeper: connect });
});

afterEach(async () => {
  await admin.close();
  await controller.stop();
  await zk.close();
  await real.stop();
  await removeChroot(connect);
});

describe('Admin', () => {
  it('creates a topic, waits for its leaders, and describes it with statuses and high watermarks', async () => {
    const created = await admin.createTopic('events', { partitions: 4, replicationFactor: 3, minInsyncReplicas: 2 });
    expect(created.partitions).toHaveLength(4);
    for (const p of created.partitions) {
      expect(p.replicas).toHaveLength(3);
      expect(new Set(p.replicas).size).toBe(3);
      expect(p.leader).toBe(p.replicas[0]);
      expect(p.isr).toEqual([p.leader]);
    }
    expect(created.id).toMatch(/^[0-9a-f]{16}$/);

    // What broker 1 holds of partition 0 becomes its high watermark when it leads it.
    const producer = new Producer({ brokerList: real.address, acks: 2 });
    await producer.send('events', [{ value: 'hello', partition: 0 }]);
    await producer.close();
    await controller.setLeader('events', 0, 1, [1, 0, 2]);
    await controller.setLeader('events', 3, -1, [2]);

    const [d] = await admin.describeTopics(['events']);
    expect(d).toMatchObject({ kind: 'replicated', topic: 'events', id: created.id, replicationFactor: 3, minInsyncReplicas: 2 });
    if (d?.kind !== 'replicated') throw new Error('not replicated');
    expect(d.partitions[0]).toMatchObject({ leader: 1, leaderEpoch: 1, isr: [1, 0, 2], highWatermark: 15, status: 'ok' });
    expect(d.partitions[3]).toMatchObject({ leader: null, highWatermark: null, status: 'offline' });
    for (const p of [1, 2]) expect(d.partitions[p]!.status).toBe('under-replicated');
  });

  it('refuses what the cluster cannot hold and names that are taken, writing nothing', async () => {
    await expect(admin.createTopic('events', { partitions: 1, replicationFactor: 4 })).rejects.toThrow(
      new TopicRefusedError('replication factor 4 is larger than the 3 live brokers (0, 1, 2)'),
    );
    await expect(admin.createTopic('events', { partitions: 1, replicationFactor: 2, minInsyncReplicas: 3 })).rejects.toThrow(
      '--min-insync-replicas 3 is larger than --replication-factor 2',
    );
    expect(await admin.describeTopics()).toEqual([]);
    await new BrokerRegistry(zk).registerTopic('clicks', 1, 2);
    await expect(admin.createTopic('clicks', { partitions: 1, replicationFactor: 1 })).rejects.toThrow('topic clicks already exists (a paper topic)');
    await admin.createTopic('events', { partitions: 2, replicationFactor: 1 });
    await expect(admin.createTopic('events', { partitions: 1, replicationFactor: 1 })).rejects.toThrow('topic events already exists (replicated, 2 partitions)');
    await expect(admin.deleteTopic('clicks')).rejects.toThrow(
      'topic clicks is a paper topic: its logs belong to the brokers that hold them; stop them and delete LOG_DIR/clicks-*',
    );
    await expect(admin.deleteTopic('nope')).rejects.toBeInstanceOf(UnknownTopicError);
    expect((await admin.describeTopics()).map((d) => `${d.kind}:${d.topic}`)).toEqual(['paper:clicks', 'replicated:events']);
  });

  it('deletes a topic once the controller removed it', async () => {
    await admin.createTopic('events', { partitions: 3, replicationFactor: 2 });
    expect(await admin.deleteTopic('events')).toEqual({ topic: 'events', partitions: 3, replicas: 6 });
    expect(await admin.describeTopics()).toEqual([]);
  });

  it('reports the preferred-leader election the controller ran', async () => {
    await admin.createTopic('events', { partitions: 3, replicationFactor: 3 });
    const [d] = await admin.describeTopics(['events']);
    if (d?.kind !== 'replicated') throw new Error('not replicated');
    // Partition 0 moves away from its preferred replica, which stays in the ISR; partition 1 to a
    // broker whose ISR lacks the preferred one; partition 2 stays.
    const [p0, p1] = [d.partitions[0]!, d.partitions[1]!];
    await controller.setLeader('events', 0, p0.replicas[1]!, p0.replicas);
    await controller.setLeader('events', 1, p1.replicas[1]!, [p1.replicas[1]!]);
    const e = await admin.electPreferredLeaders();
    expect(e).toEqual({ moved: [{ topic: 'events', partition: 0, from: p0.replicas[1], to: p0.replicas[0] }], alreadyPreferred: 1, notPossible: 1 });
  });

  it('says when the controller does not answer in time', async () => {
    controller.active = false;
    const err = await admin.createTopic('events', { partitions: 2, replicationFactor: 1, timeoutMs: 300 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AdminTimeoutError);
    expect((err as Error).message).toBe('topic events is defined, but the controller elected no leader for partitions 0, 1 within 300 ms (is a controller running?)');
  });
});
