/**
 * The high-watermark checkpoint of a replica (docs/replication.md §8.1) on real files: written
 * whole, read back capped at the log end, absent is undefined, any other content an error.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatHighWatermark, highWatermarkFile, readHighWatermark, writeHighWatermark } from '../src/high-watermark-checkpoint.js';
import { StorageError } from '../src/errors.js';
import { tempDir } from './helpers.js';

describe('high-watermark checkpoint', () => {
  it('writes the value whole (no .tmp left) and reads it back, capped at the log end', async () => {
    const dir = tempDir();
    expect(await readHighWatermark(dir, 1000)).toBeUndefined();
    await writeHighWatermark(dir, 700);
    expect(readFileSync(join(dir, highWatermarkFile), 'utf8')).toBe('klog-high-watermark 1\n700\n');
    expect(existsSync(join(dir, `${highWatermarkFile}.tmp`))).toBe(false);
    expect(await readHighWatermark(dir, 1000)).toBe(700);
    expect(await readHighWatermark(dir, 300)).toBe(300); // truncated after the write: never beyond the log end
    await writeHighWatermark(dir, 900);
    expect(await readHighWatermark(dir, 1000)).toBe(900);
  });

  it('refuses a file that is not the format, naming it and the line', async () => {
    const dir = tempDir();
    const file = join(dir, highWatermarkFile);
    for (const [text, line] of [
      ['klog-high-watermark 2\n5\n', 1],
      ['klog-high-watermark 1\n', 2],
      ['klog-high-watermark 1\n-5\n', 2],
      ['klog-high-watermark 1\n05\n', 2],
      ['klog-high-watermark 1\n5\n6\n', 3],
    ] as const) {
      writeFileSync(file, text);
      const err = await readHighWatermark(dir, 100).catch((e: unknown) => e);
      expect(err, text).toBeInstanceOf(StorageError);
      expect((err as Error).message).toContain(`${file} line ${line}`);
    }
  });

  it('refuses to write a value that is not an offset', async () => {
    expect(() => formatHighWatermark(-1)).toThrow(RangeError);
    await expect(writeHighWatermark(tempDir(), 1.5)).rejects.toThrow(RangeError);
  });
});
