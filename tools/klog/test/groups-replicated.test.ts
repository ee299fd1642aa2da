/**
 * `klog groups --describe` on a group that reads a replicated topic and a paper topic
 * (docs/replication.md §14): the replicated partitions are `0..N-1`, their log ends read from the
 * leader; the paper ones keep their numbering. The controller's ZooKeeper side is the stand-in's.
 */
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { Admin, Producer } from '@klog/client';
import { BrokerRegistry, OffsetRegistry, OwnershipRegistry, ZkClient } from '@klog/zk-registry';
import { assertZooKeeperRunning, ControllerStandIn, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { runKlog } from './cli-run.js';
import { type RealBroker, startRealBroker } from './replicated-brokers.js';

let connect: string;
let zk: ZkClient;
let controller: ControllerStandIn;
let real: RealBroker;

beforeAll(async () => {
  await assertZooKeeperRunning();
});

beforeEach(async () => {
  connect = testConnectString('klog-groups-repl');
  zk = await ZkClient.connect(connect);
  real = await startRealBroker(2);
  await new BrokerRegistry(zk).registerBroker(1, real.host, real.port);
  controller = new ControllerStandIn(zk).start();
});

afterEach(async () => {
  await controller.stop();
  await zk.close();
  await real.stop();
  await removeChroot(connect);
});

describe('klog groups --describe', () => {
  it('shows replicated partitions by number, with the leader\'s log end, beside paper ones', async () => {
    const admin = new Admin({ zookeeper: connect });
    await admin.createTopic('events', { partitions: 2, replicationFactor: 1 });
    await admin.close();
    const producer = new Producer({ brokerList: real.address, acks: 2 });
    await producer.send('events', [{ value: 'aaaa', partition: 0 }, { value: 'bbbb', partition: 0 }, { value: 'cc', partition: 1 }]);
    await producer.close();
    await new BrokerRegistry(zk).registerTopic('clicks', 1, 1);
    const offsets = new OffsetRegistry(zk);
    await offsets.commit('g', 'events', { replicated: true, partition: 0 }, 14);
    await offsets.commit('g', 'clicks', { brokerId: 1, partition: 0 }, 0);
    await new OwnershipRegistry(zk).claim('g', 'events', { replicated: true, partition: 1 }, 'g_host-1-0');

    const r = await runKlog(['groups', '--zookeeper', connect, '--describe', 'g', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const rows = (JSON.parse(r.stdout) as { partitions: Array<Record<string, unknown>> }).partitions;
    expect(rows.filter((x) => x['topic'] === 'events')).toMatchObject([
      { brokerId: -1, partition: 0, partitionNumber: 0, leader: 1, offset: 14, logEnd: 28, lag: 14, lagMessages: 1, owner: null },
      { brokerId: -1, partition: 1, partitionNumber: 1, leader: 1, offset: null, logEnd: 12, owner: 'g_host-1-0', consumerId: 'g_host-1' },
    ]);
    expect(rows.filter((x) => x['topic'] === 'clicks')).toMatchObject([{ brokerId: 1, partition: 0, offset: 0 }]);

    const text = await runKlog(['groups', '--zookeeper', connect, '--describe', 'g']);
    expect(text.stdout).toMatch(/\ng +events +0 +14 +28 +14 +1 +- +-\n/);
    expect(text.stdout).toMatch(/\ng +events +1 +- +12 +- +- +g_host-1 +-\n/);
  });
});
