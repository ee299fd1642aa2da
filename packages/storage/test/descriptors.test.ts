/**
 * Segment descriptors (docs/format.md §4): opened on first use, and closed again on segments
 * that are no longer appended to once nothing reads them and they are flushed; so a log dir of
 * many partitions, or a partition of many segments, does not hold a descriptor per segment.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Log } from '../src/index.js';
import { messages, payloads, tempDir } from './helpers.js';

/** Descriptors of this process open on files under `dir`. */
function openUnder(dir: string): number {
  let n = 0;
  for (const fd of fs.readdirSync('/proc/self/fd')) {
    try {
      if (fs.readlinkSync(path.join('/proc/self/fd', fd)).startsWith(dir)) n++;
    } catch {
      // closed meanwhile
    }
  }
  return n;
}

describe.skipIf(!fs.existsSync('/proc/self/fd'))('segment descriptors', () => {
  it('opens segments on first use and closes the ones no longer appended to when idle', async () => {
    const dir = path.join(tempDir(), 'p-0');
    const log = Log.open({ dir, topic: 'p', partition: 0, config: { segmentBytes: 100, flushMessages: 1000, flushIntervalMs: 60_000 } });
    for (let i = 0; i < 6; i++) log.append(messages(`m${i}`, 1, 60), 1);
    expect(log.segmentCount).toBe(6);
    await log.flush();
    expect(openUnder(dir)).toBe(1); // the active segment only
    const region = log.readRange(0, 1000);
    expect(openUnder(dir)).toBe(2); // a read pins the first one open
    region.release();
    expect(openUnder(dir)).toBe(1);
    expect(payloads(log.read(0, 1000))).toHaveLength(1);
    expect(openUnder(dir)).toBe(1);
    await log.close();
    expect(openUnder(dir)).toBe(0);

    // Reopened (as on a broker's start), nothing is open until used.
    const again = Log.open({ dir, topic: 'p', partition: 0, recover: true });
    expect(openUnder(dir)).toBe(0);
    expect(payloads(again.read(again.segmentStarts()[2]!, 1000))).toHaveLength(1);
    expect(openUnder(dir)).toBe(0);
    again.append(messages('n', 1), 1);
    expect(openUnder(dir)).toBe(1);
    await again.close();
  });
});
