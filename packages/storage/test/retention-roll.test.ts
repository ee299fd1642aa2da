/**
 * Retention's roll of an aged-out only segment (docs/design.md §2) runs off the event loop: the
 * new segment is created, opened and its directory fsynced asynchronously, so a broker answers
 * other requests meanwhile. Appends that come while it runs win: the roll is dropped, or adopts
 * the file an append rolled to.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Log, type LogConfig } from '../src/index.js';
import { messages, payloads, segmentFiles, syncFileCallsDuring, tempDir } from './helpers.js';

const retentionMs = 60_000;

function openLog(dir: string, config: Partial<LogConfig> = {}): Log {
  return Log.open({ dir, topic: 'events', partition: 0, config: { flushIntervalMs: 60_000, retentionMs, ...config } });
}

/** A log in `dir` of one segment holding `count` messages, aged past retention, reopened. */
async function agedOnlySegment(dir: string, count: number, config: Partial<LogConfig> = {}): Promise<Log> {
  const first = openLog(dir, config);
  for (let i = 0; i < count; i++) first.append(messages(`old${i}`, 1, 50), 1);
  await first.close();
  const old = new Date(Date.now() - 2 * retentionMs);
  for (const f of segmentFiles(dir)) fs.utimesSync(path.join(dir, f), old, old);
  return openLog(dir, config);
}

describe('retention roll of the aged only segment', () => {
  it('makes no synchronous file call: the new segment is created, opened and fsynced off the event loop', async () => {
    const dir = tempDir();
    const log = await agedOnlySegment(dir, 3); // 3 × 60 bytes
    let deleted = -1;
    const calls = await syncFileCallsDuring(async () => {
      deleted = await log.deleteOldSegments(Date.now());
    });
    expect(calls).toEqual([]);
    expect(deleted).toBe(1);
    expect(segmentFiles(dir)).toEqual(['00000000000000000180.kafka']);
    expect([log.earliestOffset, log.logEndOffset, log.visibleEnd]).toEqual([180, 180, 180]);
    // The new active segment came opened: the next append writes without opening it.
    const appendCalls = await syncFileCallsDuring(async () => {
      log.append(messages('new', 1), 1);
    });
    expect(appendCalls).toEqual(['writeSync']);
    await log.flush();
    expect(payloads(log.read(180, 100))).toEqual(['new-0']);
    await log.close();
  });

  it('is dropped, its file removed, when an append comes while it runs', async () => {
    const dir = tempDir();
    const log = await agedOnlySegment(dir, 3);
    const retention = log.deleteOldSegments(Date.now());
    const appended = log.append(messages('meanwhile', 1), 1); // lands in the old segment, which is no longer aged
    expect(appended.offset).toBe(180);
    expect(await retention).toBe(0);
    expect(segmentFiles(dir)).toEqual(['00000000000000000000.kafka']);
    await log.flush();
    expect(payloads(log.read(180, 100))).toEqual(['meanwhile-0']);
    await log.close();
    const again = openLog(dir);
    expect(again.logEndOffset).toBe(appended.nextOffset);
    expect(payloads(again.read(0, 1000))).toEqual(['old0-0'.padEnd(50, '.'), 'old1-0'.padEnd(50, '.'), 'old2-0'.padEnd(50, '.'), 'meanwhile-0']);
    await again.close();
  });

  it('gives way to an append that rolls to the same segment while it runs', async () => {
    const dir = tempDir();
    const log = await agedOnlySegment(dir, 3, { segmentBytes: 200 });
    const retention = log.deleteOldSegments(Date.now());
    const appended = log.append(messages('big', 1, 50), 1); // 180 + 60 > 200: the append rolls at 180 itself
    expect(appended).toEqual({ offset: 180, nextOffset: 240 });
    expect(await retention).toBe(1); // the aged segment goes: the segment the append rolled to is the active one
    expect(log.segmentStarts()).toEqual([180]);
    expect(segmentFiles(dir)).toEqual(['00000000000000000180.kafka']);
    await log.flush();
    expect(payloads(log.read(180, 100))).toEqual(['big-0'.padEnd(50, '.')]);
    await log.close();
  });
});
