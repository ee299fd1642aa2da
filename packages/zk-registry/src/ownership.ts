/**
 * Partition ownership within a consumer group (docs/design.md §4).
 *
 * `/consumers/<group>/owners/<topic>/<brokerId>-<partition>` (a replicated topic's:
 * `…/<partition>`, docs/replication.md §14), ephemeral, value the owning
 * consumer thread id (`<consumerId>-<i>`, UTF-8). A claim is one-shot: it is NOT re-created
 * after session expiry; the consumer re-runs its rebalance on the client's `session` event
 * and claims again.
 */
import { ZkNodeExistsError } from './errors.js';
import {
  type BrokerPartition,
  type GroupPartition,
  isReplicatedPartition,
  ownerPath,
  ownersGroupPath,
  ownersPath,
  parsePartitionName,
  parsePartitionNumber,
  replicatedOwnerPath,
} from './paths.js';
import type { ZkClient } from './zk-client.js';
import type { Logger } from '@klog/logger';

/** Who owns one partition. */
export interface PartitionOwner extends BrokerPartition {
  /** The owning consumer thread id. */
  readonly owner: string;
}

/**
 * A claim as ZooKeeper holds it: the owner node, its version and the session that holds it.
 * An offset commit made with it ({@link OffsetRegistry.commit}) goes through only while this
 * session still holds this node: a member that lost its partition (a session that expired
 * during a long pause) cannot write over the new owner's commits.
 */
export interface OwnershipFence {
  /** The owner node's path. */
  readonly path: string;
  /** Its data version when claimed. */
  readonly version: number;
  /** The session that holds it (16 hex digits). */
  readonly sessionId: string;
}

/** Claims, releases and reads `/consumers/<group>/owners` (docs/design.md §4). */
export class OwnershipRegistry {
  private readonly logger: Logger;

  constructor(
    private readonly zk: ZkClient,
    options: { logger?: Logger } = {},
  ) {
    this.logger = options.logger ?? zk.logger;
  }

  /**
   * Claims a partition for `threadId` with an ephemeral node of this session. Returns true
   * when this session now owns it for `threadId` (also when it already did), false when it
   * is owned by someone else (another session, or another thread id). Throws
   * {@link ZkSessionExpiredError} when the session expired during the claim.
   */
  async claim(group: string, topic: string, partition: GroupPartition, threadId: string): Promise<boolean> {
    const path = groupOwnerPath(group, topic, partition);
    try {
      await this.zk.create(path, threadId, { mode: 'ephemeral' });
      return true;
    } catch (error) {
      if (!(error instanceof ZkNodeExistsError)) throw error;
    }
    const node = await this.zk.getData(path);
    if (node === undefined) return this.claim(group, topic, partition, threadId); // released meanwhile
    const owner = node.data.toString('utf8');
    const mine = node.stat.ephemeralOwner === this.zk.sessionId && owner === threadId;
    if (!mine) this.logger.debug({ group, topic, ...partition, owner, threadId }, 'partition already owned');
    return mine;
  }

  /**
   * Claims a partition as {@link claim} does and returns the claim's {@link OwnershipFence}, or
   * undefined when someone else owns it (or the session changed while claiming).
   */
  async claimFenced(group: string, topic: string, partition: GroupPartition, threadId: string): Promise<OwnershipFence | undefined> {
    if (!(await this.claim(group, topic, partition, threadId))) return undefined;
    const path = groupOwnerPath(group, topic, partition);
    const node = await this.zk.getData(path);
    if (node === undefined || node.stat.ephemeralOwner !== this.zk.sessionId || node.data.toString('utf8') !== threadId) return undefined;
    return { path, version: node.stat.version, sessionId: node.stat.ephemeralOwner };
  }

  /**
   * Releases a partition this session owns. Never removes another session's claim. Returns
   * whether a node was removed.
   */
  async release(group: string, topic: string, partition: GroupPartition): Promise<boolean> {
    return this.zk.removeOwnEphemeral(groupOwnerPath(group, topic, partition));
  }

  /** The thread id owning a partition, or undefined when nobody does. */
  async owner(group: string, topic: string, partition: GroupPartition): Promise<string | undefined> {
    return (await this.zk.getData(groupOwnerPath(group, topic, partition)))?.data.toString('utf8');
  }

  /** Every owned partition of `topic` in `group`, sorted by broker id then partition. */
  async listOwners(group: string, topic: string): Promise<PartitionOwner[]> {
    const out: PartitionOwner[] = [];
    for (const name of await this.zk.getChildren(ownersPath(group, topic))) {
      const bp = parsePartitionName(name);
      // A replicated topic's owners are `<partition>` (listReplicatedOwners reads them).
      if (bp === undefined && parsePartitionNumber(name) !== undefined) continue;
      if (bp === undefined) {
        this.logger.warn({ group, topic, name }, 'ignoring an owner znode whose name is not <brokerId>-<partition>');
        continue;
      }
      const owner = await this.owner(group, topic, bp);
      if (owner !== undefined) out.push({ ...bp, owner });
    }
    return out.sort((a, b) => a.brokerId - b.brokerId || a.partition - b.partition);
  }

  /** Every owned partition of a replicated `topic` in `group` (its `<partition>` nodes), by partition. */
  async listReplicatedOwners(group: string, topic: string): Promise<Array<{ readonly partition: number; readonly owner: string }>> {
    const out: Array<{ partition: number; owner: string }> = [];
    for (const name of await this.zk.getChildren(ownersPath(group, topic))) {
      const partition = parsePartitionNumber(name);
      if (partition === undefined) continue;
      const owner = await this.owner(group, topic, { replicated: true, partition });
      if (owner !== undefined) out.push({ partition, owner });
    }
    return out.sort((a, b) => a.partition - b.partition);
  }

  /** Topics with an owners node in `group`, sorted. */
  async listTopics(group: string): Promise<string[]> {
    return this.zk.getChildren(ownersGroupPath(group));
  }
}

/** The owner node of a paper or a replicated partition (docs/replication.md §14). */
function groupOwnerPath(group: string, topic: string, p: GroupPartition): string {
  return isReplicatedPartition(p) ? replicatedOwnerPath(group, topic, p.partition) : ownerPath(group, topic, p.brokerId, p.partition);
}
