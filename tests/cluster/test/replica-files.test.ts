/**
 * The replica comparison of the system tests (test/replica-files.ts), on real files: equal
 * replicas compare equal, and each way two can differ is found and named.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { segmentFileName } from '@klog/storage';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { describeDifferences, diffAllReplicas, diffReplicas, firstDifference, replicaBytes, replicaDir } from './replica-files.js';

let root: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'klog-replica-files-'));
});
afterEach(() => {
  rmSync(root, { recursive: true, force: true });
});

/** A log dir holding `events-0` with the given segments (start offset → bytes) and other files. */
function logDir(name: string, segments: Record<number, Buffer>, others: Record<string, string> = {}): string {
  const dir = join(root, name);
  const part = replicaDir(dir, 'events', 0);
  mkdirSync(part, { recursive: true });
  for (const [start, bytes] of Object.entries(segments)) writeFileSync(join(part, segmentFileName(Number(start))), bytes);
  for (const [file, text] of Object.entries(others)) writeFileSync(join(part, file), text);
  return dir;
}

const bytes = (n: number, seed = 1): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff));

describe('diffReplicas', () => {
  it('finds nothing between identical replicas, whatever their other files hold', async () => {
    const a = logDir('a', { 0: bytes(3000), 3000: bytes(10) }, { 'replica.properties': 'topic.id=5f0c3a9e12b7d604\n' });
    const b = logDir('b', { 0: bytes(3000), 3000: bytes(10) }, { 'leader-epoch-checkpoint': 'klog-leader-epochs 1\n0\n' });
    expect(await diffReplicas(replicaDir(a, 'events', 0), replicaDir(b, 'events', 0))).toEqual([]);
    expect(await diffAllReplicas([a, b, a], 'events', 0)).toEqual(new Map());
  });

  it('names a segment only one replica holds, a size difference and the first differing byte', async () => {
    const changed = bytes(3000);
    changed[2049] = changed[2049]! ^ 0xff;
    const a = logDir('a', { 0: bytes(3000), 3000: bytes(10), 3010: bytes(5) });
    const b = logDir('b', { 0: changed, 3000: bytes(11), 5000: bytes(1) });
    const diffs = await diffReplicas(replicaDir(a, 'events', 0), replicaDir(b, 'events', 0));
    expect(diffs).toEqual([
      { kind: 'only-in', file: segmentFileName(3010), dir: replicaDir(a, 'events', 0) },
      { kind: 'only-in', file: segmentFileName(5000), dir: replicaDir(b, 'events', 0) },
      { kind: 'bytes', file: segmentFileName(0), at: 2049 },
      { kind: 'size', file: segmentFileName(3000), sizes: [10, 11] },
    ]);
    expect(describeDifferences(diffs)).toContain(`${segmentFileName(0)}: first differing byte at 2049`);
    expect((await diffAllReplicas([a, b], 'events', 0)).get(b)).toEqual(diffs);
  });

  it('names a replica directory that does not exist', async () => {
    const a = logDir('a', { 0: bytes(10) });
    const missing = join(root, 'none');
    expect(await diffReplicas(replicaDir(a, 'events', 0), replicaDir(missing, 'events', 0))).toEqual([
      { kind: 'missing-dir', dir: replicaDir(missing, 'events', 0) },
    ]);
    expect(await replicaBytes(replicaDir(missing, 'events', 0))).toBe(0);
    expect(await replicaBytes(replicaDir(a, 'events', 0))).toBe(10);
  });
});

describe('firstDifference', () => {
  it('finds a difference past the first read chunk, at the last byte, and none in equal files', async () => {
    const big = bytes(3 << 20);
    const other = Buffer.from(big);
    other[(2 << 20) + 7] = other[(2 << 20) + 7]! ^ 1;
    const last = Buffer.from(big);
    last[last.length - 1] = last[last.length - 1]! ^ 1;
    for (const [name, b] of [['big', big], ['other', other], ['last', last], ['same', Buffer.from(big)]] as const) writeFileSync(join(root, name), b);
    expect(await firstDifference(join(root, 'big'), join(root, 'other'))).toBe((2 << 20) + 7);
    expect(await firstDifference(join(root, 'big'), join(root, 'last'))).toBe(big.length - 1);
    expect(await firstDifference(join(root, 'big'), join(root, 'same'))).toBe(-1);
  });

  it('finds where the shorter of two files ends', async () => {
    writeFileSync(join(root, 'long'), bytes(100));
    writeFileSync(join(root, 'short'), bytes(60));
    expect(await firstDifference(join(root, 'long'), join(root, 'short'))).toBe(60);
  });
});
