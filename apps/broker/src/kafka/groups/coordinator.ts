/**
 * The group coordinator of the Kafka listener (docs/kafka-protocol.md, "Consumer groups"). The
 * coordinator of a group is the live broker at index `crc32(group id) mod n` of the n brokers
 * with a Kafka listener, sorted by id, so every broker answers FindCoordinator alike; the others
 * answer the group's requests with NOT_COORDINATOR. Offset commits are fenced by generation: only
 * a member of the current generation may commit (a zombie gets ILLEGAL_GENERATION or
 * UNKNOWN_MEMBER_ID), and a commit outside any generation (generation -1) only while the group
 * has no members.
 */
import { crc32Ieee } from '@klog/protocol';
import { KafkaErrorCode } from '@klog/kafka-protocol';
import { silentLogger, type Logger } from '@klog/logger';
import { checkGroup } from '@klog/zk-registry';
import type { KafkaBroker, KafkaTopology } from '../topology.js';
import { Group } from './group.js';
import type { GroupOffsetStore } from './offset-store.js';

/** Smallest and largest session timeout a member may ask for, in ms. */
export const minSessionTimeoutMs = 1000;
export const maxSessionTimeoutMs = 300_000;

/** Kafka consumer groups coordinated by this broker, and their committed offsets. */
export class GroupCoordinator {
  private readonly groups = new Map<string, Group>();

  constructor(
    private readonly topology: KafkaTopology,
    /** Where committed offsets are kept. */
    readonly offsets: GroupOffsetStore,
    /** Where rebalances are logged (at debug level). */
    private readonly logger: Logger = silentLogger,
  ) {}

  /** The broker that coordinates `groupId` among the live ones. */
  async coordinatorOf(groupId: string): Promise<KafkaBroker> {
    const brokers = await this.topology.brokers();
    return brokers[crc32Ieee(Buffer.from(groupId, 'utf8')) % brokers.length]!;
  }

  /**
   * The group when this broker coordinates it; else the error code: NOT_COORDINATOR, or
   * INVALID_GROUP_ID for an id that cannot be a ZooKeeper path component. A group without members
   * is kept only while `join` brings one (a group is forgotten when its last member goes, so
   * requests naming groups nobody joins hold no memory); otherwise an empty one is handed out.
   */
  async group(groupId: string, join = false): Promise<Group | number> {
    try {
      checkGroup(groupId);
    } catch {
      return KafkaErrorCode.InvalidGroupId;
    }
    if ((await this.coordinatorOf(groupId)).nodeId !== this.topology.self.nodeId) return KafkaErrorCode.NotCoordinator;
    const g = this.groups.get(groupId);
    if (g !== undefined) return g;
    const fresh = new Group(
      groupId,
      () => {
        if (this.groups.get(groupId) === fresh) this.groups.delete(groupId);
      },
      this.logger,
    );
    if (join) this.groups.set(groupId, fresh);
    return fresh;
  }

  /**
   * Whether `memberId` of `generation` may commit offsets for `group`.
   * @returns None, or the error to answer every partition of the commit with
   */
  mayCommit(group: Group, memberId: string, generation: number): number {
    if (generation === -1 && memberId === '') return group.state === 'Empty' ? KafkaErrorCode.None : KafkaErrorCode.IllegalGeneration;
    const error = group.check(memberId, generation);
    if (error !== KafkaErrorCode.None) return error;
    if (group.state === 'CompletingRebalance') return KafkaErrorCode.RebalanceInProgress;
    group.touch(memberId);
    return KafkaErrorCode.None;
  }

  /** Groups this broker coordinates with their state, for logs and tests. */
  describe(): { groupId: string; state: string; generation: number; members: string[] }[] {
    return [...this.groups.values()].map((g) => ({ groupId: g.groupId, state: g.state, generation: g.generation, members: g.memberIds() }));
  }

  /** Drops every group's members and timers. */
  close(): void {
    for (const g of this.groups.values()) g.close();
    this.groups.clear();
  }
}
