/** The sticky choice of a partition for records with neither partition nor key (docs/design.md §5). */
import { describe, expect, it } from 'vitest';
import { ProducerPool } from '../src/producer-pool.js';
import { StickyPartitioner } from '../src/partitioner.js';

/** `random` returning the given values in turn, then repeating them. */
function sequence(...values: number[]): () => number {
  let i = 0;
  return () => values[i++ % values.length]!;
}

describe('StickyPartitioner', () => {
  it('gives one partition a batch of records before it moves, and moves to another', () => {
    const s = new StickyPartitioner(50, sequence(0.5, 0.5));
    const first = Array.from({ length: 50 }, () => s.partition('t', 100));
    expect(new Set(first)).toEqual(new Set([50]));
    // The next draw is over the other 99: 0.5 * 99 = 49.5 -> 49, below 50, so 49.
    const second = Array.from({ length: 50 }, () => s.partition('t', 100));
    expect(new Set(second)).toEqual(new Set([49]));
    // 0.5 * 99 -> 49 again, at or above the last (49): 50.
    expect(s.partition('t', 100)).toBe(50);
  });

  it('never draws the last partition again when there are others', () => {
    // A random source that always says the same: the partition still moves every batch.
    const s = new StickyPartitioner(3, () => 0);
    const got = Array.from({ length: 12 }, () => s.partition('t', 4));
    expect(got).toEqual([0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1]);
    const high = new StickyPartitioner(1, () => 0.999_999);
    expect(Array.from({ length: 4 }, () => high.partition('t', 2))).toEqual([1, 0, 1, 0]);
    const one = new StickyPartitioner(2, Math.random);
    expect(Array.from({ length: 5 }, () => one.partition('t', 1))).toEqual([0, 0, 0, 0, 0]);
  });

  it('covers the partitions evenly over many batches', () => {
    const s = new StickyPartitioner(50);
    const counts = new Array<number>(100).fill(0);
    const batches = 20_000;
    for (let i = 0; i < batches * 50; i++) counts[s.partition('t', 100)]!++;
    // 200 batches per partition expected (10,000 records); binomial sd about 14 batches.
    for (const c of counts) {
      expect(c % 50).toBe(0);
      expect(c / 50).toBeGreaterThan(130);
      expect(c / 50).toBeLessThan(270);
    }
  });

  it('keeps a partition per topic, and draws again when the partition count changes', () => {
    const s = new StickyPartitioner(10, sequence(0.1, 0.9, 0.5));
    expect(s.partition('a', 10)).toBe(1);
    expect(s.partition('b', 10)).toBe(9);
    expect(s.partition('a', 10)).toBe(1);
    expect(s.partition('b', 10)).toBe(9);
    // Topic a now has 4 partitions (say, a broker went down): a new draw within 0..3, other than 1.
    expect(s.partition('a', 4)).toBe(2);
    expect(() => new StickyPartitioner(0)).toThrow(RangeError);
  });
});

describe('ProducerPool.keylessPartition', () => {
  it('is sticky for batchSize records by default', async () => {
    const pool = new ProducerPool({ batchSize: 7 });
    const got = Array.from({ length: 70 }, () => pool.keylessPartition('t', 1000));
    for (let i = 0; i < 70; i += 7) {
      expect(new Set(got.slice(i, i + 7)).size).toBe(1);
      if (i > 0) expect(got[i]).not.toBe(got[i - 1]);
    }
    await pool.close();
  });

  it("with keylessPartitioning 'random' draws per record", async () => {
    const pool = new ProducerPool({ batchSize: 1000, keylessPartitioning: 'random' });
    const got = Array.from({ length: 100 }, () => pool.keylessPartition('t', 1000));
    // 100 draws of 1,000: nearly all distinct (sticky would give one).
    expect(new Set(got).size).toBeGreaterThan(80);
    await pool.close();
    expect(() => new ProducerPool({ keylessPartitioning: 'hash' as 'random' })).toThrow(RangeError);
  });
});
