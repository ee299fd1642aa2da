/**
 * The producers' view of the cluster (BrokerPartitionInfo) beside replicated topics
 * (docs/replication.md §3, "Paper readers"): a topic whose node holds a definition is no paper
 * topic, and its `partitions` child is never read as a broker id.
 */
import { BrokerRegistry, ReplicatedTopicRegistry, ZkClient, newTopicId } from '@klog/zk-registry';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import type { Logger } from '@klog/logger';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BrokerPartitionInfo } from '../src/broker-partition-info.js';

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!().catch(() => undefined);
});
beforeAll(() => assertZooKeeperRunning());

function warnings(): Logger & { seen: string[] } {
  const seen: string[] = [];
  const keep = (_obj: object, msg?: string): void => void seen.push(msg ?? '');
  return { seen, debug: () => undefined, info: () => undefined, warn: keep, error: keep };
}

describe('BrokerPartitionInfo and replicated topics', () => {
  it('sees no partitions of a replicated topic, and reads a paper topic beside it as before', async () => {
    const connectString = testConnectString();
    cleanups.push(() => removeChroot(connectString));
    const zk = await ZkClient.connect(connectString, { sessionTimeoutMs: 3000 });
    cleanups.push(() => zk.close());
    await new BrokerRegistry(zk).registerBroker(0, '127.0.0.1', 9092);
    await new BrokerRegistry(zk).registerTopic('clicks', 0, 2);
    await new ReplicatedTopicRegistry(zk).createTopic('events', { id: newTopicId(), partitions: [[0]], createdMs: 1 });
    await zk.multi([
      { op: 'create', path: '/brokers/topics/events/partitions' },
      { op: 'create', path: '/brokers/topics/events/partitions/0' },
    ]);
    const logger = warnings();
    const info = new BrokerPartitionInfo(zk, logger);
    cleanups.push(() => info.close());
    await info.start();
    await info.watchTopic('events');
    await info.watchTopic('clicks');
    expect(info.view('events')).toEqual({ topic: 'events', partitions: [], registeredBrokerIds: [] });
    expect(info.view('clicks')?.partitions).toEqual([
      { brokerId: 0, partition: 0, live: true },
      { brokerId: 0, partition: 1, live: true },
    ]);
    expect(logger.seen).toEqual([]);
  });
});
