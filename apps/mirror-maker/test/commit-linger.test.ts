/**
 * With the audit on, each commit first publishes the audit counts of the copies; those must not
 * wait for the target producer's linger, or every commit comes one linger late and a crash
 * copies again a linger's worth of messages instead of at most one commit interval's.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ClusterReader, MirrorProcess, cleanup, committedOffsets, countValues, mirrorArgs, newProducer, produce, sleep, startCluster, type Sent } from '../src/testing.js';

afterAll(cleanup);

describe('klog-mirror-maker commits with the audit on', () => {
  it('a kill -9 after the copies are acknowledged copies again at most one commit interval of messages, whatever the linger', async () => {
    const [source, target] = await Promise.all([startCluster('src', 1), startCluster('dst', 1)]);
    const producer = newProducer(source.zookeeper, true); // creation times: the audit counts them
    const reader = new ClusterReader(target.zookeeper);
    // Full batches of 10 go at once; only what waits for a linger is held (3 s).
    const args = mirrorArgs([source.zookeeper], target.zookeeper, 'lingering', [
      '--whitelist', 'events', '--commit-interval-ms', '200', '--linger-ms', '3000', '--batch-size', '10', '--audit-window-ms', '10000',
    ]);
    try {
      await producer.partitions('events'); // the topic exists, so the mirror selects it at once
      const first = await new MirrorProcess(args).mirroring(1);
      const sent: Sent[] = [];
      // About 200 messages a second for 5 s.
      for (let i = 0; i < 50; i++) {
        sent.push(...(await produce(producer, 'events', Array.from({ length: 20 }, (_, j) => ({ value: `events|${i * 20 + j}` })))));
        await sleep(100);
      }
      await reader.waitForValues(['events'], sent.map((s) => s.value), 30_000);
      const copiedAt = Date.now();
      await sleep(1000); // five commit intervals
      await first.kill9();
      const committed = await committedOffsets(source.zookeeper, 'lingering', 'events');
      console.log(`commit-linger: killed ${Date.now() - copiedAt} ms after every copy was acknowledged; committed ${JSON.stringify(Object.fromEntries(committed))}`);

      const second = await new MirrorProcess(args).mirroring(1);
      await sleep(5000); // it copies again what was not committed (and lingers up to 3 s)
      const counts = countValues(await reader.poll(['events']));
      const duplicates = [...counts.values()].reduce((n, c) => n + c - 1, 0);
      console.log(`commit-linger: ${sent.length} messages, ${duplicates} copied twice`);
      expect(sent.every((s) => counts.has(s.value))).toBe(true);
      // One commit interval (200 ms) of messages at 200 a second is 40.
      expect(duplicates).toBeLessThanOrEqual(40);
      expect(await second.stop()).toBe(0);
    } finally {
      await reader.close();
      await producer.close().catch(() => {});
    }
  });
});
