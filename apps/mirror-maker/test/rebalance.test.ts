/**
 * Rebalances of the source group while mirroring (a second mirror maker joins, then the first
 * leaves): the in-flight messages of every released partition are acknowledged and committed
 * before the release, so with no crash nothing is copied twice and nothing is lost.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ClusterReader, MirrorProcess, cleanup, countValues, mirrorArgs, newProducer, produce, sleep, startCluster, waitFor, type Sent } from '../src/testing.js';

afterAll(cleanup);

describe('klog-mirror-maker through rebalances', () => {
  it('flushes and commits before releasing partitions: no duplicates, no loss', async () => {
    const [source, target] = await Promise.all([startCluster('src', 1, ['--num-partitions', '4']), startCluster('dst', 1)]);
    const producer = newProducer(source.zookeeper);
    const sent: Sent[] = [];
    let producing = true;
    const background = (async () => {
      for (let i = 0; producing; i += 200) {
        sent.push(...(await produce(producer, 'events', Array.from({ length: 200 }, (_, j) => ({ value: `events|${i + j}` })))));
        await sleep(100);
      }
    })();
    const reader = new ClusterReader(target.zookeeper);
    // A long commit interval: without the flush before a release, a rebalance would copy again
    // everything acknowledged since the last commit.
    const args = mirrorArgs([source.zookeeper], target.zookeeper, 'pair', ['--whitelist', 'events', '--commit-interval-ms', '5000']);
    try {
      await waitFor('the first messages in the source', () => sent.length > 0);
      const first = await new MirrorProcess(args).mirroring(1);
      await sleep(2000);
      const second = await new MirrorProcess(args).mirroring(1);
      await waitFor('the first mirror to release partitions to the second', () => first.logs('in-flight messages acknowledged before release; committing').length > 0, 20_000);
      await sleep(2000);
      expect(await first.stop()).toBe(0);
      await sleep(1500);
      producing = false;
      await background;
      await reader.waitForValues(['events'], sent.map((s) => s.value), 60_000);
      await sleep(1000);
      const counts = countValues(await reader.poll(['events']));
      const duplicates = [...counts.values()].reduce((a, n) => a + n - 1, 0);
      const released = [first, second].flatMap((m) => m.logs(/before release|releasing partitions/));
      console.log(`rebalance: ${sent.length} messages, ${duplicates} duplicates, ${released.length} releases: ${released.map((l) => `${String(l['why'])} waited ${String(l['waitedMs'])} ms`).join('; ')}`);
      expect(sent.filter((s) => !counts.has(s.value))).toEqual([]);
      expect(duplicates).toBe(0);
      expect(released.every((l) => l.msg === 'in-flight messages acknowledged before release; committing')).toBe(true);
      expect(await second.stop()).toBe(0);
    } finally {
      producing = false;
      await background.catch(() => {});
      await reader.close();
      await producer.close().catch(() => {});
    }
  });
});
