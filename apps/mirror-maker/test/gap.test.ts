/**
 * Source retention deleting data the mirror had not copied yet. The mirror logs an error naming
 * the topic, the broker-partition and the lost offset range, in bytes and (estimated) messages;
 * with `--on-gap continue` it goes on mirroring, with `--on-gap fail` (the default) it exits 1
 * with one line on stderr and commits nothing past the gap. Its metrics port counts the gap, its
 * bytes and the messages copied, and shows the lag.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { SimpleConsumer, type ZkProducer } from '@klog/client';
import { ClusterReader, MirrorProcess, cleanup, sleep, committedOffsets, countValues, mirrorArgs, newProducer, produce, startCluster, waitFor, type Cluster, type Sent } from '../src/testing.js';

afterAll(cleanup);

interface Gap {
  source: Cluster;
  target: Cluster;
  producer: ZkProducer;
  reader: ClusterReader;
  offsets: SimpleConsumer;
  first: Sent[];
  lost: Sent[];
  /**
   * Messages produced after retention deleted the lost ones, one every 200 ms until close (so
   * that the active segment never ages out), the first before the mirror comes back.
   */
  after: Sent[];
  /** The committed offset before the gap, where the lost messages start. */
  committed: number;
  /** The earliest offset kept after retention: where the lost messages end. */
  end: number;
  close(): Promise<void>;
}

/** 100 messages mirrored and committed, the mirror stopped, then 300 more that retention deletes before the mirror comes back. */
async function makeGap(group: string, extra: readonly string[]): Promise<Gap> {
  // Segments of 2 KiB deleted 3 s after their last write.
  const [source, target] = await Promise.all([
    startCluster('src', 1, ['--num-partitions', '1', '--segment-bytes', '2048', '--retention-ms', '3000', '--retention-check-interval-ms', '200']),
    startCluster('dst', 1),
  ]);
  const producer = newProducer(source.zookeeper);
  const reader = new ClusterReader(target.zookeeper);
  const offsets = new SimpleConsumer({ host: '127.0.0.1', port: source.brokers[0]!.port });
  const args = mirrorArgs([source.zookeeper], target.zookeeper, group, ['--whitelist', 'logs', ...extra]);
  const first = await produce(producer, 'logs', Array.from({ length: 100 }, (_, i) => ({ value: `logs|first|${i}` })));
  const mirror = await new MirrorProcess(args).mirroring(1);
  await waitFor('the first 100 in the target', async () => (await reader.poll(['logs'])).length >= 100, 30_000);
  const end1 = await offsets.latestOffset('logs', 0);
  await waitFor('the mirror to commit the log end', async () => (await committedOffsets(source.zookeeper, group, 'logs')).get('0-0') === end1, 10_000);
  expect(await mirror.stop()).toBe(0);
  const committed = (await committedOffsets(source.zookeeper, group, 'logs')).get('0-0')!;

  // While the mirror is down: 300 messages, then retention deletes them all.
  const lost = await produce(producer, 'logs', Array.from({ length: 300 }, (_, i) => ({ value: `logs|lost|${i}` })));
  await waitFor('the 300 to be flushed', async () => (await offsets.latestOffset('logs', 0)) > lost.at(-1)!.offset);
  const end = await offsets.latestOffset('logs', 0);
  expect(lost[0]!.offset).toBe(committed);
  await waitFor('retention to delete the uncopied messages', async () => (await offsets.earliestOffset('logs', 0)) === end, 20_000);
  const after: Sent[] = [];
  let trickling = true;
  const trickle = (async () => {
    for (let i = 0; trickling; i++) {
      after.push(...(await produce(producer, 'logs', [{ value: `logs|after|${i}` }])));
      await sleep(200);
    }
  })();
  await waitFor('messages after the gap', async () => after.length >= 5 && (await offsets.latestOffset('logs', 0)) > after.at(-1)!.offset);
  return {
    source,
    target,
    producer,
    reader,
    offsets,
    first,
    lost,
    after,
    committed,
    end,
    async close() {
      trickling = false;
      await trickle.catch(() => {});
      await offsets.close();
      await reader.close();
      await producer.close().catch(() => {});
    },
  };
}

describe('klog-mirror-maker and source retention', () => {
  it('--on-gap continue: reports the range retention deleted before it was copied, then continues', async () => {
    const g = await makeGap('gappy', ['--on-gap', 'continue']);
    try {
      const mirror = await new MirrorProcess(mirrorArgs([g.source.zookeeper], g.target.zookeeper, 'gappy', ['--whitelist', 'logs', '--on-gap', 'continue', '--metrics-port', '0'])).mirroring(1);
      await waitFor('the gap error', () => mirror.logs(/^gap:/).length > 0, 20_000);
      const gap = mirror.logs(/^gap:/)[0]!;
      console.log(`gap: ${gap.msg}`);
      expect(gap.level).toBe(50); // pino error
      expect(gap).toMatchObject({ topic: 'logs', brokerId: 0, partition: 0, lostFrom: g.committed, lostTo: g.end, lostBytes: g.end - g.committed, onGap: 'continue' });
      expect(gap.msg).toContain(`logs 0-0 offsets [${g.committed}, ${g.end}) (${g.end - g.committed} bytes, about `);
      // Estimated from the messages kept after the gap, of about the same size.
      expect(gap['lostMessages'] as number).toBeGreaterThan(250);
      expect(gap['lostMessages'] as number).toBeLessThan(350);

      // Mirroring goes on after the gap.
      await waitFor('20 messages produced after the gap', () => g.after.length >= 20, 30_000);
      const after = g.after.slice(0, 20);
      await waitFor('the messages produced after the gap', async () => {
        const got = countValues(await g.reader.poll(['logs']));
        return after.every((s) => got.has(s.value));
      }, 30_000);
      const counts = countValues(await g.reader.poll(['logs']));
      expect(g.first.every((s) => counts.get(s.value) === 1)).toBe(true);
      expect(g.lost.some((s) => counts.has(s.value))).toBe(false);
      expect(after.every((s) => counts.get(s.value) === 1)).toBe(true);

      // The metrics port: the gap and its bytes, the messages copied, and the lag (as of the last progress line).
      await waitFor('the metrics port', () => mirror.logs(/^mirror maker started$/).length > 0);
      const metricsUrl = `http://127.0.0.1:${mirror.logs(/^mirror maker started$/)[0]!.metricsPort as number}/metrics`;
      const sample = (text: string, name: string, labels: string): number | undefined => {
        const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
        return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
      };
      const bySource = `source="${g.source.zookeeper}"`;
      let text = '';
      await waitFor('the lag in the metrics', async () => {
        text = await (await fetch(metricsUrl)).text();
        return sample(text, 'klog_mirror_partition_lag_bytes', `${bySource},topic="logs",partition="0-0"`) !== undefined;
      }, 20_000);
      expect(sample(text, 'klog_mirror_gaps_total', bySource)).toBe(1);
      expect(sample(text, 'klog_mirror_gap_bytes_total', bySource)).toBe(g.end - g.committed);
      expect(sample(text, 'klog_mirror_messages_copied_total', bySource)).toBeGreaterThanOrEqual(after.length);
      expect(sample(text, 'klog_mirror_lag_bytes', bySource)).toBeLessThan(2048); // a trickle of one message every 200 ms
      expect(text).toMatch(/^process_cpu_user_seconds_total /m);
      expect(await mirror.stop()).toBe(0);
    } finally {
      await g.close();
    }
  });

  it('--on-gap fail (the default): exits 1 with one line naming the gap and commits nothing past it', async () => {
    const g = await makeGap('strict', []);
    try {
      // The messages after the gap are there to be copied: the mirror must not copy or commit them.
      const mirror = new MirrorProcess(mirrorArgs([g.source.zookeeper], g.target.zookeeper, 'strict', ['--whitelist', 'logs']));
      const code = await new Promise<number | null>((resolve) => mirror.proc.once('exit', (c) => resolve(c)));
      expect(code).toBe(1);
      const stderr = mirror.stderr.join('').trim().split('\n');
      console.log(`on-gap fail: ${stderr.join(' | ')}`);
      expect(stderr).toHaveLength(1);
      expect(stderr[0]).toMatch(new RegExp(`^klog-mirror-maker: gap: source retention deleted logs 0-0 offsets \\[${g.committed}, ${g.end}\\) \\(${g.end - g.committed} bytes, about \\d+ messages\\)`));
      expect(stderr[0]).toContain('--on-gap fail');
      expect((await committedOffsets(g.source.zookeeper, 'strict', 'logs')).get('0-0')).toBe(g.committed);
      const counts = countValues(await g.reader.poll(['logs']));
      expect(g.after.some((s) => counts.has(s.value))).toBe(false);
    } finally {
      await g.close();
    }
  });
});
