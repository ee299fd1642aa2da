/**
 * Byte-for-byte comparison of the replicas of a partition (docs/replication.md §1: the segment
 * files of two replicas that hold the same range have the same names and the same bytes). A
 * replica lives in `LOG_DIR/<topic>-<partition>/` (docs/format.md §4).
 */
import { open, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { parseSegmentFileName } from '@klog/storage';

/** One way two replicas of a partition differ. */
export type ReplicaDifference =
  | { readonly kind: 'missing-dir'; readonly dir: string }
  | { readonly kind: 'only-in'; readonly file: string; readonly dir: string }
  | { readonly kind: 'size'; readonly file: string; readonly sizes: readonly [number, number] }
  | { readonly kind: 'bytes'; readonly file: string; readonly at: number };

/** The directory of `topic`/`partition` in a broker's log dir. */
export function replicaDir(logDir: string, topic: string, partition: number): string {
  return join(logDir, `${topic}-${partition}`);
}

/** The segment files of a replica directory, sorted by start offset; undefined when the directory does not exist. */
export async function segmentFiles(dir: string): Promise<string[] | undefined> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  return names
    .filter((n) => parseSegmentFileName(n) !== undefined)
    .sort((a, b) => parseSegmentFileName(a)! - parseSegmentFileName(b)!);
}

const chunkBytes = 1 << 20;

/** The first byte offset at which files `a` and `b` (of the same size) differ, or -1 when they are equal. */
export async function firstDifference(a: string, b: string): Promise<number> {
  const [fa, fb] = await Promise.all([open(a, 'r'), open(b, 'r')]);
  try {
    const ba = Buffer.allocUnsafe(chunkBytes);
    const bb = Buffer.allocUnsafe(chunkBytes);
    for (let pos = 0; ; pos += chunkBytes) {
      const [ra, rb] = await Promise.all([fa.read(ba, 0, chunkBytes, pos), fb.read(bb, 0, chunkBytes, pos)]);
      const n = Math.min(ra.bytesRead, rb.bytesRead);
      if (ba.subarray(0, n).equals(bb.subarray(0, n)) === false) {
        for (let i = 0; i < n; i++) if (ba[i] !== bb[i]) return pos + i;
      }
      if (ra.bytesRead !== rb.bytesRead) return pos + n;
      if (n === 0) return -1;
    }
  } finally {
    await Promise.all([fa.close(), fb.close()]);
  }
}

/**
 * How the segment files of two replica directories differ: a segment only one holds, a
 * segment of different sizes, or the first differing byte of a segment. Files that are not
 * segments (`replica.properties`, `leader-epoch-checkpoint`) are not compared. Empty when the
 * replicas are byte-identical.
 */
export async function diffReplicas(dirA: string, dirB: string): Promise<ReplicaDifference[]> {
  const [a, b] = await Promise.all([segmentFiles(dirA), segmentFiles(dirB)]);
  const out: ReplicaDifference[] = [];
  if (a === undefined) out.push({ kind: 'missing-dir', dir: dirA });
  if (b === undefined) out.push({ kind: 'missing-dir', dir: dirB });
  if (a === undefined || b === undefined) return out;
  const inB = new Set(b);
  for (const f of a) if (!inB.has(f)) out.push({ kind: 'only-in', file: f, dir: dirA });
  const inA = new Set(a);
  for (const f of b) if (!inA.has(f)) out.push({ kind: 'only-in', file: f, dir: dirB });
  for (const f of a) {
    if (!inB.has(f)) continue;
    const [sa, sb] = await Promise.all([stat(join(dirA, f)), stat(join(dirB, f))]);
    if (sa.size !== sb.size) {
      out.push({ kind: 'size', file: f, sizes: [sa.size, sb.size] });
      continue;
    }
    const at = await firstDifference(join(dirA, f), join(dirB, f));
    if (at >= 0) out.push({ kind: 'bytes', file: f, at });
  }
  return out;
}

/** A line per difference, for an assertion message. */
export function describeDifferences(diffs: readonly ReplicaDifference[]): string {
  return diffs
    .map((d) => {
      switch (d.kind) {
        case 'missing-dir':
          return `no directory ${d.dir}`;
        case 'only-in':
          return `${d.file} only in ${d.dir}`;
        case 'size':
          return `${d.file}: ${d.sizes[0]} bytes against ${d.sizes[1]}`;
        case 'bytes':
          return `${d.file}: first differing byte at ${d.at}`;
      }
    })
    .join('\n');
}

/**
 * Compares every replica of `topic`/`partition` with the first of `logDirs`.
 * @returns the differences per other log dir, empty when all are byte-identical
 */
export async function diffAllReplicas(logDirs: readonly string[], topic: string, partition: number): Promise<Map<string, ReplicaDifference[]>> {
  const out = new Map<string, ReplicaDifference[]>();
  const first = replicaDir(logDirs[0]!, topic, partition);
  for (const dir of logDirs.slice(1)) {
    const diffs = await diffReplicas(first, replicaDir(dir, topic, partition));
    if (diffs.length > 0) out.set(dir, diffs);
  }
  return out;
}

/** Total bytes of a replica's segment files (0 when it has no directory). */
export async function replicaBytes(dir: string): Promise<number> {
  const files = (await segmentFiles(dir)) ?? [];
  let total = 0;
  for (const f of files) total += (await stat(join(dir, f))).size;
  return total;
}
