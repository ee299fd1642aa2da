/**
 * Source retention deleting data the mirror had not copied yet: the mirror logs an error naming
 * the topic, the broker-partition and the lost offset range, then goes on mirroring; its metrics
 * port counts the gap, its bytes and the messages copied, and shows the lag.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { SimpleConsumer } from '@klog/client';
import { ClusterReader, MirrorProcess, cleanup, committedOffsets, countValues, mirrorArgs, newProducer, produce, startCluster, waitFor } from '../src/testing.js';

afterAll(cleanup);

describe('klog-mirror-maker and source retention', () => {
  it('reports the range retention deleted before it was copied, then continues', async () => {
    // Segments of 2 KiB deleted 3 s after their last write.
    const [source, target] = await Promise.all([
      startCluster('src', 1, ['--num-partitions', '1', '--segment-bytes', '2048', '--retention-ms', '3000', '--retention-check-interval-ms', '200']),
      startCluster('dst', 1),
    ]);
    const producer = newProducer(source.zookeeper);
    const reader = new ClusterReader(target.zookeeper);
    const broker = source.brokers[0]!;
    const offsets = new SimpleConsumer({ host: '127.0.0.1', port: broker.port });
    const args = mirrorArgs([source.zookeeper], target.zookeeper, 'gappy', ['--whitelist', 'logs']);
    try {
      const first = await produce(producer, 'logs', Array.from({ length: 100 }, (_, i) => ({ value: `logs|first|${i}` })));
      let mirror = await new MirrorProcess(args).mirroring(1);
      await waitFor('the first 100 in the target', async () => (await reader.poll(['logs'])).length >= 100, 30_000);
      const end1 = await offsets.latestOffset('logs', 0);
      await waitFor('the mirror to commit the log end', async () => (await committedOffsets(source.zookeeper, 'gappy', 'logs')).get('0-0') === end1, 10_000);
      expect(await mirror.stop()).toBe(0);
      const committed = (await committedOffsets(source.zookeeper, 'gappy', 'logs')).get('0-0')!;

      // While the mirror is down: 300 messages, then retention deletes them all.
      const lost = await produce(producer, 'logs', Array.from({ length: 300 }, (_, i) => ({ value: `logs|lost|${i}` })));
      await waitFor('the 300 to be flushed', async () => (await offsets.latestOffset('logs', 0)) > lost.at(-1)!.offset);
      const end2 = await offsets.latestOffset('logs', 0);
      expect(lost[0]!.offset).toBe(committed);
      await waitFor('retention to delete the uncopied messages', async () => (await offsets.earliestOffset('logs', 0)) === end2, 20_000);

      mirror = await new MirrorProcess([...args, '--metrics-port', '0']).mirroring(1);
      await waitFor('the gap error', () => mirror.logs(/^gap:/).length > 0, 20_000);
      const gap = mirror.logs(/^gap:/)[0]!;
      console.log(`gap: ${gap.msg}`);
      expect(gap.level).toBe(50); // pino error
      expect(gap).toMatchObject({ topic: 'logs', brokerId: 0, partition: 0, lostFrom: committed, lostTo: end2 });
      expect(gap.msg).toContain(`logs 0-0 offsets [${committed}, ${end2})`);

      // Mirroring goes on after the gap.
      const after = await produce(producer, 'logs', Array.from({ length: 50 }, (_, i) => ({ value: `logs|after|${i}` })));
      await waitFor('the messages produced after the gap', async () => {
        const got = countValues(await reader.poll(['logs']));
        return after.every((s) => got.has(s.value));
      }, 30_000);
      // The metrics port: the gap and its bytes, the messages copied, and the lag once caught up.
      await waitFor('the metrics port', () => mirror.logs(/^mirror maker started$/).length > 0);
      const metricsUrl = `http://127.0.0.1:${mirror.logs(/^mirror maker started$/)[0]!.metricsPort as number}/metrics`;
      const sample = (text: string, name: string, labels: string): number | undefined => {
        const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
        return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
      };
      const bySource = `source="${source.zookeeper}"`;
      let text = '';
      await waitFor('lag 0 in the metrics', async () => {
        text = await (await fetch(metricsUrl)).text();
        return sample(text, 'klog_mirror_lag_bytes', bySource) === 0 && sample(text, 'klog_mirror_partition_lag_bytes', `${bySource},topic="logs",partition="0-0"`) === 0;
      }, 20_000);
      expect(sample(text, 'klog_mirror_gaps_total', bySource)).toBe(1);
      expect(sample(text, 'klog_mirror_gap_bytes_total', bySource)).toBe(end2 - committed);
      expect(sample(text, 'klog_mirror_messages_copied_total', bySource)).toBe(after.length);
      expect(sample(text, 'klog_mirror_messages_in_flight', bySource)).toBe(0);
      expect(text).toMatch(/^process_cpu_user_seconds_total /m);

      const counts = countValues(await reader.poll(['logs']));
      expect(first.every((s) => counts.get(s.value) === 1)).toBe(true);
      expect(lost.some((s) => counts.has(s.value))).toBe(false);
      expect(after.every((s) => counts.get(s.value) === 1)).toBe(true);
      expect(await mirror.stop()).toBe(0);
    } finally {
      await offsets.close();
      await reader.close();
      await producer.close().catch(() => {});
    }
  });
});
