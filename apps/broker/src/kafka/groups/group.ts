/**
 * One Kafka consumer group's membership (docs/kafka-protocol.md, "Consumer groups"), as Kafka's
 * group coordinator keeps it: members join (JoinGroup), the coordinator waits until every known
 * member has rejoined or the rebalance timeout passes, bumps the generation, picks a protocol
 * (assignor) every member supports and sends the leader the members' subscriptions; the leader
 * computes the assignment client-side and sends it with SyncGroup, which hands each member its
 * part. Heartbeats keep a member's session; a member silent for its session timeout is removed
 * and the group rebalances. Nothing of this is stored: after a coordinator restart members
 * rejoin (UNKNOWN_MEMBER_ID) and resume from their committed offsets.
 */
import { randomUUID } from 'node:crypto';
import { KafkaErrorCode, type GroupProtocol, type JoinGroupResponse } from '@klog/kafka-protocol';
import { silentLogger, type Logger } from '@klog/logger';

/** Where a group is in its rebalance cycle. */
export type GroupState = 'Empty' | 'PreparingRebalance' | 'CompletingRebalance' | 'Stable';

interface Member {
  readonly memberId: string;
  readonly clientId: string;
  sessionTimeoutMs: number;
  protocols: readonly GroupProtocol[];
  /** Answers this member's JoinGroup, while it waits for the rebalance to complete. */
  join: ((r: JoinGroupResponse) => void) | undefined;
  /** Answers this member's SyncGroup, while it waits for the leader's. */
  sync: ((r: { errorCode: number; assignment: Buffer }) => void) | undefined;
  assignment: Buffer;
  /** Removes the member when its session times out; reset by each request from it. */
  timer: NodeJS.Timeout | undefined;
}

const noAssignment = Buffer.alloc(0);

/** What a JoinGroup asks of a group. */
export interface JoinRequest {
  /** Empty for a new member. */
  readonly memberId: string;
  readonly clientId: string;
  readonly sessionTimeoutMs: number;
  readonly protocolType: string;
  readonly protocols: readonly GroupProtocol[];
}

/** A SyncGroup's answer: an error code and the member's assignment. */
export interface SyncAnswer {
  readonly errorCode: number;
  readonly assignment: Buffer;
}

/** One consumer group. */
export class Group {
  state: GroupState = 'Empty';
  generation = 0;
  protocolType = '';
  protocol = '';
  leader = '';
  private readonly members = new Map<string, Member>();
  private rebalanceTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly groupId: string,
    /** Called when the last member goes (the group is Empty again). */
    private readonly onEmpty: () => void = () => {},
    /** Where the group's rebalances are logged (at debug level). */
    private readonly logger: Logger = silentLogger,
  ) {}

  private debug(msg: string, detail: object = {}): void {
    this.logger.debug({ group: this.groupId, state: this.state, generation: this.generation, members: this.members.size, ...detail }, msg);
  }

  /** Member ids, in join order. */
  memberIds(): string[] {
    return [...this.members.keys()];
  }

  /** True when `memberId` is a member of generation `generation`; else the error that says why not. */
  check(memberId: string, generation: number): number {
    if (!this.members.has(memberId)) return KafkaErrorCode.UnknownMemberId;
    if (generation !== this.generation) return KafkaErrorCode.IllegalGeneration;
    return KafkaErrorCode.None;
  }

  /** JoinGroup: resolves when the rebalance completes (or at once with an error). */
  join(req: JoinRequest): Promise<JoinGroupResponse> {
    const refuse = (errorCode: number): Promise<JoinGroupResponse> => {
      if (this.members.size === 0) this.onEmpty();
      return Promise.resolve({ errorCode, generationId: -1, protocolName: '', leader: '', memberId: req.memberId, members: [] });
    };
    if (req.protocols.length === 0) return refuse(KafkaErrorCode.InconsistentGroupProtocol);
    if (this.members.size > 0) {
      if (req.protocolType !== this.protocolType) return refuse(KafkaErrorCode.InconsistentGroupProtocol);
      const others = [...this.members.values()].filter((m) => m.memberId !== req.memberId);
      if (others.length > 0 && !req.protocols.some((p) => others.every((m) => m.protocols.some((q) => q.name === p.name)))) {
        return refuse(KafkaErrorCode.InconsistentGroupProtocol);
      }
    }
    let member: Member;
    if (req.memberId === '') {
      member = { memberId: `${req.clientId || 'member'}-${randomUUID()}`, clientId: req.clientId, sessionTimeoutMs: req.sessionTimeoutMs, protocols: req.protocols, join: undefined, sync: undefined, assignment: noAssignment, timer: undefined };
      this.members.set(member.memberId, member);
    } else {
      const known = this.members.get(req.memberId);
      if (known === undefined) return refuse(KafkaErrorCode.UnknownMemberId);
      member = known;
      member.sessionTimeoutMs = req.sessionTimeoutMs;
      member.protocols = req.protocols;
    }
    if (this.members.size === 1) this.protocolType = req.protocolType;
    this.debug('Kafka group member joins', { member: member.memberId, rejoin: req.memberId !== '' });
    const answer = new Promise<JoinGroupResponse>((resolve) => {
      member.join?.({ errorCode: KafkaErrorCode.UnknownMemberId, generationId: -1, protocolName: '', leader: '', memberId: member.memberId, members: [] });
      member.join = resolve;
    });
    this.touch(member);
    this.prepareRebalance();
    this.maybeCompleteJoin();
    return answer;
  }

  /** SyncGroup: the leader's assignments stored and handed out; others wait for them. */
  sync(memberId: string, generation: number, assignments: readonly { memberId: string; assignment: Buffer }[]): Promise<SyncAnswer> {
    const error = this.check(memberId, generation);
    if (error !== KafkaErrorCode.None) return Promise.resolve({ errorCode: error, assignment: noAssignment });
    const member = this.members.get(memberId)!;
    this.touch(member);
    if (this.state === 'PreparingRebalance') return Promise.resolve({ errorCode: KafkaErrorCode.RebalanceInProgress, assignment: noAssignment });
    if (this.state === 'Stable') return Promise.resolve({ errorCode: KafkaErrorCode.None, assignment: member.assignment });
    const answer = new Promise<SyncAnswer>((resolve) => (member.sync = resolve));
    if (memberId === this.leader) {
      for (const m of this.members.values()) m.assignment = noAssignment;
      for (const a of assignments) {
        const m = this.members.get(a.memberId);
        if (m !== undefined) m.assignment = a.assignment;
      }
      this.state = 'Stable';
      this.debug('Kafka group stable: the leader synced', { leader: memberId, assigned: assignments.length });
      for (const m of this.members.values()) {
        m.sync?.({ errorCode: KafkaErrorCode.None, assignment: m.assignment });
        m.sync = undefined;
      }
    }
    return answer;
  }

  /** Heartbeat: the member's session kept, and whether a rebalance wants it to rejoin. */
  heartbeat(memberId: string, generation: number): number {
    const error = this.check(memberId, generation);
    if (error !== KafkaErrorCode.None) return error;
    this.touch(this.members.get(memberId)!);
    return this.state === 'Stable' ? KafkaErrorCode.None : KafkaErrorCode.RebalanceInProgress;
  }

  /** Keeps a member's session alive (any request from it does). */
  touch(member: Member | string): void {
    const m = typeof member === 'string' ? this.members.get(member) : member;
    if (m === undefined) return;
    clearTimeout(m.timer);
    m.timer = setTimeout(() => this.expire(m), m.sessionTimeoutMs);
    m.timer.unref();
  }

  /** LeaveGroup. */
  leave(memberId: string): number {
    const m = this.members.get(memberId);
    if (m === undefined) return KafkaErrorCode.UnknownMemberId;
    this.remove(m);
    return KafkaErrorCode.None;
  }

  /** Drops every member (the broker is closing). */
  close(): void {
    clearTimeout(this.rebalanceTimer);
    for (const m of this.members.values()) clearTimeout(m.timer);
    this.members.clear();
  }

  private expire(m: Member): void {
    if (m.join !== undefined) return; // a member waiting in JoinGroup is bounded by the rebalance timeout instead
    this.debug('Kafka group member session expired', { member: m.memberId, sessionTimeoutMs: m.sessionTimeoutMs });
    this.remove(m);
  }

  private remove(m: Member): void {
    clearTimeout(m.timer);
    this.members.delete(m.memberId);
    this.debug('Kafka group member removed', { member: m.memberId, wasJoining: m.join !== undefined, wasSyncing: m.sync !== undefined });
    m.join?.({ errorCode: KafkaErrorCode.UnknownMemberId, generationId: -1, protocolName: '', leader: '', memberId: m.memberId, members: [] });
    m.sync?.({ errorCode: KafkaErrorCode.UnknownMemberId, assignment: noAssignment });
    if (this.members.size === 0) {
      clearTimeout(this.rebalanceTimer);
      this.state = 'Empty';
      this.generation++;
      this.leader = '';
      this.onEmpty();
      return;
    }
    this.prepareRebalance();
    this.maybeCompleteJoin();
  }

  private prepareRebalance(): void {
    if (this.state === 'PreparingRebalance') return;
    for (const m of this.members.values()) {
      m.sync?.({ errorCode: KafkaErrorCode.RebalanceInProgress, assignment: noAssignment });
      m.sync = undefined;
    }
    this.state = 'PreparingRebalance';
    const timeoutMs = Math.max(...[...this.members.values()].map((m) => m.sessionTimeoutMs));
    clearTimeout(this.rebalanceTimer);
    this.debug('Kafka group rebalance begins', { rebalanceTimeoutMs: timeoutMs });
    this.rebalanceTimer = setTimeout(() => {
      this.debug('Kafka group rebalance timeout: members that did not rejoin are removed', { notRejoined: [...this.members.values()].filter((m) => m.join === undefined).map((m) => m.memberId) });
      for (const m of [...this.members.values()]) if (m.join === undefined) this.remove(m);
      this.completeJoin();
    }, timeoutMs);
    this.rebalanceTimer.unref();
  }

  private maybeCompleteJoin(): void {
    if (this.state === 'PreparingRebalance' && [...this.members.values()].every((m) => m.join !== undefined)) this.completeJoin();
  }

  private completeJoin(): void {
    if (this.state !== 'PreparingRebalance' || this.members.size === 0) return;
    clearTimeout(this.rebalanceTimer);
    const members = [...this.members.values()];
    if (!this.members.has(this.leader)) this.leader = members[0]!.memberId;
    const leader = this.members.get(this.leader)!;
    const protocol = leader.protocols.find((p) => members.every((m) => m.protocols.some((q) => q.name === p.name)));
    this.generation++;
    this.state = 'CompletingRebalance';
    this.protocol = protocol?.name ?? '';
    this.debug('Kafka group joined: generation complete, waiting for the leader\'s sync', { leader: this.leader, protocol: this.protocol, memberIds: members.map((m) => m.memberId) });
    const subscriptions = members.map((m) => ({ memberId: m.memberId, metadata: m.protocols.find((p) => p.name === this.protocol)?.metadata ?? noAssignment }));
    for (const m of members) {
      const join = m.join;
      m.join = undefined;
      this.touch(m);
      join?.({
        errorCode: protocol === undefined ? KafkaErrorCode.InconsistentGroupProtocol : KafkaErrorCode.None,
        generationId: this.generation,
        protocolName: this.protocol,
        leader: this.leader,
        memberId: m.memberId,
        members: m.memberId === this.leader ? subscriptions : [],
      });
    }
  }
}
