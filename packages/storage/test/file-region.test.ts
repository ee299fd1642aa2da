import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Log } from '../src/index.js';
import { messages, segmentFiles, tempDir } from './helpers.js';

/** Overwrites the first `bytes` of the log's only segment file with 0xee, behind the log's back. */
function overwriteSegmentHead(dir: string, bytes: number): void {
  const file = path.join(dir, segmentFiles(dir)[0]!);
  const fd = fs.openSync(file, 'r+');
  try {
    fs.writeSync(fd, Buffer.alloc(bytes, 0xee), 0, bytes, 0);
  } finally {
    fs.closeSync(fd);
  }
}

describe('FileRegion.read', () => {
  it('reads the file once for a region read whole: later reads are views of those bytes, until release', async () => {
    const dir = tempDir();
    const log = Log.open({ dir, topic: 'events', partition: 0, config: { flushIntervalMs: 60_000 } });
    try {
      log.append(messages('m', 4, 50), 4);
      await log.flush();
      const region = log.readRange(0, 1024 * 1024, log.visibleEnd);
      const whole = region.read(0, region.length);
      expect(whole.length).toBe(log.visibleEnd);
      const before = Buffer.from(whole);
      overwriteSegmentHead(dir, 16);
      // Served from the whole read, not the file: the bytes are the ones read first.
      expect(region.read(0, 16)).toEqual(before.subarray(0, 16));
      expect(region.read(0, region.length)).toEqual(before);
      region.release();
      expect(() => region.read(0, 16)).toThrow(/after release/);

      // A region read only in part reads the file each time.
      const partial = log.readRange(0, 1024 * 1024, log.visibleEnd);
      expect(partial.read(0, 8)).toEqual(Buffer.alloc(8, 0xee));
      overwriteSegmentHead(dir, 8);
      expect(partial.read(0, 16)).toEqual(Buffer.alloc(16, 0xee));
      partial.release();
    } finally {
      await log.close();
    }
  });
});
