/**
 * Two source clusters, one target: every message of the selected topics arrives exactly once
 * (no faults), keyed messages keep their key, metadata and per-key order, a blacklisted topic
 * is not copied, and a topic created on a source after the mirror started is copied too.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ZkProducer } from '@klog/client';
import { ZkClient } from '@klog/zk-registry';
import { ClusterReader, MirrorProcess, cleanup, countValues, mirrorArgs, newProducer, produce, startCluster, type Sent } from '../src/testing.js';

afterAll(cleanup);

describe('klog-mirror-maker over two sources', () => {
  it('copies 100,000 messages exactly once, keeps keys in order, skips the blacklist, follows new topics', async () => {
    const [a, b, target] = await Promise.all([startCluster('a', 1), startCluster('b', 1), startCluster('t', 2)]);
    const plainA = newProducer(a.zookeeper);
    const plainB = newProducer(b.zookeeper);
    // Keyed messages carry their key (and creation time, host) in the message.
    const stampedA = new ZkProducer({ zookeeper: a.zookeeper, acks: 1, batchSize: 500, lingerMs: 2, stampMetadata: true, metadataHost: 'online-a' });
    const stampedB = new ZkProducer({ zookeeper: b.zookeeper, acks: 1, batchSize: 500, lingerMs: 2, stampMetadata: true, metadataHost: 'online-b' });
    const values = (src: string, topic: string, n: number) => Array.from({ length: n }, (_, i) => ({ value: `${src}|${topic}|${i}` }));
    const keyed = (src: string, topic: string, n: number) =>
      Array.from({ length: n }, (_, i) => ({ value: `${src}|${topic}|${i}`, key: `${src}-key-${i % 37}`, timestamp: 1_600_000_000_000 + i }));
    const sent: Sent[] = [];
    try {
      // 100,000 in all over three topics; 25,000 keyed.
      sent.push(...(await produce(plainA, 'clicks', values('a', 'clicks', 30_000))));
      sent.push(...(await produce(stampedA, 'orders', keyed('a', 'orders', 20_000))));
      sent.push(...(await produce(plainB, 'clicks', values('b', 'clicks', 20_000))));
      sent.push(...(await produce(plainB, 'views', values('b', 'views', 25_000))));
      sent.push(...(await produce(stampedB, 'orders', keyed('b', 'orders', 5_000))));
      const secret = await produce(plainA, 'secret-audit', values('a', 'secret-audit', 500));
      expect(sent).toHaveLength(100_000);

      const mirror = new MirrorProcess(mirrorArgs([a.zookeeper, b.zookeeper], target.zookeeper, 'mirror', ['--blacklist', 'secret-.*', '--num-streams', '2']));
      await mirror.mirroring(2);

      // A topic created on a source after the mirror started.
      const late = await produce(stampedB, 'late-topic', keyed('b', 'late-topic', 1000));
      const all = [...sent, ...late];
      const expected = new Set(all.map((s) => s.value));

      const reader = new ClusterReader(target.zookeeper);
      const topics = ['clicks', 'orders', 'views', 'late-topic', 'secret-audit'];
      await reader.waitForValues(topics, expected, 90_000);
      // Let anything extra (a duplicate) arrive before counting.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const read = await reader.poll(topics);
      await reader.close();

      const counts = countValues(read);
      const duplicates = [...counts.values()].filter((n) => n > 1).length;
      const missing = [...expected].filter((v) => !counts.has(v)).length;
      const unexpected = [...counts.keys()].filter((v) => !expected.has(v));
      console.log(`mirror: ${expected.size} expected, ${read.length} read in the target, ${missing} missing, ${duplicates} duplicated, ${unexpected.length} unexpected`);
      expect(missing).toBe(0);
      expect(duplicates).toBe(0);
      expect(unexpected).toEqual([]);
      expect(read).toHaveLength(expected.size);

      // Each message is in the target topic of its source topic.
      for (const r of read) expect(r.value.split('|')[1]).toBe(r.topic);

      // The blacklisted topic does not exist in the target.
      const zk = await ZkClient.connect(target.zookeeper);
      expect(await zk.getChildren('/brokers/topics')).not.toContain('secret-audit');
      expect(await zk.getChildren('/brokers/topics')).toEqual(expect.arrayContaining(['clicks', 'orders', 'views', 'late-topic']));
      await zk.close();
      expect(secret).toHaveLength(500);

      // Keys survive, and with them the key partitioning and each key's order.
      const keyOf = new Map(all.filter((s) => s.key !== undefined).map((s) => [s.value, s.key!]));
      const byKey = new Map<string, typeof read>();
      for (const r of read) {
        const k = keyOf.get(r.value);
        if (k === undefined) {
          expect(r.key).toBeUndefined();
          continue;
        }
        expect(r.key).toBe(k);
        expect(r.timestamp).toBe(1_600_000_000_000 + Number(r.value.split('|')[2]));
        expect(r.host).toBe(r.value.startsWith('a|') ? 'online-a' : 'online-b');
        const list = byKey.get(`${r.topic}/${k}`) ?? [];
        list.push(r);
        byKey.set(`${r.topic}/${k}`, list);
      }
      expect(byKey.size).toBe(37 * 2 + 37);
      for (const [key, list] of byKey) {
        // One target partition per key, messages in log order, sequence numbers rising.
        expect(new Set(list.map((r) => `${r.brokerId}-${r.partition}`)).size, key).toBe(1);
        const seqs = list.sort((x, y) => x.offset - y.offset).map((r) => Number(r.value.split('|')[2]));
        expect(seqs, key).toEqual([...seqs].sort((x, y) => x - y));
      }

      // The mirror logged its rate and per-partition lag, and stops cleanly.
      const progress = mirror.logs('mirror progress');
      expect(progress.length).toBeGreaterThan(0);
      expect(progress.some((l) => (l['partitions'] as unknown[]).length > 0 && typeof l['rate'] === 'number')).toBe(true);
      expect(mirror.logs(/^gap:/).length).toBe(0);
      expect(await mirror.stop()).toBe(0);
    } finally {
      for (const p of [plainA, plainB, stampedA, stampedB]) await p.close().catch(() => {});
    }
  });
});
