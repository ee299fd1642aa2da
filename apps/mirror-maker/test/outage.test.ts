/**
 * A target broker stopped for 10 s during mirroring: the mirror waits and sends again, nothing
 * is lost, and nothing is committed in the source for messages the target did not acknowledge.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ClusterReader, MirrorProcess, cleanup, committedOffsets, countValues, mirrorArgs, newProducer, produce, sleep, startCluster, waitFor, type Sent } from '../src/testing.js';

afterAll(cleanup);

describe('klog-mirror-maker with a target broker down', () => {
  it('waits, retries, loses nothing and commits only acknowledged messages', async () => {
    const [source, target] = await Promise.all([startCluster('src', 1), startCluster('dst', 2)]);
    // Keys stored in the messages: the mirror must keep each key's target partition, so the keys
    // of the stopped broker's partitions cannot go elsewhere.
    const producer = newProducer(source.zookeeper, true);
    const sent: Sent[] = [];
    let producing = true;
    // About 1,000 messages a second, a third of them keyed, until the outage is over.
    const background = (async () => {
      for (let i = 0; producing; i += 100) {
        const batch = Array.from({ length: 100 }, (_, j) => ({ value: `events|${i + j}`, ...((i + j) % 3 === 0 && { key: `k${(i + j) % 11}` }) }));
        sent.push(...(await produce(producer, 'events', batch)));
        await sleep(100);
      }
    })();
    const reader = new ClusterReader(target.zookeeper);
    try {
      await waitFor('the first messages in the source', () => sent.length > 0);
      const mirror = await new MirrorProcess(
        mirrorArgs([source.zookeeper], target.zookeeper, 'outage', ['--whitelist', 'ev.*', '--zk-session-timeout-ms', '10000', '--retry-backoff-max-ms', '1000']),
      ).mirroring(1);
      await waitFor('mirroring to be under way', async () => (await reader.poll(['events'])).length > 2000, 30_000);

      // Stop target broker 1 for 10 s.
      const down = target.brokers[1]!;
      expect(await down.stop()).toBe(0);
      const stoppedAt = Date.now();
      await waitFor('the mirror to retry', () => mirror.logs(/^target did not acknowledge/).length > 0, 10_000);
      const committedDuring: Array<Map<string, number>> = [];
      while (Date.now() - stoppedAt < 10_000) {
        committedDuring.push(await committedOffsets(source.zookeeper, 'outage', 'events'));
        await sleep(1000);
      }
      // Freeze the mirror (it can commit nothing more), restart the broker, and check that
      // every message below the committed offsets is in the target already.
      mirror.freeze();
      const committed = await committedOffsets(source.zookeeper, 'outage', 'events');
      await down.start();
      const before = countValues(await reader.poll(['events']));
      const committedButMissing = sent.filter((s) => s.offset < (committed.get(`${s.brokerId}-${s.partition}`) ?? 0) && !before.has(s.value));
      console.log(`outage: committed while frozen ${JSON.stringify(Object.fromEntries(committed))}; ${before.size} distinct in the target; ${committedButMissing.length} committed but missing`);
      expect(committedButMissing).toEqual([]);
      // During the outage the committed offsets stopped short of the source's end.
      const last = committedDuring.at(-1)!;
      const sourceEnd = new Map<string, number>();
      for (const s of sent) sourceEnd.set(`${s.brokerId}-${s.partition}`, Math.max(sourceEnd.get(`${s.brokerId}-${s.partition}`) ?? 0, s.offset));
      expect([...sourceEnd].some(([bp, end]) => (last.get(bp) ?? 0) < end)).toBe(true);
      mirror.thaw();

      producing = false;
      await background;
      await reader.waitForValues(['events'], sent.map((s) => s.value), 60_000);
      const counts = countValues(await reader.poll(['events']));
      const duplicates = [...counts.values()].reduce((a, n) => a + n - 1, 0);
      console.log(`outage: ${sent.length} messages, none lost, ${duplicates} duplicates, ${mirror.logs(/^target did not acknowledge/).length} resend rounds`);
      expect(sent.filter((s) => !counts.has(s.value))).toEqual([]);
      expect(mirror.logs('target acknowledged the resent messages').length).toBeGreaterThan(0);
      expect(await mirror.stop()).toBe(0);
    } finally {
      producing = false;
      await background.catch(() => {});
      await reader.close();
      await producer.close().catch(() => {});
    }
  });
});
