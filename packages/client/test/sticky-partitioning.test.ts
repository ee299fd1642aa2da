/**
 * Keyless records against a real broker (docs/design.md §5): they land in full message sets,
 * a batch's worth per partition, and keyed or named records go where they always did.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { messageSizeInBytes } from '@klog/protocol';
import { hashPartitioner, Producer } from '../src/index.js';
import { startTestBroker, type TestBroker } from './helpers.js';

/** Messages of `payloadBytes` stored per partition of `topic`, from the sizes of its segment files. */
function storedPerPartition(logDir: string, topic: string, payloadBytes: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const d of readdirSync(logDir)) {
    if (!d.startsWith(`${topic}-`)) continue;
    let bytes = 0;
    for (const f of readdirSync(join(logDir, d))) bytes += statSync(join(logDir, d, f)).size;
    if (bytes > 0) out.set(Number(d.slice(topic.length + 1)), bytes / messageSizeInBytes(payloadBytes));
  }
  return out;
}

describe('sticky partitioning against a broker', () => {
  let broker: TestBroker;
  beforeAll(async () => {
    broker = await startTestBroker({ numPartitions: 500 });
  });
  afterAll(async () => {
    await broker.stop();
  });

  it('sends keyless records fire-and-forget as full sets, one partition per batch', async () => {
    // A long linger: only a full batch (20 messages to the broker) sends a request.
    const p = new Producer({ brokerList: broker.address, batchSize: 20, lingerMs: 60_000 });
    const payload = Buffer.alloc(100, 7);
    expect(await p.partitionCount('keyless')).toBe(500);
    for (let i = 0; i < 10; i++) await p.send('keyless', Array.from({ length: 40 }, () => ({ value: payload })));
    await p.flush();
    await p.close();
    let stored = new Map<number, number>();
    for (let tries = 0; tries < 100; tries++) {
      stored = storedPerPartition(broker.logDir, 'keyless', payload.length);
      if ([...stored.values()].reduce((a, b) => a + b, 0) === 400) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const counts = [...stored.values()];
    expect(counts.reduce((a, b) => a + b, 0)).toBe(400);
    // 400 records in 20 batches of 20: at most 20 partitions, each holding whole batches
    // (per record at random, about 275 of the 500 partitions would hold one or two each).
    expect(stored.size).toBeLessThanOrEqual(20);
    expect(stored.size).toBeGreaterThan(1);
    for (const c of counts) expect(c % 20).toBe(0);
  });

  it('leaves keyed and named records where they were, and they do not break a batch of keyless ones', async () => {
    const p = new Producer({ brokerList: broker.address, acks: 1, batchSize: 10 });
    const records = Array.from({ length: 60 }, (_, i) => (i % 3 === 0 ? { value: `k${i}`, key: `user-${i}` } : i % 3 === 1 ? { value: `n${i}`, partition: i % 500 } : { value: `x${i}` }));
    const meta = await p.send('mixed', records);
    records.forEach((r, i) => {
      if ('key' in r) expect(meta[i]!.partition).toBe(hashPartitioner(Buffer.from(r.key!), 500));
      else if ('partition' in r) expect(meta[i]!.partition).toBe(r.partition);
    });
    // The 20 keyless records: 10 to one partition, the next 10 to another.
    const keyless = meta.filter((_, i) => i % 3 === 2).map((m) => m.partition);
    expect(new Set(keyless.slice(0, 10)).size).toBe(1);
    expect(new Set(keyless.slice(10)).size).toBe(1);
    expect(keyless[10]).not.toBe(keyless[0]);
    await p.close();
  });
});
