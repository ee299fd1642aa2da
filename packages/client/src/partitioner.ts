/**
 * How a producer picks the partition of a record (docs/design.md §5): the partition named in the record,
 * else a function of its key, else (neither) the topic's sticky partition, which moves to
 * another random partition once it was given a batch's worth of records ({@link StickyPartitioner});
 * with `keylessPartitioning: 'random'`, a random partition per record as in the paper. Partitions
 * are numbered 0..N-1 over all the partitions of the topic on every broker of the producer's
 * broker list (see Producer).
 */
import { crc32 } from 'node:zlib';

/**
 * Maps a record key to a partition number in `[0, numPartitions)`. Must be deterministic for
 * key partitioning to keep records with the same key in the same partition.
 * @param key the key's bytes (a string key is its UTF-8 bytes)
 * @param numPartitions partitions of the topic, ≥ 1
 */
export type Partitioner = (key: Buffer, numPartitions: number) => number;

/**
 * The default partitioner: CRC-32 (IEEE) of the key bytes modulo the partition count. The same
 * key always lands in the same partition as long as the partition count does not change.
 */
export const hashPartitioner: Partitioner = (key, numPartitions) => (crc32(key) >>> 0) % numPartitions;

/** A uniformly random partition in `[0, numPartitions)`, for records with neither partition nor key (`keylessPartitioning: 'random'`). */
export function randomPartition(numPartitions: number): number {
  return Math.floor(Math.random() * numPartitions);
}

/**
 * Where records with neither partition nor key go (docs/design.md §5): `'sticky'` (the default),
 * a batch's worth to one partition, then the next batch's worth to another; `'random'`, each
 * record to a partition of its own drawing, as in the paper.
 */
export type KeylessPartitioning = 'sticky' | 'random';

/**
 * The sticky choice for records with neither partition nor key (docs/design.md §5): each topic
 * has a current partition, which takes the next `recordsPerPartition` keyless records of the
 * topic (the producer's batch size, so that they fill one message set), then moves to a uniformly
 * random partition other than the last one (when there are more than one). Records spread over
 * the partitions batch by batch, not record by record: with many partitions a batch is one full
 * set, not one set per record.
 *
 * The move is counted in records, not triggered by a batch leaving: a partition of a slow broker
 * would otherwise keep its batch open longer, take more records, and slow its broker more.
 */
export class StickyPartitioner {
  /** Per topic: the current partition, of how many, and the records it still takes. */
  private readonly topics = new Map<string, { partition: number; numPartitions: number; left: number }>();

  /**
   * @param recordsPerPartition keyless records a partition takes before the next one is drawn, ≥ 1
   * @param random uniform in [0, 1) (default `Math.random`)
   * @throws RangeError when recordsPerPartition is not an integer ≥ 1
   */
  constructor(
    private readonly recordsPerPartition: number,
    private readonly random: () => number = Math.random,
  ) {
    if (!Number.isInteger(recordsPerPartition) || recordsPerPartition < 1) throw new RangeError(`recordsPerPartition ${recordsPerPartition} must be an integer ≥ 1`);
  }

  /**
   * The partition in `[0, numPartitions)` of the next keyless record of `topic`. A change of the
   * partition count (partitions added, brokers gone for ZkProducer's live list) draws a new one.
   * @param numPartitions partitions to choose from, ≥ 1
   */
  partition(topic: string, numPartitions: number): number {
    let s = this.topics.get(topic);
    if (s === undefined || s.left === 0 || s.numPartitions !== numPartitions) {
      const last = s !== undefined && s.partition < numPartitions ? s.partition : -1;
      let next: number;
      if (numPartitions === 1) next = 0;
      else if (last < 0) next = Math.floor(this.random() * numPartitions);
      else {
        // Uniform over the other numPartitions - 1 partitions.
        next = Math.floor(this.random() * (numPartitions - 1));
        if (next >= last) next++;
      }
      s = { partition: next, numPartitions, left: this.recordsPerPartition };
      this.topics.set(topic, s);
    }
    s.left--;
    return s.partition;
  }
}
