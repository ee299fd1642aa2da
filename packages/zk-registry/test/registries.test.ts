import { describe, expect, it } from 'vitest';
import {
  allPartitions,
  BrokerIdInUseError,
  BrokerRegistry,
  brokerIdPath,
  brokerTopicBrokerPath,
  ConsumerRegistry,
  consumerIdPath,
  newConsumerId,
  OffsetRegistry,
  offsetPath,
  OwnershipRegistry,
  ZkError,
  ZkNodeExistsError,
} from '../src/index.js';
import { expireSession } from '../src/testing.js';
import { captureLogger, connectClient, freshChroot, nextEvent, waitFor } from './helpers.js';

describe('broker registry', () => {
  it('registers brokers and lists them with host and port', async () => {
    const connectString = freshChroot();
    const b1 = new BrokerRegistry(await connectClient(connectString));
    const b0 = new BrokerRegistry(await connectClient(connectString));
    const reader = await connectClient(connectString);
    const registry = new BrokerRegistry(reader);
    const info = await b1.registerBroker(1, 'broker-1.local', 9093, { creatorId: 'host-1700000000000' });
    await b0.registerBroker(0, '10.0.0.5', 9092);
    expect(info).toEqual({ id: 1, host: 'broker-1.local', port: 9093, creatorId: 'host-1700000000000' });
    expect((await reader.getData(brokerIdPath(1)))?.data.toString()).toBe('host-1700000000000:broker-1.local:9093');
    expect((await reader.exists(brokerIdPath(1)))?.ephemeralOwner).toBeDefined();
    expect(await registry.listBrokerIds()).toEqual([0, 1]);
    const brokers = await registry.listBrokers();
    expect(brokers.map((b) => [b.id, b.host, b.port])).toEqual([
      [0, '10.0.0.5', 9092],
      [1, 'broker-1.local', 9093],
    ]);
    expect(await registry.getBroker(2)).toBeUndefined();
    await expect(b0.registerBroker(3, 'h', 0)).rejects.toBeInstanceOf(ZkError);
  });

  it('refuses a broker id held by another live broker with BrokerIdInUseError', async () => {
    const connectString = freshChroot();
    const first = await connectClient(connectString);
    const second = await connectClient(connectString);
    await new BrokerRegistry(first).registerBroker(7, 'a.local', 9092, { creatorId: 'a-1' });
    const attempt = new BrokerRegistry(second).registerBroker(7, 'b.local', 9092);
    await expect(attempt).rejects.toBeInstanceOf(BrokerIdInUseError);
    await expect(attempt).rejects.toThrow(/broker id 7 is already registered by a live broker \(a-1:a\.local:9092\)/);
    const error = (await attempt.catch((e: unknown) => e)) as BrokerIdInUseError;
    expect(error.brokerId).toBe(7);
    expect(error.holder).toBe('a-1:a.local:9092');
    // The same client registering again just updates its registration.
    await new BrokerRegistry(first).registerBroker(7, 'a.local', 9192, { creatorId: 'a-1' });
    expect((await new BrokerRegistry(second).getBroker(7))?.port).toBe(9192);
    // Once the holder is gone the id is free; waitForIdMs rides out the holder's departure.
    const waiting = new BrokerRegistry(second).registerBroker(7, 'b.local', 9092, { waitForIdMs: 5000 });
    await new Promise((r) => setTimeout(r, 300));
    await first.close();
    expect((await waiting).host).toBe('b.local');
    expect((await second.exists(brokerIdPath(7)))?.ephemeralOwner).toBe(second.sessionId);
  });

  it('registers topics per broker and lists (broker, partition) counts', async () => {
    const connectString = freshChroot();
    const zk0 = await connectClient(connectString);
    const zk1 = await connectClient(connectString);
    const reader = new BrokerRegistry(await connectClient(connectString));
    await new BrokerRegistry(zk0).registerTopic('clicks', 0, 2);
    await new BrokerRegistry(zk1).registerTopic('clicks', 1, 3);
    await new BrokerRegistry(zk1).registerTopic('views', 1, 1);
    expect(await reader.listTopics()).toEqual(['clicks', 'views']);
    expect(await reader.topicPartitions('clicks')).toEqual([
      { brokerId: 0, partitions: 2 },
      { brokerId: 1, partitions: 3 },
    ]);
    expect(allPartitions(await reader.topicPartitions('clicks'))).toHaveLength(5);
    await new BrokerRegistry(zk0).registerTopic('clicks', 0, 4); // the count can change
    expect(await reader.topicPartitions('clicks')).toEqual([
      { brokerId: 0, partitions: 4 },
      { brokerId: 1, partitions: 3 },
    ]);
    const all = await reader.listTopicPartitions();
    expect([...all.keys()]).toEqual(['clicks', 'views']);
    expect(all.get('views')).toEqual([{ brokerId: 1, partitions: 1 }]);
    await zk1.close(); // broker 1 dies: its partitions go with it
    expect(await reader.topicPartitions('clicks')).toEqual([{ brokerId: 0, partitions: 4 }]);
    expect(await reader.topicPartitions('views')).toEqual([]);
    await expect(new BrokerRegistry(zk0).registerTopic('bad/topic', 0, 1)).rejects.toThrow(/invalid topic/);
    await expect(new BrokerRegistry(zk0).registerTopic('t', 0, 0)).rejects.toThrow(/partition count/);
  });

  it('skips unreadable values with a warning', async () => {
    const connectString = freshChroot();
    const zk = await connectClient(connectString);
    const logger = captureLogger();
    const registry = new BrokerRegistry(zk, { logger });
    await zk.createEphemeral(brokerIdPath(3), 'garbage');
    await zk.createEphemeral(brokerTopicBrokerPath('t', 3), 'many');
    await zk.create('/brokers/ids/not-an-id', 'x');
    expect(await registry.listBrokers()).toEqual([]);
    expect(await registry.topicPartitions('t')).toEqual([]);
    expect(logger.messages('warn')).toEqual(
      expect.arrayContaining([
        'ignoring unreadable broker registration',
        'ignoring unreadable topic partition count',
        'ignoring a broker znode whose name is not a broker id',
      ]),
    );
  });

  it('watches brokers come and go', async () => {
    const connectString = freshChroot();
    const registry = new BrokerRegistry(await connectClient(connectString));
    const seen: number[][] = [];
    const watch = registry.watchBrokerIds((ids) => void seen.push(ids));
    await watch.ready;
    const b2 = await connectClient(connectString);
    await new BrokerRegistry(b2).registerBroker(2, 'h', 1);
    await new BrokerRegistry(await connectClient(connectString)).registerBroker(10, 'h', 2);
    await waitFor(() => JSON.stringify(seen.at(-1)) === '[2,10]', 5000, 'brokers 2 and 10');
    await b2.close();
    await waitFor(() => JSON.stringify(seen.at(-1)) === '[10]', 5000, 'broker 2 gone');
    watch.close();
  });

  it('a broker whose session expires is registered again with its topics', async () => {
    const connectString = freshChroot();
    const zk = await connectClient(connectString);
    const reader = new BrokerRegistry(await connectClient(connectString));
    const broker = new BrokerRegistry(zk);
    await broker.registerBroker(4, 'h4', 9094);
    await broker.registerTopic('clicks', 4, 2);
    const renewed = nextEvent(zk, 'session');
    await expireSession(connectString, zk.sessionCredentials());
    await renewed;
    expect((await reader.getBroker(4))?.port).toBe(9094);
    expect(await reader.topicPartitions('clicks')).toEqual([{ brokerId: 4, partitions: 2 }]);
  });
});

describe('consumer registry', () => {
  it('registers consumers with their subscriptions and lists them by group', async () => {
    const connectString = freshChroot();
    const c1 = await connectClient(connectString);
    const c2 = await connectClient(connectString);
    const reader = new ConsumerRegistry(await connectClient(connectString));
    const id1 = newConsumerId('g1');
    expect(id1).toMatch(/^g1_.+-\d+-[0-9a-f]{8}$/);
    await new ConsumerRegistry(c1).registerConsumer('g1', 'c-b', { clicks: 2, views: 1 });
    await new ConsumerRegistry(c2).registerConsumer('g1', 'c-a', { clicks: 1 });
    await new ConsumerRegistry(c2).registerConsumer('g2', 'c-z', { views: 3 });
    expect((await c1.getData(consumerIdPath('g1', 'c-b')))?.data.toString()).toBe('{"clicks":2,"views":1}');
    expect(await reader.listConsumers('g1')).toEqual([
      { consumerId: 'c-a', subscription: { clicks: 1 } },
      { consumerId: 'c-b', subscription: { clicks: 2, views: 1 } },
    ]);
    expect(await reader.listGroups()).toEqual(['g1', 'g2']);
    await expect(new ConsumerRegistry(c1).registerConsumer('g1', 'c-a', { clicks: 1 })).rejects.toBeInstanceOf(ZkNodeExistsError);
    await new ConsumerRegistry(c1).registerConsumer('g1', 'c-b', { clicks: 4 }); // updates
    expect((await reader.listConsumers('g1'))[1]?.subscription).toEqual({ clicks: 4 });
    expect(await new ConsumerRegistry(c1).unregisterConsumer('g1', 'c-b')).toBe(true);
    expect(await reader.listConsumerIds('g1')).toEqual(['c-a']);
    await c2.close();
    expect(await reader.listConsumers('g1')).toEqual([]);
    expect(await reader.listConsumers('never-seen')).toEqual([]);
  });

  it('reads an unreadable subscription as empty, with a warning', async () => {
    const zk = await connectClient(freshChroot());
    const logger = captureLogger();
    await zk.createEphemeral(consumerIdPath('g', 'c1'), '{"clicks":"two"}');
    expect(await new ConsumerRegistry(zk, { logger }).listConsumers('g')).toEqual([{ consumerId: 'c1', subscription: {} }]);
    expect(logger.messages('warn')).toContain('unreadable consumer subscription; treating it as empty');
  });

  it('watches consumers join and leave', async () => {
    const connectString = freshChroot();
    const registry = new ConsumerRegistry(await connectClient(connectString));
    const seen: string[][] = [];
    const watch = registry.watchConsumers('g', (ids) => void seen.push(ids));
    await watch.ready;
    const member = await connectClient(connectString);
    await new ConsumerRegistry(member).registerConsumer('g', 'm1', { t: 1 });
    await waitFor(() => JSON.stringify(seen.at(-1)) === '["m1"]', 5000, 'm1 joins');
    await member.close();
    await waitFor(() => JSON.stringify(seen.at(-1)) === '[]', 5000, 'm1 leaves');
    watch.close();
  });
});

describe('ownership registry', () => {
  it('lets exactly one consumer thread claim a partition', async () => {
    const connectString = freshChroot();
    const a = new OwnershipRegistry(await connectClient(connectString));
    const bClient = await connectClient(connectString);
    const b = new OwnershipRegistry(bClient);
    const p = { brokerId: 1, partition: 0 };
    expect(await a.claim('g', 'clicks', p, 'ca-0')).toBe(true);
    expect(await a.claim('g', 'clicks', p, 'ca-0')).toBe(true); // already ours
    expect(await a.claim('g', 'clicks', p, 'ca-1')).toBe(false); // another thread of the same consumer
    expect(await b.claim('g', 'clicks', p, 'cb-0')).toBe(false);
    expect(await b.owner('g', 'clicks', p)).toBe('ca-0');
    expect(await b.release('g', 'clicks', p)).toBe(false); // never releases another's claim
    expect(await b.owner('g', 'clicks', p)).toBe('ca-0');
    expect(await a.release('g', 'clicks', p)).toBe(true);
    expect(await a.owner('g', 'clicks', p)).toBeUndefined();
    expect(await b.claim('g', 'clicks', p, 'cb-0')).toBe(true);
    expect(await a.claim('g', 'clicks', { brokerId: 1, partition: 1 }, 'ca-0')).toBe(true);
    expect(await a.listOwners('g', 'clicks')).toEqual([
      { brokerId: 1, partition: 0, owner: 'cb-0' },
      { brokerId: 1, partition: 1, owner: 'ca-0' },
    ]);
    expect(await a.listTopics('g')).toEqual(['clicks']);
    await bClient.close(); // a dead owner's claims go with its session
    expect(await a.owner('g', 'clicks', p)).toBeUndefined();
    expect(await a.claim('g', 'clicks', p, 'ca-0')).toBe(true);
  });

  it('concurrent claims of the same partitions: every partition gets exactly one owner', async () => {
    const connectString = freshChroot();
    const registries = await Promise.all([0, 1, 2, 3].map(async () => new OwnershipRegistry(await connectClient(connectString))));
    const partitions = allPartitions([{ brokerId: 0, partitions: 3 }, { brokerId: 1, partitions: 3 }]);
    const results = await Promise.all(
      registries.map((r, i) => Promise.all(partitions.map((p) => r.claim('g', 't', p, `c${i}-0`)))),
    );
    for (let p = 0; p < partitions.length; p++) {
      expect(results.filter((r) => r[p]).length, `partition ${p}`).toBe(1);
    }
    const owners = await registries[0]!.listOwners('g', 't');
    expect(owners).toHaveLength(partitions.length);
    for (const [i, o] of owners.entries()) {
      const winner = results.findIndex((r) => r[i]);
      expect(o.owner).toBe(`c${winner}-0`);
    }
  });

  it('claims are not re-created after session expiry', async () => {
    const connectString = freshChroot();
    const zk = await connectClient(connectString);
    const reader = new OwnershipRegistry(await connectClient(connectString));
    await new OwnershipRegistry(zk).claim('g', 't', { brokerId: 0, partition: 0 }, 'c-0');
    const renewed = nextEvent(zk, 'session');
    await expireSession(connectString, zk.sessionCredentials());
    await renewed;
    expect(await reader.owner('g', 't', { brokerId: 0, partition: 0 })).toBeUndefined();
  });
});

describe('offset registry', () => {
  it('commits and reads offsets (persistent)', async () => {
    const connectString = freshChroot();
    const zk = await connectClient(connectString);
    const offsets = new OffsetRegistry(zk);
    const p = { brokerId: 2, partition: 1 };
    expect(await offsets.read('g', 'clicks', p)).toBeUndefined();
    await offsets.commit('g', 'clicks', p, 0);
    expect(await offsets.read('g', 'clicks', p)).toBe(0);
    await offsets.commit('g', 'clicks', p, 536_870_912);
    expect((await zk.getData(offsetPath('g', 'clicks', 2, 1)))?.data.toString()).toBe('536870912');
    await offsets.commit('g', 'clicks', { brokerId: 0, partition: 0 }, Number.MAX_SAFE_INTEGER);
    await zk.close();
    const after = new OffsetRegistry(await connectClient(connectString));
    expect(await after.read('g', 'clicks', p)).toBe(536_870_912);
    expect(await after.list('g', 'clicks')).toEqual([
      { brokerId: 0, partition: 0, offset: Number.MAX_SAFE_INTEGER },
      { brokerId: 2, partition: 1, offset: 536_870_912 },
    ]);
    expect(await after.listTopics('g')).toEqual(['clicks']);
    for (const bad of [-1, 1.5, Number.NaN, Number.MAX_SAFE_INTEGER + 2]) {
      await expect(after.commit('g', 'clicks', p, bad), String(bad)).rejects.toThrow(/invalid offset/);
    }
  });

  it('reads missing, negative and non-numeric stored offsets as undefined, warning about invalid ones', async () => {
    const zk = await connectClient(freshChroot());
    const logger = captureLogger();
    const offsets = new OffsetRegistry(zk, { logger });
    const values = ['-5', 'abc', '', '12x', '1e3', '99999999999999999999'];
    for (const [i, value] of values.entries()) {
      await zk.put(offsetPath('g', 't', 0, i), value);
      expect(await offsets.read('g', 't', { brokerId: 0, partition: i }), JSON.stringify(value)).toBeUndefined();
    }
    expect(logger.entries.filter((e) => e.level === 'warn')).toHaveLength(values.length);
    expect(logger.entries[0]).toMatchObject({
      level: 'warn',
      msg: 'ignoring an invalid committed offset (not a non-negative integer)',
      obj: { value: '-5' },
    });
    expect(await offsets.read('g', 't', { brokerId: 9, partition: 9 })).toBeUndefined();
    expect(logger.entries.filter((e) => e.level === 'warn')).toHaveLength(values.length); // missing: no warning
  });
});
