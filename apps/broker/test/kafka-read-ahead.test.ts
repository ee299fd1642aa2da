/**
 * The Kafka listener's read-ahead (src/kafka/read-ahead.ts): an answer prepared for the next
 * fetch of a log, on real log files, is served only to the fetch it was prepared for.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { plainKafkaMessageSetOf } from '@klog/kafka-protocol';
import { encodeMessageSet } from '@klog/protocol';
import { Log } from '@klog/storage';
import { afterEach, describe, expect, it } from 'vitest';
import { ReadAhead, maxPrepared, readAheadMaxBytes } from '../src/kafka/read-ahead.js';

const logs: Log[] = [];
afterEach(async () => {
  for (const l of logs.splice(0)) await l.close();
});

async function logWith(messages: number): Promise<Log> {
  const log = await Log.create({ dir: fs.mkdtempSync(path.join(os.tmpdir(), 'klog-read-ahead-')), topic: 'events', partition: 0 });
  logs.push(log);
  log.append(encodeMessageSet(Array.from({ length: messages }, (_, i) => Buffer.from(`message ${i}`))), messages);
  await log.flush();
  return log;
}

/** Reads `maxBytes` at `offset` of `log` and re-frames them, as a fetch does. */
function reader(log: Log, offset: number, maxBytes: number) {
  return () => {
    const end = log.visibleEnd;
    const framed = plainKafkaMessageSetOf(log.read(offset, maxBytes, end), offset, 1);
    return framed === undefined ? undefined : { framed, end };
  };
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('ReadAhead', () => {
  it('serves the prepared answer once, to the fetch it was prepared for', async () => {
    const log = await logWith(100);
    const ra = new ReadAhead();
    ra.prepare(log, 0, 200, 1, reader(log, 0, 200));
    expect(ra.take(log, 0, 200, 1, log.visibleEnd)).toBeUndefined(); // not before the turn ends
    ra.prepare(log, 0, 200, 1, reader(log, 0, 200));
    await turn();
    const framed = ra.take(log, 0, 200, 1, log.visibleEnd);
    expect(framed?.count).toBe(reader(log, 0, 200)()!.framed.count);
    expect(framed!.records.equals(reader(log, 0, 200)()!.framed.records)).toBe(true);
    expect(ra.take(log, 0, 200, 1, log.visibleEnd)).toBeUndefined(); // taken
  });

  it('drops an answer asked for at its offset with another size or magic, or past a lower end', async () => {
    const log = await logWith(100);
    const ra = new ReadAhead();
    for (const [maxBytes, magic, end] of [
      [300, 1, log.visibleEnd],
      [200, 0, log.visibleEnd],
      [200, 1, 100],
    ] as const) {
      ra.prepare(log, 0, 200, 1, reader(log, 0, 200));
      await turn();
      expect(ra.take(log, 0, maxBytes, magic, end)).toBeUndefined();
      expect(ra.size).toBe(0);
    }
  });

  it('keeps one answer per offset of a log: two consumers at different offsets each find theirs', async () => {
    const log = await logWith(100);
    const ra = new ReadAhead();
    ra.prepare(log, 0, 200, 1, reader(log, 0, 200));
    ra.prepare(log, 95, 200, 1, reader(log, 95, 200));
    await turn();
    expect(ra.take(log, 20, 200, 1, log.visibleEnd)).toBeUndefined(); // none prepared there
    expect(ra.size).toBe(2);
    expect(ra.take(log, 95, 200, 1, log.visibleEnd)?.records.equals(reader(log, 95, 200)()!.framed.records)).toBe(true);
    expect(ra.take(log, 0, 200, 1, log.visibleEnd)?.records.equals(reader(log, 0, 200)()!.framed.records)).toBe(true);
    expect(ra.size).toBe(0);
  });

  it(`keeps at most ${maxPrepared} answers, and none for a read that throws or has nothing`, async () => {
    const ra = new ReadAhead();
    const all = await Promise.all(Array.from({ length: maxPrepared + 2 }, () => logWith(5)));
    for (const log of all) ra.prepare(log, 0, 100, 1, reader(log, 0, 100));
    await turn();
    expect(ra.size).toBe(maxPrepared);
    expect(ra.take(all[0]!, 0, 100, 1, all[0]!.visibleEnd)).toBeUndefined(); // the oldest went first
    expect(ra.take(all.at(-1)!, 0, 100, 1, all.at(-1)!.visibleEnd)).toBeDefined();
    const fresh = new ReadAhead();
    fresh.prepare(all[0]!, 0, 100, 1, () => {
      throw new Error('read failed');
    });
    fresh.prepare(all[1]!, 0, 100, 1, () => undefined);
    await turn();
    expect(fresh.size).toBe(0);
  });

  it('does not read ahead a fetch of more than readAheadMaxBytes, so what waits stays bounded', async () => {
    const log = await logWith(100);
    const ra = new ReadAhead();
    ra.prepare(log, 0, readAheadMaxBytes + 1, 1, reader(log, 0, readAheadMaxBytes + 1));
    await turn();
    expect(ra.size).toBe(0);
    ra.prepare(log, 0, readAheadMaxBytes, 1, reader(log, 0, readAheadMaxBytes));
    await turn();
    expect(ra.size).toBe(1);
  });
});
