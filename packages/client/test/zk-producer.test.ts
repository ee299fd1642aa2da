/**
 * ZkProducer against a real ZooKeeper and in-process brokers in cluster mode (docs/design.md §4, §5):
 * discovery, key partitioning over the sorted (broker, partition) list, topic creation,
 * brokers joining, leaving and coming back.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Broker, startBroker } from '@klog/broker';
import { BrokerRegistry, ZkClient } from '@klog/zk-registry';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { sleep, waitFor as poll } from '@klog/retry';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { hashPartitioner, PartitionUnavailableError, Producer, SimpleConsumer, ZkProducer, type ZkProducerOptions } from '../src/index.js';
import { silentLogger } from './helpers.js';

/** A cluster broker that can be stopped and started again on the same log dir. */
class ClusterBroker {
  broker: Broker | undefined;
  constructor(
    readonly id: number,
    readonly logDir: string,
    private readonly zookeeper: string,
  ) {}
  async start(): Promise<this> {
    this.broker = await startBroker(
      { logDir: this.logDir, host: '127.0.0.1', port: 0, brokerId: this.id, zookeeper: this.zookeeper, numPartitions: 2, flushIntervalMs: 10 },
      silentLogger,
    );
    return this;
  }
  async stop(): Promise<void> {
    await this.broker?.close();
    this.broker = undefined;
  }
  get address(): { host: string; port: number } {
    return { host: '127.0.0.1', port: this.broker!.port };
  }
  /** Payloads stored in one partition, in order (waits up to 2 s for the first when `min` > 0). */
  async read(topic: string, partition: number, min = 0): Promise<string[]> {
    const c = new SimpleConsumer(this.address);
    const out: string[] = [];
    try {
      const deadline = Date.now() + 2000;
      let offset = 0;
      for (;;) {
        const r = await c.fetch({ topic, partition, offset, maxBytes: 1 << 20 });
        for (const m of r.messages) out.push(m.payload.toString());
        offset = r.nextOffset;
        if (r.messages.length === 0 && (out.length >= min || Date.now() > deadline)) break;
        if (r.messages.length === 0) await sleep(50);
      }
    } catch (e) {
      if ((e as { codeName?: string }).codeName === 'UnknownTopicOrPartition') return out;
      throw e;
    }
    return out;
  }
}

/** Collects log entries so that tests can assert on warnings. */
function recordingLogger(): ZkProducerOptions['logger'] & { warnings: string[] } {
  const warnings: string[] = [];
  return {
    warnings,
    debug() {},
    info() {},
    warn(obj: object, msg?: string) {
      warnings.push(`${msg ?? ''} ${JSON.stringify(obj)}`);
    },
    error() {},
  };
}

/** Polls `check` every 50 ms, 15 s at the most by default. */
const waitFor = (what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> => poll(what, check, timeoutMs);

describe('ZkProducer', () => {
  let zookeeper: string;
  let work: string;
  let brokers: ClusterBroker[];
  let zk: ZkClient;
  let registry: BrokerRegistry;
  const producers: ZkProducer[] = [];
  const producer = (options: Partial<ZkProducerOptions> = {}): ZkProducer => {
    const p = new ZkProducer({ zookeeper, acks: 1, ...options });
    producers.push(p);
    return p;
  };

  beforeAll(async () => {
    await assertZooKeeperRunning();
  });
  beforeEach(async () => {
    zookeeper = testConnectString();
    work = mkdtempSync(join(tmpdir(), 'klog-zk-producer-'));
    brokers = await Promise.all([0, 1].map((id) => new ClusterBroker(id, join(work, `broker-${id}`), zookeeper).start()));
    zk = await ZkClient.connect(zookeeper);
    registry = new BrokerRegistry(zk);
  });
  afterEach(async () => {
    for (const p of producers.splice(0)) await p.close().catch(() => {});
    for (const b of brokers) await b.stop();
    await zk.close();
    await removeChroot(zookeeper);
    rmSync(work, { recursive: true, force: true });
  });

  it('creates a topic no broker holds on every live broker, then sends straight to the partitions', async () => {
    expect(await registry.topicPartitions('fresh')).toEqual([]);
    // Keyless records go 5 to a sticky partition, then 5 to another: 40 moves reach every partition.
    const p = producer({ batchSize: 5 });
    const meta = await p.send('fresh', Array.from({ length: 200 }, (_, i) => ({ value: `m${i}` })));
    expect(await registry.topicPartitions('fresh')).toEqual([
      { brokerId: 0, partitions: 2 },
      { brokerId: 1, partitions: 2 },
    ]);
    expect(await p.partitions('fresh')).toEqual([
      { brokerId: 0, partition: 0, live: true },
      { brokerId: 0, partition: 1, live: true },
      { brokerId: 1, partition: 0, live: true },
      { brokerId: 1, partition: 1, live: true },
    ]);
    // Sticky partitioning reaches all four; each record is where its metadata says.
    expect(new Set(meta.map((m) => `${m.brokerId}-${m.partition}`))).toEqual(new Set(['0-0', '0-1', '1-0', '1-1']));
    for (const b of brokers) {
      for (const partition of [0, 1]) {
        const expected = meta.filter((m) => m.brokerId === b.id && m.partition === partition).map((m) => `m${meta.indexOf(m)}`);
        expect(await b.read('fresh', partition, expected.length)).toEqual(expected);
      }
    }
  });

  it('uses the partitions registered for a known topic and does not spread it to other brokers', async () => {
    // The topic exists on broker 1 only (created there by a producer with a static broker list).
    const direct = new Producer({ brokerList: `127.0.0.1:${brokers[1]!.address.port}`, acks: 1 });
    await direct.send('only-on-1', [{ value: 'seed', partition: 0 }]);
    await direct.close();
    await waitFor('registration of only-on-1', async () => (await registry.topicPartitions('only-on-1')).length === 1);
    const p = producer({ batchSize: 5 });
    const meta = await p.send('only-on-1', Array.from({ length: 100 }, (_, i) => ({ value: `v${i}` })));
    expect(new Set(meta.map((m) => m.brokerId))).toEqual(new Set([1]));
    expect(new Set(meta.map((m) => m.partition))).toEqual(new Set([0, 1]));
    expect(await registry.topicPartitions('only-on-1')).toEqual([{ brokerId: 1, partitions: 2 }]);
  });

  it('partitions by key deterministically over the sorted (broker, partition) list', async () => {
    const p = producer();
    const keys = Array.from({ length: 30 }, (_, i) => `user-${i % 15}`);
    const meta = await p.send('keyed', keys.map((key, i) => ({ key, value: `${key}#${i}` })));
    const list = (await p.partitions('keyed')).map(({ brokerId, partition }) => ({ brokerId, partition }));
    expect(list).toEqual([
      { brokerId: 0, partition: 0 },
      { brokerId: 0, partition: 1 },
      { brokerId: 1, partition: 0 },
      { brokerId: 1, partition: 1 },
    ]);
    meta.forEach((m, i) => {
      const want = list[hashPartitioner(Buffer.from(keys[i]!), 4)]!;
      expect({ brokerId: m.brokerId, partition: m.partition }).toEqual(want);
    });
    expect(new Set(meta.map((m) => `${m.brokerId}-${m.partition}`)).size).toBeGreaterThan(1);
    // A second producer (fresh state, own session) agrees.
    const again = await producer().send('keyed', [{ key: 'user-7', value: 'again' }]);
    expect(again[0]).toMatchObject(list[hashPartitioner(Buffer.from('user-7'), 4)]!);
    // The records are in the partition reported, in order.
    const at = again[0]!;
    const inPartition = meta.filter((m) => m.brokerId === at.brokerId && m.partition === at.partition).length + 1;
    const stored = await brokers[at.brokerId]!.read('keyed', at.partition, inPartition);
    expect(stored).toHaveLength(inPartition);
    expect(stored.filter((v) => v.startsWith('user-7#') || v === 'again')).toEqual(['user-7#7', 'user-7#22', 'again']);
    // An explicit (broker, partition) overrides the key; a partition the topic lacks is refused.
    const named = await p.send('keyed', [{ key: 'user-7', value: 'named', brokerId: 1, partition: 1 }]);
    expect(named[0]).toMatchObject({ brokerId: 1, partition: 1 });
    await expect(p.send('keyed', [{ value: 'x', brokerId: 5, partition: 0 }])).rejects.toThrow(RangeError);
  });

  it('follows a broker that joins later: new topics are created on it, and it is used once it holds a topic', async () => {
    const p = producer({ batchSize: 5 });
    await p.send('before', [{ value: 'x' }]);
    expect((await p.partitions('before')).length).toBe(4);
    const third = await new ClusterBroker(2, join(work, 'broker-2'), zookeeper).start();
    brokers.push(third);
    // A topic created after the broker joined is created on all three.
    await waitFor('broker 2 seen by the producer', async () => (await p.brokers()).map((b) => b.id).includes(2));
    const meta = await p.send('after', Array.from({ length: 300 }, (_, i) => ({ value: `a${i}` })));
    expect(new Set(meta.map((m) => m.brokerId))).toEqual(new Set([0, 1, 2]));
    expect((await p.partitions('after')).length).toBe(6);
    // The topic created before gains broker 2's partitions once broker 2 holds it.
    const direct = new Producer({ brokerList: `127.0.0.1:${third.address.port}`, acks: 1 });
    await direct.send('before', [{ value: 'seed', partition: 0 }]);
    await direct.close();
    await waitFor('broker 2 in topic before', async () => (await p.partitions('before')).length === 6);
    const spread = await p.send('before', Array.from({ length: 300 }, (_, i) => ({ value: `b${i}` })));
    expect(new Set(spread.map((m) => m.brokerId))).toEqual(new Set([0, 1, 2]));
  });

  it('skips a stopped broker with a warning, fails keyed sends to it, and uses it again after restart', async () => {
    const logger = recordingLogger();
    const p = producer({ logger, batchSize: 5 });
    const list = (await p.partitions('orders')).map(({ brokerId, partition }) => ({ brokerId, partition }));
    expect(list).toHaveLength(4);
    // A key whose partition is on broker 1, and one on broker 0.
    const keyOn = (brokerId: number): string => {
      for (let i = 0; ; i++) if (list[hashPartitioner(Buffer.from(`k${i}`), 4)]!.brokerId === brokerId) return `k${i}`;
    };
    const key1 = keyOn(1);
    const key0 = keyOn(0);
    const first = await p.send('orders', [{ key: key1, value: 'before stop' }]);

    await brokers[1]!.stop();
    await waitFor('broker 1 down', async () => (await p.partitions('orders')).filter((x) => x.live).length === 2);
    expect(logger.warnings.some((w) => /broker is down/.test(w) && /"brokerId":1/.test(w) && /"topic":"orders"/.test(w))).toBe(true);
    // The full list is kept: the dead broker's partitions are still there, marked down.
    expect(await p.partitions('orders')).toEqual([
      { brokerId: 0, partition: 0, live: true },
      { brokerId: 0, partition: 1, live: true },
      { brokerId: 1, partition: 0, live: false },
      { brokerId: 1, partition: 1, live: false },
    ]);
    const during = await p.send('orders', Array.from({ length: 100 }, (_, i) => ({ value: `d${i}` })));
    expect(new Set(during.map((m) => m.brokerId))).toEqual(new Set([0]));
    // Still five at a time to one partition, over the live partitions only.
    for (let i = 0; i < 100; i += 5) expect(new Set(during.slice(i, i + 5).map((m) => m.partition)).size).toBe(1);
    expect(new Set(during.map((m) => m.partition))).toEqual(new Set([0, 1]));
    const err = await p.send('orders', [{ key: key0, value: 'fine' }, { key: key1, value: 'refused' }]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PartitionUnavailableError);
    expect((err as PartitionUnavailableError).brokerId).toBe(1);
    expect((err as Error).message).toMatch(/down.*not re-keyed/);
    // Keys on live brokers still go where they always did.
    expect((await p.send('orders', [{ key: key0, value: 'fine' }]))[0]).toMatchObject(list[hashPartitioner(Buffer.from(key0), 4)]!);

    await brokers[1]!.start(); // same id and log dir, a new port
    await waitFor('broker 1 back', async () => (await p.partitions('orders')).every((x) => x.live));
    const back = await p.send('orders', [{ key: key1, value: 'after restart' }]);
    expect(back[0]).toMatchObject({ brokerId: first[0]!.brokerId, partition: first[0]!.partition });
    // Appended after what was there before the stop: the same partition, over its new address.
    expect(back[0]!.offset).toBe(first[0]!.nextOffset);
    const after = await p.send('orders', Array.from({ length: 200 }, (_, i) => ({ value: `r${i}` })));
    expect(new Set(after.map((m) => m.brokerId))).toEqual(new Set([0, 1]));
  });

  it('fails clearly when no broker is alive', async () => {
    for (const b of brokers) await b.stop();
    const p = producer({ topicCreateTimeoutMs: 500 });
    await expect(p.send('nobody', [{ value: 'x' }])).rejects.toThrow(/no live broker/);
  });
});
