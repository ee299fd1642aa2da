/**
 * Replica assignment of a replicated topic (docs/replication.md §4): which brokers hold each
 * partition's replicas, the first of each list being the partition's preferred leader. The lists
 * are stored in the topic definition under `/brokers/topics/<topic>` (docs/replication.md §3.1);
 * this module only computes and checks them, it does not touch ZooKeeper.
 *
 * The scheme is Kafka's round-robin with shifting, over the live brokers sorted by id
 * `b[0..n-1]`, with a start index `s` and a shift `k`:
 *
 * ```
 * for p in 0 .. N-1:
 *     if p > 0 and p mod n == 0: k = k + 1
 *     first = (s + p) mod n                       -> replica 0, the preferred leader
 *     replica j+1 = b[(first + 1 + (k + j) mod (n - 1)) mod n]    for j in 0 .. R-2
 * ```
 *
 * Preferred leaders go round the brokers, so each leads `floor(N/n)` or `ceil(N/n)` partitions;
 * a follower's distance from its leader is in `1..n-1` and differs per follower, so a list never
 * names a broker twice; and the shift moves the followers of each round of `n` partitions one
 * broker further, so the partitions one broker leads do not all have their followers on the same
 * brokers.
 */
import { ZkError } from './errors.js';
import { checkBrokerId } from './paths.js';

/** A partition's replicas, by broker id, preferred leader first; the array index is the partition. */
export type ReplicaAssignment = readonly (readonly number[])[];

/** Most partitions of one topic: partition numbers are int32. */
export const maxPartitions = 0x7fffffff;

/** Options of {@link assignReplicas}. */
export interface AssignReplicasOptions {
  /** Index (into the sorted broker ids) of partition 0's preferred leader, `0..n-1`. Default: random. */
  readonly startIndex?: number;
  /** The follower shift `k` for the first round of partitions, `0..n-1`. Default: random. */
  readonly replicaShift?: number;
  /** Source of the random defaults, `[0, 1)`. Default `Math.random`. */
  readonly random?: () => number;
}

/**
 * The replica lists cannot be made or are malformed: a replication factor larger than the
 * brokers, a partition count out of range, a broker named twice in a list, lists of different
 * lengths. The message says which and what was seen.
 */
export class InvalidReplicaAssignmentError extends ZkError {}

/**
 * Assigns the replicas of `partitions` partitions over `brokerIds` (the live brokers, in any
 * order; they are sorted) with `replicationFactor` replicas each (docs/replication.md §4).
 * @returns one replica list per partition, index = partition number, preferred leader first
 * @throws InvalidReplicaAssignmentError when `replicationFactor` is not in `1..brokerIds.length`,
 *   `partitions` is not in `1..maxPartitions`, a broker id repeats, or an option is out of range;
 *   InvalidNameError for a broker id that is not a non-negative integer
 */
export function assignReplicas(
  brokerIds: readonly number[],
  partitions: number,
  replicationFactor: number,
  options: AssignReplicasOptions = {},
): number[][] {
  const brokers = sortedDistinctBrokers(brokerIds);
  const n = brokers.length;
  if (!Number.isSafeInteger(partitions) || partitions < 1 || partitions > maxPartitions) {
    throw new InvalidReplicaAssignmentError(`partition count must be an integer in 1..${maxPartitions}, got ${partitions}`);
  }
  if (!Number.isSafeInteger(replicationFactor) || replicationFactor < 1) {
    throw new InvalidReplicaAssignmentError(`replication factor must be a positive integer, got ${replicationFactor}`);
  }
  if (replicationFactor > n) {
    throw new InvalidReplicaAssignmentError(
      `replication factor ${replicationFactor} is larger than the ${n} live broker${n === 1 ? '' : 's'} (${brokers.join(', ')})`,
    );
  }
  const random = options.random ?? Math.random;
  const start = indexOption('startIndex', options.startIndex, n, random);
  let shift = indexOption('replicaShift', options.replicaShift, n, random);
  const out: number[][] = [];
  for (let p = 0; p < partitions; p++) {
    if (p > 0 && p % n === 0) shift++;
    const first = (start + p) % n;
    const replicas = [brokers[first]!];
    for (let j = 0; j < replicationFactor - 1; j++) replicas.push(brokers[(first + 1 + ((shift + j) % (n - 1))) % n]!);
    out.push(replicas);
  }
  return out;
}

/**
 * Checks replica lists read back from a topic definition: at least one partition, every list
 * non-empty, of one length, of valid broker ids, none repeated within a list.
 * @returns the replication factor (the common length)
 * @throws InvalidReplicaAssignmentError naming the first partition that is wrong
 */
export function checkReplicaAssignment(assignment: ReplicaAssignment): number {
  if (assignment.length < 1 || assignment.length > maxPartitions) {
    throw new InvalidReplicaAssignmentError(`a replicated topic has 1..${maxPartitions} partitions, got ${assignment.length}`);
  }
  const factor = assignment[0]!.length;
  assignment.forEach((replicas, partition) => {
    if (replicas.length === 0 || replicas.length !== factor) {
      throw new InvalidReplicaAssignmentError(`partition ${partition} has ${replicas.length} replicas where partition 0 has ${factor}`);
    }
    for (const id of replicas) {
      if (!Number.isSafeInteger(id) || id < 0) throw new InvalidReplicaAssignmentError(`partition ${partition} names broker ${id}: not a broker id`);
    }
    if (new Set(replicas).size !== replicas.length) {
      throw new InvalidReplicaAssignmentError(`partition ${partition} names a broker twice: ${replicas.join(',')}`);
    }
  });
  return factor;
}

function sortedDistinctBrokers(brokerIds: readonly number[]): number[] {
  const brokers = brokerIds.map(checkBrokerId).sort((a, b) => a - b);
  if (brokers.length === 0) throw new InvalidReplicaAssignmentError('no live broker to assign replicas to');
  for (let i = 1; i < brokers.length; i++) {
    if (brokers[i] === brokers[i - 1]) throw new InvalidReplicaAssignmentError(`broker ${brokers[i]} is listed twice`);
  }
  return brokers;
}

function indexOption(name: string, value: number | undefined, n: number, random: () => number): number {
  if (value === undefined) return Math.min(n - 1, Math.floor(random() * n));
  if (!Number.isSafeInteger(value) || value < 0 || value >= n) {
    throw new InvalidReplicaAssignmentError(`${name} must be an integer in 0..${n - 1} for ${n} broker${n === 1 ? '' : 's'}, got ${value}`);
  }
  return value;
}
