/**
 * The paper's Algorithm 1 (§3.3, docs/design.md §4) as a pure function: which consumer thread owns which
 * partition of a topic.
 *
 * Every consumer of a group computes the same answer from the same registries: the partitions
 * are sorted by (broker id, partition), the thread ids (`<consumerId>-<i>`) as strings, and
 * thread `j` of `C` takes the contiguous range that starts at `j * N + min(j, R)` and holds
 * `N + (j < R ? 1 : 0)` partitions, with `N = floor(P / C)` and `R = P mod C` (the remainder is
 * spread over the first `R` threads, as in Kafka 0.7). Every partition has exactly one owner;
 * threads beyond the `P`-th own nothing.
 */

/** A partition of a topic: partition `partition` on broker `brokerId`. */
export interface PartitionRef {
  readonly brokerId: number;
  readonly partition: number;
}

/** Orders partitions by broker id, then partition number. */
export function comparePartitions(a: PartitionRef, b: PartitionRef): number {
  return a.brokerId - b.brokerId || a.partition - b.partition;
}

/** Orders thread ids as strings (code-unit order, as Kafka 0.7's sort of strings). */
export function compareThreadIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The range of sorted partitions thread `j` of `threads` takes out of `partitions`:
 * `[start, start + count)`.
 * @throws RangeError when `j` is not in `0..threads-1` or a count is negative
 */
export function rangeOf(j: number, threads: number, partitions: number): { start: number; count: number } {
  if (!Number.isInteger(threads) || threads < 1) throw new RangeError(`thread count ${threads} must be a positive integer`);
  if (!Number.isInteger(j) || j < 0 || j >= threads) throw new RangeError(`thread index ${j} must be in 0..${threads - 1}`);
  if (!Number.isInteger(partitions) || partitions < 0) throw new RangeError(`partition count ${partitions} must be a non-negative integer`);
  const perThread = Math.floor(partitions / threads);
  const extra = partitions % threads;
  return { start: j * perThread + Math.min(j, extra), count: perThread + (j < extra ? 1 : 0) };
}

/**
 * Algorithm 1 for one topic: assigns every partition to exactly one thread.
 *
 * Inputs may come in any order and may hold duplicates (they are sorted and deduplicated
 * first), so every consumer computes the same map from the same registry contents.
 * @param partitions every (broker, partition) of the topic on the live brokers
 * @param threadIds every thread id (`<consumerId>-<i>`) of every consumer subscribed to the topic
 * @returns thread id → its partitions, sorted; every thread id is a key (possibly with none)
 */
export function assignPartitions(
  partitions: readonly PartitionRef[],
  threadIds: readonly string[],
): Map<string, PartitionRef[]> {
  const sortedPartitions = dedupe([...partitions].sort(comparePartitions), (a, b) => comparePartitions(a, b) === 0);
  const sortedThreads = dedupe([...threadIds].sort(compareThreadIds), (a, b) => a === b);
  const out = new Map<string, PartitionRef[]>();
  sortedThreads.forEach((threadId, j) => {
    const { start, count } = rangeOf(j, sortedThreads.length, sortedPartitions.length);
    out.set(
      threadId,
      sortedPartitions.slice(start, start + count).map((p) => ({ brokerId: p.brokerId, partition: p.partition })),
    );
  });
  return out;
}

function dedupe<T>(sorted: T[], same: (a: T, b: T) => boolean): T[] {
  return sorted.filter((x, i) => i === 0 || !same(sorted[i - 1]!, x));
}
