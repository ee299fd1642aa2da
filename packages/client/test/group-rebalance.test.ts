/** The paper's Algorithm 1 (docs/design.md §4) as a pure function: exact ranges, one owner per partition, determinism. */
import { describe, expect, it } from 'vitest';
import { assignPartitions, rangeOf, type PartitionRef } from '../src/index.js';

/** `brokers` brokers with `perBroker` partitions each, sorted. */
function partitions(brokers: number, perBroker: number): PartitionRef[] {
  const out: PartitionRef[] = [];
  for (let b = 0; b < brokers; b++) for (let p = 0; p < perBroker; p++) out.push({ brokerId: b, partition: p });
  return out;
}

/** The assignment as thread → `b-p` names, for exact comparison. */
function names(m: Map<string, PartitionRef[]>): Record<string, string[]> {
  return Object.fromEntries([...m].map(([t, ps]) => [t, ps.map((p) => `${p.brokerId}-${p.partition}`)]));
}

function shuffle<T>(xs: readonly T[], seed: number): T[] {
  const out = [...xs];
  let s = seed;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) % 2147483648;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

describe('Algorithm 1 (assignPartitions)', () => {
  it('6 partitions over 3 threads: two each, contiguous', () => {
    expect(names(assignPartitions(partitions(3, 2), ['c-0', 'c-1', 'c-2']))).toEqual({
      'c-0': ['0-0', '0-1'],
      'c-1': ['1-0', '1-1'],
      'c-2': ['2-0', '2-1'],
    });
  });

  it('6 partitions over 4 threads: the first two take one more', () => {
    expect(names(assignPartitions(partitions(3, 2), ['a-0', 'b-0', 'c-0', 'd-0']))).toEqual({
      'a-0': ['0-0', '0-1'],
      'b-0': ['1-0', '1-1'],
      'c-0': ['2-0'],
      'd-0': ['2-1'],
    });
  });

  it('5 partitions over 2 threads: 3 and 2', () => {
    expect(names(assignPartitions(partitions(1, 5), ['x-1', 'x-0']))).toEqual({
      'x-0': ['0-0', '0-1', '0-2'],
      'x-1': ['0-3', '0-4'],
    });
  });

  it('more threads than partitions: the last threads own nothing', () => {
    expect(names(assignPartitions(partitions(2, 1), ['t-0', 't-1', 't-2', 't-3']))).toEqual({
      't-0': ['0-0'],
      't-1': ['1-0'],
      't-2': [],
      't-3': [],
    });
  });

  it('no partitions: every thread owns nothing', () => {
    expect(names(assignPartitions([], ['a-0', 'b-0']))).toEqual({ 'a-0': [], 'b-0': [] });
  });

  it('sorts partitions by broker id numerically, then partition', () => {
    const ps: PartitionRef[] = [
      { brokerId: 10, partition: 0 },
      { brokerId: 2, partition: 1 },
      { brokerId: 2, partition: 0 },
    ];
    expect(names(assignPartitions(ps, ['a-0', 'b-0', 'c-0']))).toEqual({ 'a-0': ['2-0'], 'b-0': ['2-1'], 'c-0': ['10-0'] });
  });

  it('rangeOf gives the contiguous ranges with the remainder spread', () => {
    expect([0, 1, 2, 3].map((j) => rangeOf(j, 4, 10))).toEqual([
      { start: 0, count: 3 },
      { start: 3, count: 3 },
      { start: 6, count: 2 },
      { start: 8, count: 2 },
    ]);
    expect(() => rangeOf(4, 4, 10)).toThrow(RangeError);
    expect(() => rangeOf(0, 0, 10)).toThrow(RangeError);
  });

  it('every partition has exactly one owner, sizes differ by at most one, for 0..40 partitions × 1..12 threads', () => {
    for (let brokers = 1; brokers <= 5; brokers++) {
      for (let per = 0; per <= 8; per++) {
        const ps = partitions(brokers, per);
        for (let c = 1; c <= 12; c++) {
          const threads = Array.from({ length: c }, (_, i) => `consumer${i % 3}-${i}`);
          const m = assignPartitions(ps, threads);
          const all = [...m.values()].flat().map((p) => `${p.brokerId}-${p.partition}`);
          expect(all.sort()).toEqual(ps.map((p) => `${p.brokerId}-${p.partition}`).sort());
          const sizes = [...m.values()].map((x) => x.length);
          expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
          expect(m.size).toBe(c);
        }
      }
    }
  });

  it('is deterministic regardless of input order and duplicates', () => {
    const ps = partitions(3, 4);
    const threads = ['g_h-1-aa-0', 'g_h-1-aa-1', 'g_h-2-bb-0', 'g_h-3-cc-0', 'g_h-3-cc-1'];
    const expected = names(assignPartitions(ps, threads));
    for (let seed = 1; seed <= 20; seed++) {
      const got = names(assignPartitions(shuffle([...ps, ps[seed % ps.length]!], seed), shuffle(threads, seed * 7)));
      expect(got).toEqual(expected);
    }
  });
});
