/**
 * The offsets of a group consumer in ZooKeeper (docs/design.md §4):
 * `/consumers/<group>/offsets/<topic>/<brokerId>-<partition>` (`…/<partition>` for a replicated
 * topic, docs/replication.md §14) holds the offset after the last message of the partition the
 * group has consumed. The {@link OffsetCommitter} reads it when a
 * rebalance hands a partition out and writes it, fenced by the claim of the partition, so that
 * a consumer that lost a partition cannot overwrite the offset of its new owner.
 */
import type { Logger } from '@klog/logger';
import {
  OffsetRegistry,
  ZkBadVersionError,
  ZkNoNodeError,
  ZkSessionExpiredError,
  offsetPath,
  parseOffset,
  replicatedOffsetPath,
  type OwnershipFence,
  type ZkClient,
} from '@klog/zk-registry';
import { groupPartition, type OwnedPartition, type ProcessedPosition, partitionKey, replicatedBrokerId } from './config.js';
import type { PartitionTopicInfo } from './message-stream.js';
import type { OffsetReset } from './offset-reset.js';

/** Reads and commits the offsets of one consumer's partitions, one commit at a time. */
export class OffsetCommitter {
  /** The claim of each owned partition, by {@link partitionKey}: commits are fenced by it; replaced by each rebalance. */
  fences = new Map<string, OwnershipFence>();
  private readonly offsets: OffsetRegistry;
  /** Serializes commits so that an older offset never overwrites a newer one. */
  private commitChain: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | undefined;

  /**
   * @param policy the consumer's `autoOffsetReset`, named in the warning about a stored offset that is not valid
   */
  constructor(
    private readonly zk: ZkClient,
    private readonly groupId: string,
    private readonly policy: OffsetReset,
    private readonly logger: Logger,
  ) {
    this.offsets = new OffsetRegistry(zk);
  }

  /**
   * The committed offset of a partition; undefined (start from the reset policy) when none is
   * stored or the stored value is not a non-negative integer (with a warning).
   * @throws ZkError when ZooKeeper fails
   */
  async read(p: OwnedPartition): Promise<number | undefined> {
    const path =
      p.brokerId === replicatedBrokerId ? replicatedOffsetPath(this.groupId, p.topic, p.partition) : offsetPath(this.groupId, p.topic, p.brokerId, p.partition);
    const node = await this.zk.getData(path);
    if (node === undefined) return undefined;
    const value = node.data.toString('utf8');
    const offset = parseOffset(value);
    if (offset === undefined) {
      this.logger.warn(
        { topic: p.topic, brokerId: p.brokerId, partition: p.partition, value, policy: this.policy },
        'invalid committed offset (not a non-negative integer); using the reset policy',
      );
    }
    return offset;
  }

  /**
   * Commits, after the commits asked before it, each partition's consumed offset (or, with
   * `processed`, the listed positions, at most the consumed offset); see
   * {@link GroupConsumer.commitOffsets}. A partition this consumer no longer owns is skipped
   * with a warning.
   * @throws ZkError when ZooKeeper fails otherwise
   */
  commit(infos: readonly PartitionTopicInfo[], processed?: Iterable<ProcessedPosition>): Promise<void> {
    let upTo: Map<string, number> | undefined;
    if (processed !== undefined) {
      upTo = new Map();
      for (const p of processed) upTo.set(partitionKey(p), p.nextOffset);
    }
    const run = this.commitChain.then(() => this.commitNow(infos, upTo));
    this.commitChain = run.catch(() => {});
    return run;
  }

  /** Calls `commit` every `intervalMs` ms (a failure is logged and retried next time) until {@link stopAutoCommit}. */
  startAutoCommit(intervalMs: number, commit: () => Promise<void>): void {
    this.timer = setInterval(() => {
      commit().catch((err: unknown) => this.logger.warn({ err }, 'auto-commit failed; will retry'));
    }, intervalMs);
    this.timer.unref();
  }

  /** Stops the auto-commit timer (if started). */
  stopAutoCommit(): void {
    clearInterval(this.timer);
  }

  private async commitNow(infos: readonly PartitionTopicInfo[], upTo?: ReadonlyMap<string, number>): Promise<void> {
    const committed: Array<{ topic: string; brokerId: number; partition: number; offset: number }> = [];
    for (const info of infos) {
      const consumed = info.consumedOffset;
      const asked = upTo === undefined ? consumed : upTo.get(partitionKey(info));
      const offset = asked === undefined || consumed === undefined ? undefined : Math.min(asked, consumed);
      if (offset === undefined || offset === info.committedOffset) continue;
      try {
        await this.offsets.commit(this.groupId, info.topic, groupPartition(info), offset, this.fences.get(partitionKey(info)));
      } catch (err) {
        if (!(err instanceof ZkBadVersionError || err instanceof ZkNoNodeError || err instanceof ZkSessionExpiredError)) throw err;
        this.logger.warn({ topic: info.topic, brokerId: info.brokerId, partition: info.partition, offset, err }, 'offset not committed: this consumer no longer owns the partition');
        continue;
      }
      info.committedOffset = offset;
      committed.push({ topic: info.topic, brokerId: info.brokerId, partition: info.partition, offset });
    }
    if (committed.length > 0) this.logger.debug({ group: this.groupId, offsets: committed }, 'offsets committed');
  }
}
