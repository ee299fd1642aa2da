import * as fs from 'node:fs';
import * as path from 'node:path';
import { encodeMessageSet } from '@klog/protocol';
import { describe, expect, it } from 'vitest';
import { cleanShutdownFileName, Log, LogManager, recoverSegment, Segment } from '../src/index.js';
import { payloads, recordingLogger, segmentFiles, tempDir } from './helpers.js';

// Five messages of 20, 30, 40, 50, 60 payload bytes: 30, 40, 50, 60, 70 bytes on disk.
const texts = [20, 30, 40, 50, 60].map((n, i) => `r${i}`.padEnd(n, '#'));
const starts = [0, 30, 70, 120, 180];
const total = 250;

/** Writes the five messages as the only segment of a fresh partition dir; returns the segment path. */
function writeSegment(dir: string): string {
  const file = path.join(dir, '00000000000000000000.kafka');
  fs.writeFileSync(file, encodeMessageSet(texts.map((t) => Buffer.from(t))));
  expect(fs.statSync(file).size).toBe(total);
  return file;
}

function corrupt(file: string, fn: (bytes: Buffer) => Buffer): void {
  fs.writeFileSync(file, fn(fs.readFileSync(file)));
}

/** Opens with recovery and returns the log, its warn entries and the file size after. */
function recover(dir: string, file: string) {
  const logger = recordingLogger();
  const log = Log.open({ dir, topic: 'rec', partition: 2, logger, recover: true });
  return { log, warns: logger.entries.filter((e) => e.level === 'warn'), size: fs.statSync(file).size };
}

describe('recovery of the last segment', () => {
  const cases: { name: string; damage: (b: Buffer) => Buffer; keep: number; reason: RegExp }[] = [
    { name: 'a flipped payload byte', damage: (b) => ((b[starts[2]! + 15]! ^= 0x01), b), keep: 2, reason: /CRC mismatch/ },
    { name: 'zero-filled garbage appended', damage: (b) => Buffer.concat([b, Buffer.alloc(100)]), keep: 5, reason: /length 0 is below/ },
    { name: 'a length field of 0x7FFFFFFF', damage: (b) => (b.writeInt32BE(0x7fffffff, starts[3]), b), keep: 3, reason: /incomplete message at byte 120: needs 2147483651 bytes/ },
    { name: 'a length field of -5', damage: (b) => (b.writeInt32BE(-5, starts[3]), b), keep: 3, reason: /length -5 is below/ },
    { name: 'a truncated tail', damage: (b) => b.subarray(0, total - 3), keep: 4, reason: /incomplete message at byte 180: needs 70 bytes, 67 left/ },
    { name: 'a tail cut inside a length field', damage: (b) => b.subarray(0, starts[4]! + 2), keep: 4, reason: /incomplete message at byte 180: needs 4 bytes, 2 left/ },
    { name: 'a bad magic byte', damage: (b) => ((b[starts[1]! + 4] = 7), b), keep: 1, reason: /magic byte 7/ },
  ];

  for (const c of cases) {
    it(`truncates at the first bad entry: ${c.name}`, async () => {
      const dir = tempDir();
      const file = writeSegment(dir);
      corrupt(file, c.damage);
      const damagedSize = fs.statSync(file).size;
      const { log, warns, size } = recover(dir, file);
      const validBytes = c.keep === 5 ? total : starts[c.keep]!;
      expect(size).toBe(validBytes);
      expect([log.logEndOffset, log.visibleEnd]).toEqual([validBytes, validBytes]);
      expect(payloads(log.read(0, 10_000))).toEqual(texts.slice(0, c.keep));
      expect(log.read(0, 10_000).length).toBe(validBytes);
      expect(warns).toHaveLength(1);
      expect(warns[0]!.obj).toMatchObject({
        topic: 'rec',
        partition: 2,
        segment: '00000000000000000000.kafka',
        validBytes,
        truncatedBytes: damagedSize - validBytes,
      });
      expect((warns[0]!.obj as { reason: string }).reason).toMatch(c.reason);
      // New appends continue right after the kept messages.
      expect(log.append(encodeMessageSet([Buffer.from('new')]), 1).offset).toBe(validBytes);
      await log.close();
    });
  }

  it('keeps an intact segment and a zero-length one untouched', async () => {
    const dir = tempDir();
    const file = writeSegment(dir);
    const intact = recover(dir, file);
    expect(intact.size).toBe(total);
    expect(intact.warns).toEqual([]);
    await intact.log.close();

    const emptyDir = tempDir();
    const emptyFile = path.join(emptyDir, '00000000000000004096.kafka');
    fs.writeFileSync(emptyFile, '');
    const empty = recover(emptyDir, emptyFile);
    expect([empty.log.earliestOffset, empty.log.logEndOffset, empty.size]).toEqual([4096, 4096, 0]);
    expect(empty.warns).toEqual([]);
    await empty.log.close();
  });

  it('trusts earlier segments and scans only the last', async () => {
    const dir = tempDir();
    const first = writeSegment(dir); // 0..250
    fs.writeFileSync(path.join(dir, '00000000000000000250.kafka'), Buffer.concat([encodeMessageSet([Buffer.from('tail')]), Buffer.alloc(9)]));
    corrupt(first, (b) => ((b[starts[1]! + 12]! ^= 0xff), b)); // bad CRC in the first segment
    const { log, warns } = recover(dir, first);
    expect(fs.statSync(first).size).toBe(total);
    expect(fs.statSync(path.join(dir, '00000000000000000250.kafka')).size).toBe(14);
    expect(warns.map((w) => (w.obj as { segment: string }).segment)).toEqual(['00000000000000000250.kafka']);
    expect(log.logEndOffset).toBe(264);
    await log.close();
  });

  it('scans messages larger than its chunk and grows the buffer', () => {
    const dir = tempDir();
    const file = path.join(dir, '00000000000000000000.kafka');
    const big = Array.from({ length: 6 }, (_, i) => Buffer.alloc(300 + i * 50, 97 + i));
    const set = encodeMessageSet(big);
    fs.writeFileSync(file, Buffer.concat([set, Buffer.from([0, 0, 1])]));
    const segment = Segment.open(file, 0);
    const result = recoverSegment(segment, 64);
    expect(result).toMatchObject({ messages: 6, validBytes: set.length, truncatedBytes: 3 });
    expect(fs.statSync(file).size).toBe(set.length);
    void segment.close();
  });
});

describe('clean-shutdown marker', () => {
  it('recovers without the marker, trusts the files with it, and is removed on open', async () => {
    const logDir = tempDir();
    const manager = await LogManager.open({ logDir, retentionCheckIntervalMs: 3_600_000 });
    const log = await manager.getOrCreateLog('orders', 0);
    log.append(encodeMessageSet(texts.map((t) => Buffer.from(t))), 5);
    await manager.close();
    const marker = path.join(logDir, cleanShutdownFileName);
    expect(fs.existsSync(marker)).toBe(true);

    // Damage the last segment after a clean shutdown. With the marker the files are trusted,
    // by design: the scan is skipped, so the garbage is NOT cut (a reader would stop at it).
    const file = path.join(logDir, 'orders-0', segmentFiles(path.join(logDir, 'orders-0'))[0]!);
    fs.appendFileSync(file, Buffer.alloc(40));
    const trusting = await LogManager.open({ logDir, retentionCheckIntervalMs: 3_600_000 });
    expect(fs.existsSync(marker)).toBe(false);
    expect(trusting.getLog('orders', 0)!.logEndOffset).toBe(total + 40);
    expect(fs.statSync(file).size).toBe(total + 40);
    // Simulate a crash: close the files but do not write the marker.
    await trusting.close({ markClean: false });
    expect(fs.existsSync(marker)).toBe(false);

    const logger = recordingLogger();
    const recovering = await LogManager.open({ logDir, retentionCheckIntervalMs: 3_600_000, logger });
    const recovered = recovering.getLog('orders', 0)!;
    expect(recovered.logEndOffset).toBe(total);
    expect(fs.statSync(file).size).toBe(total);
    expect(payloads(recovered.read(0, 1000))).toEqual(texts);
    expect(logger.entries.find((e) => e.level === 'warn')?.obj).toMatchObject({ topic: 'orders', partition: 0, validBytes: total, truncatedBytes: 40 });
    await recovering.close();
    expect(fs.existsSync(marker)).toBe(true);
  });
});
