import * as fs from 'node:fs';
import * as path from 'node:path';
import { encodeMessageSet, iterateMessageSet } from '@klog/protocol';
import { describe, expect, it } from 'vitest';
import { findSegmentIndex, Log, LogOffsetOutOfRangeError, type LogConfig } from '../src/index.js';
import { messages, payloads, segmentFiles, tempDir } from './helpers.js';

const kib = 1024;

function openLog(dir: string, config: Partial<LogConfig> = {}, recover = false): Log {
  return Log.open({ dir, topic: 'events', partition: 0, config: { flushIntervalMs: 60_000, ...config }, recover });
}

/** Appends `count` one-message sets with 100-byte payloads (110 bytes each); returns their offsets. */
function appendEach(log: Log, count: number, prefix = 'm'): number[] {
  const offsets: number[] = [];
  for (let i = 0; i < count; i++) offsets.push(log.append(messages(`${prefix}${i}`, 1, 100), 1).offset);
  return offsets;
}

function catchError(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected an error');
}

describe('append and read', () => {
  it('round-trips bytes with offsets that are byte positions', async () => {
    const dir = tempDir();
    const log = openLog(dir);
    const a = messages('a', 3); // 'a-0' .. 'a-2': 13 bytes each
    const b = encodeMessageSet([Buffer.from('hello')]); // 15 bytes
    expect(a.length).toBe(39);
    expect(log.append(a, 3)).toEqual({ offset: 0, nextOffset: 39 });
    expect(log.append(b, 1)).toEqual({ offset: 39, nextOffset: 54 });
    expect(log.logEndOffset).toBe(54);
    await log.flush();
    expect(log.visibleEnd).toBe(54);
    expect(log.earliestOffset).toBe(0);

    const all = log.read(0, 1000);
    expect(all.equals(Buffer.concat([a, b]))).toBe(true);
    expect(log.read(39, 1000).equals(b)).toBe(true);
    expect(log.read(13, 13).equals(a.subarray(13, 26))).toBe(true);
    const cut = log.read(0, 20);
    expect(cut.length).toBe(20);
    expect(payloads(cut)).toEqual(['a-0']);

    const walked = [...iterateMessageSet(all)].map((m) => [m.offset, m.nextOffset]);
    expect(walked).toEqual([[0, 13], [13, 26], [26, 39], [39, 54]]);
    for (const [offset, next] of walked) expect(next).toBe(offset! + 4 + all.readInt32BE(offset));

    expect(segmentFiles(dir)).toEqual(['00000000000000000000.kafka']);
    expect(fs.readFileSync(path.join(dir, '00000000000000000000.kafka')).equals(all)).toBe(true);
    await log.close();
  });

  it('rolls at segmentBytes, names files by start offset and reads across segments', async () => {
    const dir = tempDir();
    const log = openLog(dir, { segmentBytes: kib });
    const offsets = appendEach(log, 30); // 9 per 1 KiB segment: 990 bytes
    expect(offsets).toEqual(Array.from({ length: 30 }, (_, i) => i * 110));
    expect(log.segmentStarts()).toEqual([0, 990, 1980, 2970]);
    expect(segmentFiles(dir)).toEqual([
      '00000000000000000000.kafka',
      '00000000000000000990.kafka',
      '00000000000000001980.kafka',
      '00000000000000002970.kafka',
    ]);
    for (const f of segmentFiles(dir).slice(0, 3)) expect(fs.statSync(path.join(dir, f)).size).toBe(990);
    await log.flush();
    expect(log.visibleEnd).toBe(3300);

    // Each message, found by binary search, read by its offset.
    offsets.forEach((offset, i) => expect(payloads(log.read(offset, 110))).toEqual([`m${i}-0`.padEnd(100, '.')]));
    // A read stops at the end of its segment (Kafka 0.7), even with room to spare.
    expect(log.read(0, 10_000).length).toBe(990);
    expect(log.read(880, 10_000).length).toBe(110);
    // Walking the log as a consumer does gets every message in order.
    const seen: string[] = [];
    for (let offset = 0; offset < log.visibleEnd; ) {
      const chunk = log.read(offset, 300);
      const ms = [...iterateMessageSet(chunk, offset)];
      seen.push(...ms.map((m) => m.message.payload.toString()));
      offset = ms[ms.length - 1]!.nextOffset;
    }
    expect(seen).toEqual(offsets.map((_, i) => `m${i}-0`.padEnd(100, '.')));
    await log.close();
  });

  it('puts a message set larger than segmentBytes into an empty segment whole', async () => {
    const dir = tempDir();
    const log = openLog(dir, { segmentBytes: 100 });
    expect(log.append(messages('big', 1, 300), 1)).toEqual({ offset: 0, nextOffset: 310 });
    expect(log.append(messages('next', 1, 10), 1)).toEqual({ offset: 310, nextOffset: 330 });
    expect(log.segmentStarts()).toEqual([0, 310]);
    await log.close();
  });

  it('answers a read at the end with no bytes and outside [earliest, end] with OffsetOutOfRange', async () => {
    const dir = tempDir();
    const log = openLog(dir, { segmentBytes: kib, retentionBytes: 0 });
    appendEach(log, 20);
    await log.flush();
    expect(log.read(2200, 100).length).toBe(0);
    const past = catchError(() => log.read(2201, 100));
    expect(past).toBeInstanceOf(LogOffsetOutOfRangeError);
    expect(past).toMatchObject({ code: 1, topic: 'events', partition: 0, offset: 2201, earliest: 0, end: 2200 });

    expect(await log.deleteOldSegments(Date.now())).toBe(2);
    expect(log.earliestOffset).toBe(1980);
    const before = catchError(() => log.read(1979, 100));
    expect(before).toMatchObject({ code: 1, offset: 1979, earliest: 1980, end: 2200 });
    expect(payloads(log.read(1980, 110))).toEqual(['m18-0'.padEnd(100, '.')]);
    expect(() => log.read(-1, 10)).toThrow(LogOffsetOutOfRangeError);
    expect(() => log.read(1980, -1)).toThrow(RangeError);
    expect(log.read(1980, 0).length).toBe(0);
    await log.close();
  });
});

describe('findSegmentIndex', () => {
  it('finds the last segment starting at or before the offset', () => {
    const view = [0, 10, 20, 35].map((start) => ({ start }));
    const cases: [number, number][] = [[0, 0], [9, 0], [10, 1], [19, 1], [20, 2], [34, 2], [35, 3], [1000, 3]];
    for (const [offset, index] of cases) expect(findSegmentIndex(view, offset)).toBe(index);
    expect(findSegmentIndex(view, -1)).toBe(-1);
    expect(findSegmentIndex([{ start: 100 }], 99)).toBe(-1);
    expect(findSegmentIndex([], 5)).toBe(-1);
  });

  it('agrees with a linear scan on many lists', () => {
    for (let n = 1; n < 40; n++) {
      const starts: number[] = [];
      for (let i = 0, s = n; i < n; i++, s += 1 + ((i * 7919) % 13)) starts.push(s);
      const view = starts.map((start) => ({ start }));
      for (let offset = 0; offset < starts[n - 1]! + 20; offset++) {
        let expected = -1;
        starts.forEach((s, i) => {
          if (s <= offset) expected = i;
        });
        expect(findSegmentIndex(view, offset)).toBe(expected);
      }
    }
  });
});

describe('flush and visibility', () => {
  it('hides unflushed bytes until flushMessages is reached (flush.policy=interval)', async () => {
    const log = openLog(tempDir(), { flushPolicy: 'interval', flushMessages: 3 });
    const flushed: number[] = [];
    log.onFlush((end) => flushed.push(end));
    log.append(messages('x', 2), 2); // 26 bytes
    expect(log.logEndOffset).toBe(26);
    expect(log.visibleEnd).toBe(0);
    expect(log.read(0, 100).length).toBe(0);
    expect(() => log.read(13, 100)).toThrow(LogOffsetOutOfRangeError);
    await new Promise((r) => setTimeout(r, 20));
    expect(log.visibleEnd).toBe(0);

    const advanced = new Promise<number>((resolve) => log.onFlush(resolve));
    log.append(messages('y', 1), 1); // the third message triggers the flush
    expect(log.visibleEnd).toBe(0);
    expect(await advanced).toBe(39);
    expect(log.visibleEnd).toBe(39);
    expect(payloads(log.read(0, 100))).toEqual(['x-0', 'x-1', 'y-0']);
    expect(flushed).toEqual([39]);
    await log.close();
  });

  it('flushes flushIntervalMs after the first unflushed append (flush.policy=interval)', async () => {
    const log = openLog(tempDir(), { flushPolicy: 'interval', flushMessages: 1000, flushIntervalMs: 80 });
    const started = Date.now();
    const advanced = new Promise<number>((resolve) => log.onFlush(resolve));
    log.append(messages('t', 1), 1);
    await new Promise((r) => setTimeout(r, 30));
    log.append(messages('u', 1), 1); // does not push the deadline back
    expect(log.visibleEnd).toBe(0);
    expect(await advanced).toBe(26);
    const waited = Date.now() - started;
    expect(waited).toBeGreaterThanOrEqual(75);
    expect(waited).toBeLessThan(1000);
    expect(payloads(log.read(0, 100))).toEqual(['t-0', 'u-0']);
    await log.close();
  });

  it('advances visibleEnd only to what was appended before the sync started', async () => {
    const log = openLog(tempDir(), { flushMessages: 1000 });
    log.append(messages('a', 1), 1); // 13 bytes
    const first = log.flush();
    await new Promise((r) => setImmediate(r)); // the flush has taken its target; its fdatasync is in flight
    log.append(messages('b', 1), 1); // 13 more, during the sync
    await first;
    expect([log.visibleEnd, log.logEndOffset]).toEqual([13, 26]);
    expect(payloads(log.read(0, 100))).toEqual(['a-0']);
    await log.flush();
    expect(log.visibleEnd).toBe(26);
    await log.close();
  });

  it('flushedThrough waits for the offset to be flushed; unsubscribe stops notifications', async () => {
    const log = openLog(tempDir(), { flushMessages: 1000 });
    const seen: number[] = [];
    const off = log.onFlush((end) => seen.push(end));
    const { nextOffset } = log.append(messages('f', 4), 4);
    await log.flushedThrough(nextOffset);
    expect(log.visibleEnd).toBe(nextOffset);
    await log.flushedThrough(10); // already visible
    await expect(log.flushedThrough(nextOffset + 1)).rejects.toThrow(RangeError);
    off();
    log.append(messages('g', 1), 1);
    await log.flush();
    expect(seen).toEqual([nextOffset]);
    expect(log.visibleEnd).toBe(nextOffset + 13);
    await log.close();
  });

  it('makes every append before close visible after reopening', async () => {
    const dir = tempDir();
    const log = openLog(dir, { segmentBytes: kib, flushMessages: 1000 });
    appendEach(log, 25);
    const bytes = fs.readFileSync(path.join(dir, '00000000000000000990.kafka'));
    await log.close();
    expect(() => log.append(messages('late', 1), 1)).toThrow(/closed/);

    for (const recover of [false, true]) {
      const again = openLog(dir, { segmentBytes: kib }, recover);
      expect(again.segmentStarts()).toEqual([0, 990, 1980]);
      expect(again.logEndOffset).toBe(2750);
      expect(again.visibleEnd).toBe(2750);
      expect(again.read(990, 5000).equals(bytes)).toBe(true);
      expect(payloads(again.read(2640, 500))).toEqual(['m24-0'.padEnd(100, '.')]);
      await again.close();
    }
    const last = openLog(dir, { segmentBytes: kib, flushMessages: 1000 });
    expect(last.append(messages('more', 1), 1)).toEqual({ offset: 2750, nextOffset: 2766 });
    await last.close();
    const reopened = openLog(dir, { segmentBytes: kib }, true);
    expect(payloads(reopened.read(2640, 500))).toEqual(['m24-0'.padEnd(100, '.'), 'more-0']);
    await reopened.close();
  });
});

describe('offsetsBefore', () => {
  it('follows Kafka 0.7 getOffsetsBefore', async () => {
    const dir = tempDir();
    const log = openLog(dir, { segmentBytes: kib });
    appendEach(log, 25); // segments 0, 990, 1980; end 2750
    await log.close();
    const files = segmentFiles(dir);
    const t = [1_000_000, 2_000_000, 3_000_000]; // seconds
    files.forEach((f, i) => fs.utimesSync(path.join(dir, f), t[i]!, t[i]!));

    const again = openLog(dir);
    expect(again.offsetsBefore(-1, 1)).toEqual([2750]);
    expect(again.offsetsBefore(-1, 10)).toEqual([2750, 1980, 990, 0]);
    expect(again.offsetsBefore(-2, 10)).toEqual([0]);
    expect(again.offsetsBefore(t[1]! * 1000, 10)).toEqual([990, 0]);
    expect(again.offsetsBefore(t[1]! * 1000 + 1, 1)).toEqual([990]);
    expect(again.offsetsBefore(t[2]! * 1000 - 1, 10)).toEqual([990, 0]);
    expect(again.offsetsBefore(t[0]! * 1000 - 1, 10)).toEqual([]);
    expect(again.offsetsBefore(Date.now() + 60_000, 10)).toEqual([2750, 1980, 990, 0]);
    expect(again.offsetsBefore(Date.now() + 60_000, 2)).toEqual([2750, 1980]);
    await again.close();
  });

  it('gives the only offset of an empty log and never an unflushed offset', async () => {
    const log = openLog(tempDir(), { segmentBytes: kib, flushMessages: 1000 });
    expect(log.offsetsBefore(-1, 5)).toEqual([0]);
    expect(log.offsetsBefore(-2, 5)).toEqual([0]);
    appendEach(log, 12); // rolled at 990, nothing flushed
    expect(log.offsetsBefore(-1, 5)).toEqual([0]);
    await log.flush();
    expect(log.offsetsBefore(-1, 5)).toEqual([1320, 990, 0]);
    await log.close();
  });
});

describe('retention', () => {
  it('deletes aged segments, rolls the aged only segment, and never restarts offsets', async () => {
    const dir = tempDir();
    const retentionMs = 60_000;
    let log = openLog(dir, { segmentBytes: kib, retentionMs });
    appendEach(log, 30);
    await log.close();
    // Age the first two segments only.
    const old = new Date(Date.now() - 2 * retentionMs);
    for (const f of segmentFiles(dir).slice(0, 2)) fs.utimesSync(path.join(dir, f), old, old);
    log = openLog(dir, { segmentBytes: kib, retentionMs });
    expect(await log.deleteOldSegments(Date.now())).toBe(2);
    expect(segmentFiles(dir)).toEqual(['00000000000000001980.kafka', '00000000000000002970.kafka']);
    expect(log.earliestOffset).toBe(1980);
    expect(payloads(log.read(1980, 110))).toEqual(['m18-0'.padEnd(100, '.')]);

    // Everything ages out: the active segment is rolled so its data goes too.
    expect(await log.deleteOldSegments(Date.now() + 2 * retentionMs)).toBe(2);
    expect(segmentFiles(dir)).toEqual(['00000000000000003300.kafka']);
    expect(log.segmentStarts()).toEqual([3300]);
    expect([log.earliestOffset, log.visibleEnd, log.logEndOffset]).toEqual([3300, 3300, 3300]);
    expect(log.read(3300, 100).length).toBe(0);
    expect(catchError(() => log.read(0, 100))).toMatchObject({ earliest: 3300, end: 3300 });
    // An empty only segment is kept, however old.
    expect(await log.deleteOldSegments(Date.now() + 10 * retentionMs)).toBe(0);
    expect(segmentFiles(dir)).toEqual(['00000000000000003300.kafka']);
    await log.close();

    log = openLog(dir, { segmentBytes: kib, retentionMs });
    expect([log.earliestOffset, log.logEndOffset]).toEqual([3300, 3300]);
    expect(log.append(messages('after', 1), 1)).toEqual({ offset: 3300, nextOffset: 3317 });
    await log.close();
    log = openLog(dir, { segmentBytes: kib, retentionMs });
    expect(payloads(log.read(3300, 100))).toEqual(['after-0']);
    expect(await log.deleteOldSegments(Date.now() + 2 * retentionMs)).toBe(1);
    expect(segmentFiles(dir)).toEqual(['00000000000000003317.kafka']);
    await log.close();
  });

  it('deletes the oldest segments while the total size is over retentionBytes', async () => {
    const dir = tempDir();
    const log = openLog(dir, { segmentBytes: kib, retentionBytes: 2000 });
    appendEach(log, 30); // 990 + 990 + 990 + 330 = 3300 bytes
    expect(await log.deleteOldSegments(Date.now())).toBe(0); // nothing flushed yet: kept
    await log.flush();
    expect(await log.deleteOldSegments(Date.now())).toBe(2); // 3300 → 2310 → 1320
    expect(log.segmentStarts()).toEqual([1980, 2970]);
    expect(log.sizeInBytes).toBe(1320);
    expect(await log.deleteOldSegments(Date.now())).toBe(0);
    expect(segmentFiles(dir)).toEqual(['00000000000000001980.kafka', '00000000000000002970.kafka']);
    await log.close();

    const all = openLog(dir, { segmentBytes: kib, retentionBytes: 0 });
    expect(await all.deleteOldSegments(Date.now())).toBe(1); // the active segment stays
    expect(all.segmentStarts()).toEqual([2970]);
    await all.close();
  });
});

describe('concurrency', () => {
  it('never serves an offset error inside [earliest, visibleEnd] or an invalid message while appends, rolls, flushes and retention run', async () => {
    const log = openLog(tempDir(), { segmentBytes: kib, flushMessages: 7, flushIntervalMs: 3, retentionBytes: 6 * kib });
    const expected = new Map<number, string>(); // offset -> payload
    const offsets: number[] = [];
    let done = false;
    let reads = 0;
    let bytesChecked = 0;
    let seed = 42;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const tick = () => new Promise<void>((r) => setImmediate(r));

    const producer = async () => {
      for (let i = 0; i < 1500; i++) {
        const count = 1 + rand(4);
        const texts = Array.from({ length: count }, (_, j) => `p${i}.${j}:`.padEnd(1 + rand(250), 'z'));
        const set = encodeMessageSet(texts.map((t) => Buffer.from(t)));
        const { offset } = log.append(set, count);
        let at = offset;
        for (const t of texts) {
          expected.set(at, t);
          offsets.push(at);
          at += 10 + Buffer.byteLength(t);
        }
        if (rand(3) === 0) await tick();
      }
      done = true;
    };
    const checkRead = (offset: number, maxBytes: number) => {
      const earliest = log.earliestOffset;
      const end = log.visibleEnd;
      if (offset < earliest || offset > end) return;
      const buf = log.read(offset, maxBytes); // must not throw
      expect(buf.length).toBeLessThanOrEqual(Math.min(maxBytes, end - offset));
      for (const m of iterateMessageSet(buf, offset)) {
        expect(m.message.payload.toString()).toBe(expected.get(m.offset));
        bytesChecked += m.nextOffset - m.offset;
      }
      reads++;
    };
    const reader = async () => {
      while (!done) {
        for (let k = 0; k < 5 && offsets.length > 0; k++) checkRead(offsets[rand(offsets.length)]!, 1 + rand(3000));
        checkRead(log.visibleEnd, 100);
        await tick();
      }
    };
    const consumer = async () => {
      // A sequential consumer that must see every message it is handed in order.
      let offset = 0;
      let last = -1;
      while (!done || offset < log.visibleEnd) {
        if (offset < log.earliestOffset) offset = log.earliestOffset; // retention overtook it
        const buf = log.read(offset, 1 + rand(2000));
        for (const m of iterateMessageSet(buf, offset)) {
          expect(m.offset).toBeGreaterThan(last);
          expect(m.message.payload.toString()).toBe(expected.get(m.offset));
          last = m.offset;
          offset = m.nextOffset;
        }
        await tick();
      }
      expect(offset).toBe(log.visibleEnd);
    };
    const flusher = async () => {
      while (!done) {
        await log.flush();
        await tick();
      }
    };
    const retention = async () => {
      while (!done) {
        await log.deleteOldSegments(Date.now());
        await tick();
      }
    };
    await Promise.all([producer(), reader(), consumer(), flusher(), retention()]);
    await log.flush();
    expect(log.visibleEnd).toBe(log.logEndOffset);
    await log.deleteOldSegments(Date.now());
    expect(log.sizeInBytes).toBeLessThanOrEqual(6 * kib);
    expect(log.earliestOffset).toBeGreaterThan(0);
    expect(reads).toBeGreaterThan(100);
    expect(bytesChecked).toBeGreaterThan(0);
    await log.close();
  });
});
