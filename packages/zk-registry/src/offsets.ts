/**
 * Committed consumer offsets (docs/design.md §4).
 *
 * `/consumers/<group>/offsets/<topic>/<brokerId>-<partition>` (a replicated topic's:
 * `…/<partition>`, docs/replication.md §14), persistent, value the next byte offset to read as a
 * decimal string (Kafka 0.7). A stored value that is not a
 * non-negative decimal integer within `Number.MAX_SAFE_INTEGER` reads as missing, with a
 * warning, so that the consumer falls back to its `auto.offset.reset` policy.
 */
import { ZkError } from './errors.js';
import type { Logger } from '@klog/logger';
import {
  type BrokerPartition,
  type GroupPartition,
  isReplicatedPartition,
  offsetPath,
  offsetsGroupPath,
  offsetsPath,
  parsePartitionName,
  parsePartitionNumber,
  replicatedOffsetPath,
} from './paths.js';
import type { OwnershipFence } from './ownership.js';
import type { ZkClient } from './zk-client.js';

/** A committed offset of one partition. */
export interface PartitionOffset extends BrokerPartition {
  /** Next byte offset to read; undefined when the stored value is invalid. */
  readonly offset: number | undefined;
}

/** Parses a stored offset: a non-negative safe integer in decimal, else undefined. */
export function parseOffset(value: string): number | undefined {
  const text = value.trim();
  if (!/^\d{1,16}$/.test(text)) return undefined;
  const offset = Number(text);
  return Number.isSafeInteger(offset) ? offset : undefined;
}

/** Commits and reads `/consumers/<group>/offsets` (docs/design.md §4). */
export class OffsetRegistry {
  private readonly logger: Logger;

  constructor(
    private readonly zk: ZkClient,
    options: { logger?: Logger } = {},
  ) {
    this.logger = options.logger ?? zk.logger;
  }

  /**
   * Commits `offset` (the next byte offset to read) for a partition, creating the node if
   * needed. With `fence` the write is fenced by ownership: one ZooKeeper multi that checks the
   * owner node of the claim is still at its version, in the session that holds it
   * ({@link ZkClient.putIf}); a consumer that no longer owns the partition gets
   * {@link ZkBadVersionError}, {@link ZkNoNodeError} or {@link ZkSessionExpiredError} and
   * nothing is written. Throws {@link ZkError} when `offset` is not a non-negative safe integer.
   */
  async commit(group: string, topic: string, partition: GroupPartition, offset: number, fence?: OwnershipFence): Promise<void> {
    if (!Number.isSafeInteger(offset) || offset < 0) {
      const name = isReplicatedPartition(partition) ? String(partition.partition) : `${partition.brokerId}-${partition.partition}`;
      throw new ZkError(`invalid offset ${offset} for ${topic} ${name}: must be a non-negative integer`);
    }
    const path = groupOffsetPath(group, topic, partition);
    if (fence === undefined) await this.zk.put(path, String(offset));
    else await this.zk.putIf(fence, path, String(offset));
  }

  /**
   * The committed offset of a partition; undefined when none is stored or the stored value
   * is invalid (missing: silently; invalid: logged as a warning).
   */
  async read(group: string, topic: string, partition: GroupPartition): Promise<number | undefined> {
    const path = groupOffsetPath(group, topic, partition);
    const node = await this.zk.getData(path);
    if (node === undefined) return undefined;
    return this.decode(node.data.toString('utf8'), path);
  }

  /** Every committed offset of `topic` in `group`, sorted by broker id then partition. */
  async list(group: string, topic: string): Promise<PartitionOffset[]> {
    const out: PartitionOffset[] = [];
    for (const name of await this.zk.getChildren(offsetsPath(group, topic))) {
      const bp = parsePartitionName(name);
      if (bp === undefined) continue;
      const node = await this.zk.getData(offsetPath(group, topic, bp.brokerId, bp.partition));
      if (node === undefined) continue;
      out.push({ ...bp, offset: this.decode(node.data.toString('utf8'), `${offsetsPath(group, topic)}/${name}`) });
    }
    return out.sort((a, b) => a.brokerId - b.brokerId || a.partition - b.partition);
  }

  /** Every committed offset of a replicated `topic` in `group` (its `<partition>` nodes), by partition. */
  async listReplicated(group: string, topic: string): Promise<Array<{ readonly partition: number; readonly offset: number | undefined }>> {
    const out: Array<{ partition: number; offset: number | undefined }> = [];
    for (const name of await this.zk.getChildren(offsetsPath(group, topic))) {
      const partition = parsePartitionNumber(name);
      if (partition === undefined) continue;
      const path = replicatedOffsetPath(group, topic, partition);
      const node = await this.zk.getData(path);
      if (node !== undefined) out.push({ partition, offset: this.decode(node.data.toString('utf8'), path) });
    }
    return out.sort((a, b) => a.partition - b.partition);
  }

  /** Topics with committed offsets in `group`, sorted. */
  async listTopics(group: string): Promise<string[]> {
    return this.zk.getChildren(offsetsGroupPath(group));
  }

  private decode(value: string, path: string): number | undefined {
    const offset = parseOffset(value);
    if (offset === undefined) {
      this.logger.warn({ path, value }, 'ignoring an invalid committed offset (not a non-negative integer)');
    }
    return offset;
  }
}

/** The offset node of a paper or a replicated partition (docs/replication.md §14). */
function groupOffsetPath(group: string, topic: string, p: GroupPartition): string {
  return isReplicatedPartition(p) ? replicatedOffsetPath(group, topic, p.partition) : offsetPath(group, topic, p.brokerId, p.partition);
}
