/**
 * How a producer picks the partition of a record (docs/design.md §5): the partition named in the record,
 * else a function of its key, else a random partition. Partitions are numbered 0..N-1 over all
 * the partitions of the topic on every broker of the producer's broker list (see Producer).
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

/** A uniformly random partition in `[0, numPartitions)`, for records with neither partition nor key. */
export function randomPartition(numPartitions: number): number {
  return Math.floor(Math.random() * numPartitions);
}
