/**
 * The pure half of the admin API (docs/replication.md §15.1): the checks `createTopic` makes
 * before it writes anything, with their one-line refusals, and the status of a replicated
 * partition as `describeTopics` reports it. No I/O here; {@link Admin} (admin.ts) does the
 * ZooKeeper side.
 */
import { KlogError } from './errors.js';

/**
 * The admin refused a request before writing anything (or the topic is of the other kind). The
 * message is the one line `klog topics` prints after `klog topics: ` (docs/replication.md §15.1).
 */
export class TopicRefusedError extends KlogError {
  override readonly name: string = 'TopicRefusedError';
}

/** What {@link checkCreateTopic} checks. */
export interface CreateTopicRequest {
  /** Partitions, ≥ 1. */
  readonly partitions: number;
  /** Replicas per partition, 1 to the live brokers. */
  readonly replicationFactor: number;
  /** The topic's `min.insync.replicas`, 1 to `replicationFactor`; absent: the brokers' default. */
  readonly minInsyncReplicas?: number;
}

/**
 * Checks a topic creation against the live brokers (docs/replication.md §15.1): `N ≥ 1`,
 * `1 ≤ R ≤ live brokers`, `1 ≤ M ≤ R`.
 * @param liveBrokerIds the ids in `/brokers/ids`, any order
 * @throws TopicRefusedError with the line of §15.1, e.g. `replication factor 3 is larger than the 2 live brokers (0, 1)`
 */
export function checkCreateTopic(request: CreateTopicRequest, liveBrokerIds: readonly number[]): void {
  const { partitions, replicationFactor: r, minInsyncReplicas: m } = request;
  if (!Number.isSafeInteger(partitions) || partitions < 1 || partitions > 0x7fffffff) {
    throw new TopicRefusedError(`--partitions ${partitions} must be an integer of at least 1`);
  }
  if (!Number.isSafeInteger(r) || r < 1) throw new TopicRefusedError(`--replication-factor ${r} must be an integer of at least 1`);
  if (m !== undefined) {
    if (!Number.isSafeInteger(m) || m < 1) throw new TopicRefusedError(`--min-insync-replicas ${m} must be an integer of at least 1`);
    if (m > r) throw new TopicRefusedError(`--min-insync-replicas ${m} is larger than --replication-factor ${r}`);
  }
  const live = [...liveBrokerIds].sort((a, b) => a - b);
  if (r > live.length) {
    throw new TopicRefusedError(
      `replication factor ${r} is larger than the ${live.length} live broker${live.length === 1 ? '' : 's'} (${live.length === 0 ? 'none' : live.join(', ')})`,
    );
  }
}

/** The refusal of `--delete` on a paper topic (docs/replication.md §15.1). */
export function paperTopicDeleteRefusal(topic: string): TopicRefusedError {
  return new TopicRefusedError(`topic ${topic} is a paper topic: its logs belong to the brokers that hold them; stop them and delete LOG_DIR/${topic}-*`);
}

/**
 * A replicated partition's health (docs/replication.md §15.1): `ok` (a live leader, the ISR is
 * the whole replica list), `under-replicated` (a live leader, a smaller ISR), `offline` (no
 * leader, or a leader that is not in `/brokers/ids`).
 */
export type PartitionStatus = 'ok' | 'under-replicated' | 'offline';

/**
 * The status of a partition from its state and the live brokers.
 * @param leader the state's leader, −1 while offline
 */
export function partitionStatus(leader: number, replicas: readonly number[], isr: readonly number[], live: ReadonlySet<number>): PartitionStatus {
  if (leader < 0 || !live.has(leader)) return 'offline';
  return isr.length < replicas.length ? 'under-replicated' : 'ok';
}
