/**
 * Consumer groups over a 3-broker cluster (docs/design.md §4): two groups read the same keyed topic,
 * each message exactly once per group with per-key order; a member joins and the partitions
 * are spread again within 10 s while consumption goes on. Brokers and members are processes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ZkProducer } from '@klog/client';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { type BrokerProcess, Member, type Received, ZkClient, consumerOf, counts, killAll, owners, removeLogDirs, settled, startBrokers, waitFor } from './harness.js';

const TOPIC = 'clicks';
const PARTITIONS = ['0-0', '0-1', '1-0', '1-1', '2-0', '2-1'];
const KEYS = 500;

describe('two groups over 3 brokers x 2 partitions', () => {
  let connect: string;
  let zk: ZkClient;
  let brokers: BrokerProcess[] = [];
  let producer: ZkProducer;
  const receivedA: Received[] = [];
  const receivedB: Received[] = [];
  const groupA: Member[] = [];
  let memberB: Member;
  /** Values sent, with the partition the producer put them in. */
  const sent = new Map<string, string>();
  let seq = 0;
  const perKey = new Array<number>(KEYS).fill(0);

  /** Sends `n` keyed records, `key-<k>:<seq of that key>`, acknowledged once appended. */
  async function produce(n: number): Promise<void> {
    for (let done = 0; done < n; ) {
      const batch = Array.from({ length: Math.min(2000, n - done) }, () => {
        const k = seq++ % KEYS;
        return { key: `key-${k}`, value: `key-${k}:${perKey[k]!++}` };
      });
      const meta = await producer.send(TOPIC, batch);
      meta.forEach((m, i) => sent.set(batch[i]!.value, `${m.brokerId}-${m.partition}`));
      done += batch.length;
    }
  }

  beforeAll(async () => {
    await assertZooKeeperRunning();
    connect = testConnectString('klog-cluster');
    zk = await ZkClient.connect(connect);
    brokers = await startBrokers(connect, 3, ['--num-partitions', '2', '--flush-ms', '50', '--zk-session-timeout-ms', '3000']);
    producer = new ZkProducer({ zookeeper: connect, acks: 1, batchSize: 500 });
    await producer.partitions(TOPIC); // creates the topic on the three brokers
    await waitFor('6 partitions registered', async () => (await zk.getChildren(`/brokers/topics/${TOPIC}`)).length === 3);
  });

  afterAll(async () => {
    await producer?.close();
    await killAll();
    await zk?.close();
    removeLogDirs(brokers);
    await removeChroot(connect);
  });

  it('group A (3 members) and group B (1 member) each receive 60,000 keyed messages exactly once, in key order', async () => {
    for (const id of ['a1', 'a2', 'a3']) groupA.push(await new Member({ zookeeper: connect, group: 'A', topic: TOPIC, consumerId: id }, receivedA).started());
    memberB = await new Member({ zookeeper: connect, group: 'B', topic: TOPIC, consumerId: 'b1' }, receivedB).started();
    await waitFor('group A settled', () => settled(zk, 'A', TOPIC, PARTITIONS, ['a1', 'a2', 'a3']), 15_000);
    const ownA = await owners(zk, 'A', TOPIC);
    expect(Object.fromEntries(ownA)).toEqual({ '0-0': 'a1-0', '0-1': 'a1-0', '1-0': 'a2-0', '1-1': 'a2-0', '2-0': 'a3-0', '2-1': 'a3-0' });
    const ownB = await owners(zk, 'B', TOPIC);
    expect([...ownB.keys()].sort()).toEqual(PARTITIONS);
    expect(new Set(ownB.values())).toEqual(new Set(['b1-0']));

    const started = Date.now();
    await produce(60_000);
    await waitFor('60,000 messages in each group', () => receivedA.length >= 60_000 && receivedB.length >= 60_000, 120_000);
    await new Promise((r) => setTimeout(r, 1000)); // anything extra would show now
    console.log(`60,000 messages produced and consumed by both groups in ${Date.now() - started} ms`);

    for (const [name, received] of [['A', receivedA], ['B', receivedB]] as const) {
      const c = counts(received);
      expect(c.size, `distinct messages in group ${name}`).toBe(60_000);
      expect([...c.values()].filter((x) => x !== 1), `messages received more than once by group ${name}`).toEqual([]);
      for (const r of received) expect(sent.get(r.v)).toBe(`${r.b}-${r.p}`);
      // Per-key order, and one partition per key.
      const next = new Map<string, number>();
      const partitionOfKey = new Map<string, string>();
      for (const r of received) {
        const [key, n] = r.v.split(':');
        expect(Number(n), `order of ${key} in group ${name}`).toBe(next.get(key!) ?? 0);
        next.set(key!, Number(n) + 1);
        const bp = `${r.b}-${r.p}`;
        expect(partitionOfKey.get(key!) ?? bp).toBe(bp);
        partitionOfKey.set(key!, bp);
      }
      expect(new Set(partitionOfKey.values()).size).toBe(6);
    }
    // Within A, each member received exactly its own two partitions.
    for (const m of groupA) {
      const own = [...new Set(m.received.map((r) => `${r.b}-${r.p}`))].sort();
      expect(own).toEqual([...ownA].filter(([, t]) => consumerOf(t) === m.id).map(([bp]) => bp).sort());
    }
  });

  it('a 4th member joins group A: within 10 s every partition has exactly one owner, and consumption goes on', async () => {
    const before = receivedA.length;
    const joined = Date.now();
    groupA.push(await new Member({ zookeeper: connect, group: 'A', topic: TOPIC, consumerId: 'a4' }, receivedA).started());
    await waitFor('group A settled with 4 members', () => settled(zk, 'A', TOPIC, PARTITIONS, ['a1', 'a2', 'a3', 'a4']), 10_000);
    console.log(`4th member joined; ownership settled in ${Date.now() - joined} ms`);
    const own = await owners(zk, 'A', TOPIC);
    expect(Object.fromEntries(own)).toEqual({ '0-0': 'a1-0', '0-1': 'a1-0', '1-0': 'a2-0', '1-1': 'a2-0', '2-0': 'a3-0', '2-1': 'a4-0' });
    await produce(6000);
    await waitFor('6,000 more messages in group A', () => receivedA.length >= before + 6000, 60_000);
    await new Promise((r) => setTimeout(r, 1000));
    const c = counts(receivedA);
    expect(c.size).toBe(66_000);
    expect([...c.values()].filter((x) => x !== 1), 'duplicates in group A across the rebalance').toEqual([]);
    const a4 = groupA[3]!.received.filter((r) => r.t >= joined);
    expect(new Set(a4.map((r) => `${r.b}-${r.p}`))).toEqual(new Set(['2-1']));
    for (const m of groupA) expect(m.errors).toEqual([]);
    expect(memberB.errors).toEqual([]);
  });
});
