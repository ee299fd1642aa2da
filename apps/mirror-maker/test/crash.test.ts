/**
 * `kill -9` of the mirror maker at random points, five times in one run, restarting it each
 * time: nothing is lost, and every duplicate is a message after a committed offset, i.e. one
 * the killed mirror had copied but not committed yet. The test reports the duplicates.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { ClusterReader, MirrorProcess, cleanup, committedOffsets, countValues, mirrorArgs, newProducer, produce, sleep, startCluster, waitFor, type Sent } from '../src/testing.js';

afterAll(cleanup);

const kills = 5;

describe('klog-mirror-maker killed with SIGKILL', () => {
  it('loses nothing over five kills; duplicates start at committed offsets', async () => {
    const [source, target] = await Promise.all([startCluster('src', 1), startCluster('dst', 1)]);
    const producer = newProducer(source.zookeeper);
    const sent: Sent[] = [];
    // Produce in the background until the last kill is over: about 1,500 messages a second.
    let killing = true;
    const producing = (async () => {
      for (let i = 0; killing; i += 200) {
        const batch = Array.from({ length: 200 }, (_, j) => ({ value: `events|${i + j}`, ...((i + j) % 3 === 0 && { key: `k${(i + j) % 17}` }) }));
        sent.push(...(await produce(producer, 'events', batch)));
        await sleep(100);
      }
    })();
    const args = mirrorArgs([source.zookeeper], target.zookeeper, 'crashy', ['--whitelist', 'events', '--max-in-flight-messages', '1000']);
    /** Committed offsets (`b-p`) seen after each kill, the start of what the next mirror copies again. */
    const commitPoints = new Map<string, Set<number>>();
    const reader = new ClusterReader(target.zookeeper);
    try {
      await waitFor('the first messages in the source', () => sent.length > 0);
      let mirror = await new MirrorProcess(args).mirroring(1);
      const mirrors = [mirror];
      for (let k = 1; k <= kills; k++) {
        // Kill at a random point after it made some progress.
        const before = (await reader.poll(['events'])).length;
        await waitFor(`mirror ${k} to copy something`, async () => (await reader.poll(['events'])).length > before, 30_000);
        await sleep(300 + Math.random() * 1500);
        await mirror.kill9();
        const committed = await committedOffsets(source.zookeeper, 'crashy', 'events');
        for (const [bp, offset] of committed) {
          const set = commitPoints.get(bp) ?? new Set<number>();
          set.add(offset);
          commitPoints.set(bp, set);
        }
        console.log(`kill ${k}: committed ${JSON.stringify(Object.fromEntries(committed))}`);
        mirror = await new MirrorProcess(args).mirroring(1);
        mirrors.push(mirror);
      }
      await sleep(1000);
      killing = false;
      await producing;
      const total = sent.length;
      await reader.waitForValues(['events'], sent.map((s) => s.value), 90_000);
      await sleep(1000);
      const counts = countValues(await reader.poll(['events']));
      expect(await mirror.stop()).toBe(0);

      expect(total).toBeGreaterThan(10_000);
      const missing = sent.filter((s) => !counts.has(s.value));
      expect(missing).toEqual([]);

      // Runs of duplicated messages per source partition, in source order: each starts at a
      // committed offset seen after a kill (or at 0, before the first commit).
      let duplicates = 0;
      const runs: Array<{ partition: string; from: number; messages: number }> = [];
      const byPartition = new Map<string, Sent[]>();
      for (const s of sent) {
        const k = `${s.brokerId}-${s.partition}`;
        byPartition.set(k, [...(byPartition.get(k) ?? []), s]);
      }
      for (const [bp, list] of byPartition) {
        list.sort((x, y) => x.offset - y.offset);
        let run: { partition: string; from: number; messages: number } | undefined;
        for (const s of list) {
          const n = counts.get(s.value)!;
          if (n > 1) {
            duplicates += n - 1;
            if (!run) {
              run = { partition: bp, from: s.offset, messages: 0 };
              runs.push(run);
            }
            run.messages++;
          } else {
            run = undefined;
          }
        }
      }
      console.log(`crash: ${total} messages, ${kills} kills, ${duplicates} duplicates in ${runs.length} runs: ${JSON.stringify(runs)}`);
      for (const r of runs) {
        const points = new Set([0, ...(commitPoints.get(r.partition) ?? [])]);
        expect(points.has(r.from), `duplicate run at ${r.partition} offset ${r.from} does not start at a committed offset ${JSON.stringify([...points])}`).toBe(true);
      }
      // A run holds at most what one commit interval (500 ms, counted twice for slack) copies at
      // the highest rate the mirrors logged, plus the messages in flight (1000).
      const maxRate = Math.max(...mirrors.flatMap((m) => m.logs('mirror progress').map((l) => l['rate'] as number)));
      const bound = 1000 + Math.ceil(maxRate * 1.0);
      console.log(`crash: highest rate ${maxRate} msg/s; largest run ${Math.max(0, ...runs.map((r) => r.messages))} messages; bound ${bound}`);
      for (const r of runs) expect(r.messages).toBeLessThanOrEqual(bound);
      // Every copy of a message beyond the first is accounted for by the runs.
      expect([...counts.values()].reduce((a, n) => a + n, 0)).toBe(total + duplicates);
    } finally {
      killing = false;
      await producing.catch(() => {});
      await reader.close();
      await producer.close().catch(() => {});
    }
  });
});
