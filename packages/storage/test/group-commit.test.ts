/**
 * Group commit (docs/design.md §10): with `flush.policy=group` (the default) a flush starts as
 * soon as appended data waits and none runs, each flush carries what arrived during the one
 * before, a clean log costs nothing, and every byte a reader can see was fdatasynced first.
 */
import { describe, expect, it } from 'vitest';
import { flusherKind, flusherStats, Log, visibleUnsyncedBytes, type FlushEvent, type LogConfig } from '../src/index.js';
import { messages, payloads, tempDir } from './helpers.js';

/** Upper bounds far away, so only group commit can explain a flush. */
const farBounds: Partial<LogConfig> = { flushMessages: 1_000_000, flushIntervalMs: 600_000 };

const nextTurn = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('group commit', () => {
  it('is the default, and makes an append visible after one flush, without flush() or a timer', async () => {
    const log = Log.open({ dir: tempDir(), topic: 't', partition: 0, config: farBounds });
    expect(log.config.flushPolicy).toBe('group');
    const syncsBefore = flusherStats().syncs;
    const started = performance.now();
    const advanced = new Promise<number>((resolve) => log.onFlush(resolve));
    log.append(messages('a', 1), 1);
    log.append(messages('b', 1), 1); // same turn: the same flush
    expect(log.visibleEnd).toBe(0);
    expect(await advanced).toBe(26);
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(payloads(log.read(0, 100))).toEqual(['a-0', 'b-0']);
    if (flusherKind === 'native') expect(flusherStats().syncs - syncsBefore).toBe(1);
    await log.close();
  });

  it('carries everything appended during a flush in the one flush that follows it', async () => {
    const log = Log.open({ dir: tempDir(), topic: 't', partition: 0, config: farBounds });
    const events: FlushEvent[] = [];
    log.onFlushDone((e) => events.push(e));
    const ends: number[] = [];
    log.onFlush((end) => ends.push(end));
    log.append(messages('a', 1), 1);
    await nextTurn(); // the group flush has started: its fdatasync is in flight
    for (let i = 0; i < 5; i++) log.append(messages(`b${i}`, 1), 1);
    const all = log.logEndOffset;
    await log.flushedThrough(all);
    expect(ends).toEqual([13, all]);
    expect(events.map((e) => e.visibleEnd)).toEqual([13, all]);
    await log.close();
  });

  it('does no fdatasync and schedules nothing while no append comes', async () => {
    const log = Log.open({ dir: tempDir(), topic: 't', partition: 0, config: farBounds });
    log.append(messages('a', 1), 1);
    await log.flushedThrough(13);
    const events: FlushEvent[] = [];
    log.onFlushDone((e) => events.push(e));
    const syncsBefore = flusherStats().syncs;
    await new Promise((r) => setTimeout(r, 200));
    await log.flush(); // a clean log: skipped
    expect(events).toEqual([]);
    if (flusherKind === 'native') expect(flusherStats().syncs).toBe(syncsBefore);
    await log.close();
  });

  it('flush.policy=interval brings back the paper policy: nothing visible before flush.ms', async () => {
    const log = Log.open({ dir: tempDir(), topic: 't', partition: 0, config: { flushPolicy: 'interval', flushMessages: 1000, flushIntervalMs: 150 } });
    const started = performance.now();
    const advanced = new Promise<number>((resolve) => log.onFlush(resolve));
    log.append(messages('a', 1), 1);
    await new Promise((r) => setTimeout(r, 50));
    expect(log.visibleEnd).toBe(0);
    expect(await advanced).toBe(13);
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    await log.close();
  });

  it('rejects an unknown flush.policy', () => {
    expect(() => Log.open({ dir: tempDir(), topic: 't', partition: 0, config: { flushPolicy: 'never' as LogConfig['flushPolicy'] } })).toThrow(/flushPolicy/);
  });

  it.skipIf(flusherKind !== 'native')('never makes a byte visible before an fdatasync covered it, across turns, rolls and concurrent flushedThrough', async () => {
    const log = Log.open({ dir: tempDir(), topic: 't', partition: 0, config: { ...farBounds, segmentBytes: 4096 } });
    const violations: string[] = [];
    let advances = 0;
    log.onFlush((end) => {
      advances++;
      const unsynced = visibleUnsyncedBytes(log);
      if (unsynced > 0) violations.push(`visible end ${end}: ${unsynced} bytes not fdatasynced`);
    });
    const waits: Promise<void>[] = [];
    for (let turn = 0; turn < 200; turn++) {
      for (let i = 0; i < 1 + (turn % 4); i++) {
        const r = log.append(messages(`m${turn}.${i}`, 3, 40), 3);
        if (turn % 7 === 0) waits.push(log.flushedThrough(r.nextOffset));
      }
      if (turn % 3 === 0) await new Promise((r) => setTimeout(r, 1));
      else if (turn % 3 === 1) await nextTurn();
      else await Promise.resolve();
    }
    await Promise.all(waits);
    await log.flushedThrough(log.logEndOffset);
    expect(log.segmentCount).toBeGreaterThan(5);
    expect(advances).toBeGreaterThan(5);
    expect(violations).toEqual([]);
    expect(visibleUnsyncedBytes(log)).toBe(0);
    await log.close();
  });

  it.skipIf(flusherKind !== 'native')('with many logs runs at most flush.threads fdatasyncs at once, and a log waiting for its turn carries what came meanwhile', async () => {
    const logs = Array.from({ length: 200 }, (_, i) => Log.open({ dir: tempDir(), topic: 'many', partition: i, config: farBounds }));
    const syncsBefore = flusherStats().syncs;
    for (let round = 0; round < 5; round++) {
      for (const log of logs) log.append(messages(`r${round}`, 1), 1);
      await nextTurn();
    }
    await Promise.all(logs.map((log) => log.flushedThrough(log.logEndOffset)));
    const syncs = flusherStats().syncs - syncsBefore;
    expect(flusherStats().maxInFlight).toBeLessThanOrEqual(flusherStats().threads);
    expect(syncs).toBeGreaterThanOrEqual(logs.length);
    expect(syncs).toBeLessThan(logs.length * 5); // one per append would be 1,000
    for (const log of logs) expect(visibleUnsyncedBytes(log)).toBe(0);
    await Promise.all(logs.map((log) => log.close()));
  });
});
