/**
 * One replicated partition on this broker (docs/replication.md §9.1): its role (leader,
 * follower, fenced or none), its leader epoch, the leader-side state of §9.4 while it leads,
 * the high watermark, and the `acks all` produces waiting for it (§11).
 *
 * Changes of role, truncations and epoch writes run one at a time on a promise chain per
 * partition ({@link Partition.enqueue}), so a truncation or an epoch write never overlaps an
 * append of the fetcher. Produce appends are synchronous and check the role in the same turn.
 */
import { ErrorCode, type ErrorCodeValue, type MessageSetShape, type PartitionState } from '@klog/protocol';
import type { ReplicaLog } from '@klog/storage';
import type { Logger } from 'pino';
import { LeaderState, type IsrProposal } from './leader-state.js';

/** The four roles of docs/replication.md §9.1. */
export type Role = 'none' | 'leader' | 'follower' | 'fenced';

/**
 * The leader's conditional write of its partition's state (docs/replication.md §3.2), made
 * through packages/zk-registry.
 */
export interface IsrWriter {
  /**
   * Writes the state of `topic`/`partition` with `isr` and `new` false, keeping its leader,
   * leader epoch and controller epoch, on condition that the node is at `version`. On
   * `BadVersion` the node is read again: the same leader and epoch means an earlier attempt of
   * this leader's was applied, and the write is made again at the version read.
   * @returns the node's new version, or `'fenced'` when the node holds another leader or leader epoch
   * @throws when ZooKeeper cannot be reached or answers otherwise (the ISR in ZooKeeper is then unknown to have changed)
   */
  writeIsr(topic: string, partition: number, leader: number, leaderEpoch: number, isr: readonly number[], version: number): Promise<number | 'fenced'>;
}

/** What a partition is told by its replica manager: settings and the services it uses. */
export interface PartitionContext {
  readonly brokerId: number;
  readonly logger: Logger;
  /** `replica.lag.time.max.ms`. */
  readonly replicaLagTimeMaxMs: number;
  /** The ISR writer; undefined in a broker without ZooKeeper (the ISR then never changes). */
  readonly isrWriter: IsrWriter | undefined;
  /** Called after each ISR change this broker wrote as leader. */
  readonly onIsrChanged?: (p: Partition, proposal: IsrProposal) => void;
}

/** An `acks all` produce waiting for the high watermark (docs/replication.md §11 step 4). */
interface HwWaiter {
  readonly nextOffset: number;
  readonly resolve: (code: ErrorCodeValue) => void;
}

/** One replicated partition. Created by the replica manager on the first LEADER_AND_ISR that names it. */
export class Partition {
  #role: Role = 'none';
  /** The leader epoch at which the partition last took its role; below #leaderEpoch while a LEADER_AND_ISR is being handled. */
  #roleEpoch = -1;
  /** The highest leader epoch accepted for the partition (−1 before any). */
  #leaderEpoch = -1;
  #leaderId = -1;
  #replicas: readonly number[] = [];
  /** The ISR of the last LEADER_AND_ISR (a leader's own is in {@link leaderState}). */
  #isr: readonly number[] = [];
  #stateVersion = -1;
  #minInsyncReplicas = 1;
  /** The `new` of the partition state still to be cleared by this leader (docs/replication.md §8.1). */
  #clearNew = false;
  #replica: ReplicaLog | undefined;
  #leaderState: LeaderState | undefined;
  /** A follower's high watermark, learnt from its fetches (min of the leader's and its own log end). */
  #followerHw = 0;
  #chain: Promise<unknown> = Promise.resolve();
  readonly #waiters = new Set<HwWaiter>();
  readonly #hwListeners = new Set<(hw: number) => void>();
  readonly #appendListeners = new Set<() => void>();
  #unsubscribeFlush: (() => void) | undefined;
  #isrWriting = false;
  /** As a follower: the leader's log end minus this replica's, as of the last fetch answer (bytes). */
  followerLagBytes = 0;

  constructor(
    readonly topic: string,
    readonly partition: number,
    readonly topicId: string,
    private readonly ctx: PartitionContext,
  ) {}

  get role(): Role {
    return this.#role;
  }
  get leaderEpoch(): number {
    return this.#leaderEpoch;
  }
  /** The leader's broker id as last told (−1: offline or unknown). */
  get leaderId(): number {
    return this.#leaderId;
  }
  get replicas(): readonly number[] {
    return this.#replicas;
  }
  /** The ISR as last written to ZooKeeper, as this broker knows it. */
  get isr(): readonly number[] {
    return this.#leaderState?.isr ?? this.#isr;
  }
  get minInsyncReplicas(): number {
    return this.#minInsyncReplicas;
  }
  get stateVersion(): number {
    return this.#stateVersion;
  }
  /** The replica's log (with its leader-epoch checkpoint), or undefined when the broker has none. */
  get log(): ReplicaLog | undefined {
    return this.#replica;
  }
  /** The leader-side state while this broker leads the partition. */
  get leaderState(): LeaderState | undefined {
    return this.#role === 'leader' ? this.#leaderState : undefined;
  }
  /** True when it leads and accepts produces and consumer fetches. */
  get isLeader(): boolean {
    return this.#role === 'leader' && !this.#clearNew;
  }

  /** The high watermark: the leader's (§9.5), or the one a follower last learnt; never above the log end. */
  get highWatermark(): number {
    const hw = this.#leaderState !== undefined && this.#role === 'leader' ? this.#leaderState.highWatermark : this.#followerHw;
    return Math.min(hw, this.#replica?.logEndOffset ?? 0);
  }

  /** Sets the high watermark a follower learnt from a fetch answer (never above its own log end). */
  setFollowerHighWatermark(hw: number): void {
    const end = this.#replica?.logEndOffset ?? 0;
    this.#followerHw = Math.max(0, Math.min(hw, end));
  }

  /** Runs `fn` after every change queued before it (the partition's promise chain); its result or error is returned. */
  enqueue<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#chain.then(fn);
    this.#chain = run.catch(() => {});
    return run;
  }

  /**
   * Checks a LEADER_AND_ISR or STOP_REPLICA epoch against the partition's, and records a newer
   * one at once (so a later, older request is refused even before this one is handled).
   * @returns 'older' (FencedLeaderEpoch), 'same' or 'newer'
   */
  acceptEpoch(leaderEpoch: number): 'older' | 'same' | 'newer' {
    if (leaderEpoch < this.#leaderEpoch) return 'older';
    if (leaderEpoch === this.#leaderEpoch) return 'same';
    this.#leaderEpoch = leaderEpoch;
    return 'newer';
  }

  /** Gives the partition its replica log (found on disk or just created). */
  attach(replica: ReplicaLog): void {
    this.#replica = replica;
  }

  /** Forgets the replica log (after it was closed or deleted). */
  detach(): void {
    this.#unsubscribeFlush?.();
    this.#unsubscribeFlush = undefined;
    this.#replica = undefined;
  }

  /**
   * Becoming leader (docs/replication.md §9.1), on the chain: records `(epoch, log end)` in the
   * checkpoint, takes the ISR and state version, starts the leader state with every follower's
   * positions unknown and the high watermark it last learnt (as a follower, or as the leader of
   * the previous epoch: it never moves backwards, §9.5), clears `new` when asked, then accepts
   * produces. A leader of the previous epoch keeps its waiting `acks all` produces: the log is
   * the same, and the new ISR's high watermark answers them. The same epoch again only takes a
   * newer state version's ISR.
   * @throws the checkpoint's write error (the partition then takes no role)
   */
  async becomeLeader(state: PartitionState, sameEpoch: boolean, nowMs: number): Promise<void> {
    const log = this.#replica!;
    this.#replicas = state.replicas;
    this.#minInsyncReplicas = state.minInsyncReplicas;
    if (sameEpoch && this.#role === 'leader' && this.#leaderState !== undefined) {
      if (state.stateVersion > this.#stateVersion) {
        this.#stateVersion = state.stateVersion;
        this.#isr = state.isr;
        if (this.#leaderState.setWrittenIsr(state.isr)) this.#highWatermarkMoved();
      }
      return;
    }
    const wasLeader = this.#role === 'leader' && this.#leaderState !== undefined;
    if (wasLeader) this.#followerHw = this.highWatermark;
    else this.#failWaiters(ErrorCode.NotLeaderForPartition);
    await log.leaderEpochs.assign(state.leaderEpoch, log.logEndOffset);
    this.#leaderId = state.leader;
    this.#isr = state.isr;
    this.#stateVersion = state.stateVersion;
    const epochStart = log.leaderEpochs.entries.at(-1)?.startOffset ?? log.logEndOffset;
    this.#leaderState = new LeaderState({
      leaderId: this.ctx.brokerId,
      replicas: state.replicas,
      isr: state.isr,
      epochStartOffset: epochStart,
      highWatermark: this.#followerHw,
      leaderFlushedEnd: log.visibleEnd,
      replicaLagTimeMaxMs: this.ctx.replicaLagTimeMaxMs,
      nowMs,
    });
    this.#unsubscribeFlush?.();
    this.#unsubscribeFlush = log.onFlush((visibleEnd) => {
      if (this.#role === 'leader' && this.#leaderState?.leaderFlushed(visibleEnd)) this.#highWatermarkMoved();
    });
    this.#clearNew = state.isNew && this.ctx.isrWriter !== undefined;
    this.#role = 'leader';
    this.#roleEpoch = state.leaderEpoch;
    if (this.#clearNew) await this.#writeIsr(this.#leaderState.isr, 'new');
    if (this.#leaderState.leaderFlushed(log.visibleEnd)) this.#highWatermarkMoved();
  }

  /**
   * Becoming follower of `state.leader` (docs/replication.md §9.1): a leader's waiting `acks all`
   * produces get NotLeaderForPartition and new ones are refused. The replica manager then hands
   * the partition to the fetcher for that leader.
   */
  becomeFollower(state: PartitionState): void {
    this.#stopLeading('follower');
    this.#leaderId = state.leader;
    this.#replicas = state.replicas;
    this.#isr = state.isr;
    this.#stateVersion = state.stateVersion;
    this.#minInsyncReplicas = state.minInsyncReplicas;
  }

  /** Takes no role (STOP_REPLICA, or `leader` −1): waiting produces get NotLeaderForPartition. */
  becomeNone(state?: PartitionState): void {
    this.#stopLeading('none');
    this.#leaderId = state?.leader ?? -1;
    if (state !== undefined) {
      this.#replicas = state.replicas;
      this.#isr = state.isr;
      this.#stateVersion = state.stateVersion;
    }
  }

  /**
   * Fenced (docs/replication.md §9.1): the session expired while leading, or an ISR write found
   * another epoch. Refuses produces and consumer fetches until the next LEADER_AND_ISR.
   */
  fence(reason: string): void {
    if (this.#role !== 'leader') return;
    this.ctx.logger.warn({ topic: this.topic, partition: this.partition, leaderEpoch: this.#leaderEpoch, reason }, 'leader fenced');
    this.#stopLeading('fenced');
  }

  #stopLeading(role: Role): void {
    if (this.#role === 'leader') this.#followerHw = this.highWatermark;
    this.#role = role;
    this.#roleEpoch = this.#leaderEpoch;
    this.#leaderState = undefined;
    this.#clearNew = false;
    this.#unsubscribeFlush?.();
    this.#unsubscribeFlush = undefined;
    this.#failWaiters(ErrorCode.NotLeaderForPartition);
    this.#notifyAppend();
  }

  /**
   * Checks a follower's REPLICA_FETCH or OFFSET_FOR_LEADER_EPOCH of this partition
   * (docs/replication.md §6.3, §6.4).
   * @returns undefined when this broker leads the partition at `leaderEpoch` and `replicaId` is
   *   another replica of it; else NotLeaderForPartition, FencedLeaderEpoch (an older epoch),
   *   UnknownLeaderEpoch (a newer one) or NotReplica
   */
  followerRequestError(replicaId: number, leaderEpoch: number): ErrorCodeValue | undefined {
    // The epoch first: a fetch of an epoch this broker has not been told of yet (its LEADER_AND_ISR
    // is on its way) is UnknownLeaderEpoch, retried, not NotLeaderForPartition, which stops the fetcher.
    if (leaderEpoch < this.#leaderEpoch) return ErrorCode.FencedLeaderEpoch;
    if (leaderEpoch > this.#leaderEpoch) return ErrorCode.UnknownLeaderEpoch;
    // Still becoming leader of this epoch (its checkpoint and log being written): the follower retries.
    if (this.#role !== 'leader' || this.#replica === undefined) return this.#roleEpoch < this.#leaderEpoch ? ErrorCode.UnknownLeaderEpoch : ErrorCode.NotLeaderForPartition;
    if (replicaId === this.ctx.brokerId || !this.#replicas.includes(replicaId)) return ErrorCode.NotReplica;
    return undefined;
  }

  /**
   * The leader epoch that wrote the byte at `offset` and where that epoch's bytes end (the start
   * of the next epoch, or the log end), from the checkpoint (docs/replication.md §6.3).
   * @returns epoch −1 when no entry covers `offset`
   */
  epochAt(offset: number): { epoch: number; end: number } {
    const log = this.#replica!;
    const entries = log.leaderEpochs.entries;
    let i = entries.length - 1;
    while (i >= 0 && entries[i]!.startOffset > offset) i--;
    if (i < 0) return { epoch: -1, end: entries[0]?.startOffset ?? log.logEndOffset };
    return { epoch: entries[i]!.epoch, end: i + 1 < entries.length ? entries[i + 1]!.startOffset : log.logEndOffset };
  }

  /**
   * Appends a produce's message set as leader (docs/replication.md §11 steps 1-3): refused with
   * NotLeaderForPartition unless it leads, and with NotEnoughReplicas for `acks all` when the ISR
   * as last written is smaller than `min.insync.replicas`; nothing is appended then.
   * @param shape what the caller's check of the set found (`validateMessageSet`)
   * @returns where it landed, or the error code
   * @throws the append error (the storage layer's: DiskFull, ...)
   */
  appendAsLeader(messages: Buffer, shape: MessageSetShape, acksAll: boolean): { offset: number; nextOffset: number } | { errorCode: ErrorCodeValue } {
    if (!this.isLeader || this.#replica === undefined) return { errorCode: ErrorCode.NotLeaderForPartition };
    if (acksAll && this.#leaderState!.isr.length < this.#minInsyncReplicas) return { errorCode: ErrorCode.NotEnoughReplicas };
    const log = this.#replica;
    if (shape.count === 0) return { offset: log.logEndOffset, nextOffset: log.logEndOffset };
    const r = log.append(messages, shape.count, shape.lastPosition);
    this.#notifyAppend();
    return r;
  }

  /**
   * Waits until the high watermark reaches `nextOffset` (docs/replication.md §11 step 4), the
   * leader flushing its own log at once.
   * @returns 0; NotEnoughReplicasAfterAppend when the ISR is by then below `min.insync.replicas`;
   *   NotLeaderForPartition when the partition stops being led here first
   */
  waitForHighWatermark(nextOffset: number): Promise<ErrorCodeValue> {
    if (!this.isLeader) return Promise.resolve(ErrorCode.NotLeaderForPartition);
    const log = this.#replica!;
    log.flushedThrough(nextOffset).catch((err: unknown) => this.ctx.logger.warn({ topic: this.topic, partition: this.partition, err }, 'flush for acks all failed; retried'));
    return new Promise((resolve) => {
      const w: HwWaiter = { nextOffset, resolve };
      this.#waiters.add(w);
      this.#releaseWaiters();
    });
  }

  /**
   * A follower's REPLICA_FETCH of this partition, as leader (docs/replication.md §9.4): records
   * its positions, moves the high watermark, and starts an ISR change when one is due.
   */
  recordFollowerFetch(replicaId: number, fetchOffset: number, flushedOffset: number, nowMs: number): void {
    const ls = this.leaderState;
    const log = this.#replica;
    if (ls === undefined || log === undefined) return;
    if (ls.recordFetch(replicaId, fetchOffset, flushedOffset, log.logEndOffset, log.visibleEnd, nowMs)) this.#highWatermarkMoved();
    this.maybeChangeIsr(nowMs);
  }

  /**
   * Writes the ISR change due now, if any and none is being written (docs/replication.md §9.4);
   * called on each follower fetch and every `replica.lag.time.max.ms / 2`. Never throws: a
   * failed write is logged and tried again on the next call.
   */
  maybeChangeIsr(nowMs: number): void {
    const ls = this.leaderState;
    if (ls === undefined || this.#isrWriting || this.ctx.isrWriter === undefined) return;
    if (this.#clearNew) {
      void this.#writeIsr(ls.isr, 'new');
      return;
    }
    const proposal = ls.proposeIsrChange(nowMs);
    if (proposal === undefined) return;
    ls.beginIsrChange(proposal.isr);
    void this.#writeIsr(proposal.isr, proposal);
  }

  /** Writes `isr` as leader; `what` is the proposal it carries out, or 'new' for clearing `new`. */
  async #writeIsr(isr: readonly number[], what: IsrProposal | 'new'): Promise<void> {
    const ls = this.#leaderState!;
    const epoch = this.#leaderEpoch;
    this.#isrWriting = true;
    let outcome: number | 'fenced' | Error;
    try {
      outcome = await this.ctx.isrWriter!.writeIsr(this.topic, this.partition, this.ctx.brokerId, epoch, isr, this.#stateVersion);
    } catch (err) {
      outcome = err as Error;
    } finally {
      this.#isrWriting = false;
    }
    if (this.#leaderState !== ls || this.#role !== 'leader' || this.#leaderEpoch !== epoch) return; // the role changed meanwhile
    const entry = { topic: this.topic, partition: this.partition, leaderEpoch: epoch, oldIsr: ls.isr, newIsr: isr };
    if (outcome === 'fenced') {
      ls.abandonIsrChange();
      this.fence('the partition state in ZooKeeper holds another leader epoch');
      return;
    }
    if (outcome instanceof Error) {
      if (what !== 'new') ls.abandonIsrChange();
      this.ctx.logger.warn({ ...entry, err: outcome }, what === 'new' ? 'clearing new in the partition state failed; retried' : 'ISR change not written; retried');
      return;
    }
    this.#stateVersion = outcome;
    if (what === 'new') {
      this.#clearNew = false;
      this.ctx.logger.info({ topic: this.topic, partition: this.partition, leaderEpoch: epoch }, 'partition is no longer new');
      return;
    }
    const log = this.#replica!;
    const changed = [...what.added, ...what.removed];
    const positions = Object.fromEntries(changed.map((id) => [id, { ...ls.follower(id), lagBytes: ls.lagBytes(id, log.logEndOffset) }]));
    this.ctx.logger.info({ ...entry, added: what.added, removed: what.removed, positions, highWatermark: ls.highWatermark }, what.removed.length > 0 ? 'ISR shrink' : 'ISR expand');
    if (ls.finishIsrChange(isr)) this.#highWatermarkMoved();
    this.#releaseWaiters();
    this.ctx.onIsrChanged?.(this, what);
    this.maybeChangeIsr(Date.now());
  }

  /**
   * Subscribes to high watermark moves (long-poll fetches of consumers, docs/replication.md §9.5).
   * @returns a function that unsubscribes
   */
  onHighWatermark(listener: (hw: number) => void): () => void {
    this.#hwListeners.add(listener);
    return () => this.#hwListeners.delete(listener);
  }

  /**
   * Subscribes to appends as leader, and to the end of leading (long-poll REPLICA_FETCHes).
   * @returns a function that unsubscribes
   */
  onAppend(listener: () => void): () => void {
    this.#appendListeners.add(listener);
    return () => this.#appendListeners.delete(listener);
  }

  #notifyAppend(): void {
    for (const l of [...this.#appendListeners]) l();
  }

  #highWatermarkMoved(): void {
    this.#releaseWaiters();
    const hw = this.highWatermark;
    for (const l of [...this.#hwListeners]) l(hw);
  }

  #releaseWaiters(): void {
    if (this.#waiters.size === 0 || this.#role !== 'leader') return;
    const hw = this.highWatermark;
    for (const w of this.#waiters) {
      if (w.nextOffset > hw) continue;
      this.#waiters.delete(w);
      w.resolve(this.#leaderState!.isr.length < this.#minInsyncReplicas ? ErrorCode.NotEnoughReplicasAfterAppend : ErrorCode.None);
    }
  }

  #failWaiters(code: ErrorCodeValue): void {
    for (const w of this.#waiters) w.resolve(code);
    this.#waiters.clear();
  }

  /** One line of state for logs and tests. */
  describe(): Record<string, unknown> {
    return {
      topic: this.topic,
      partition: this.partition,
      role: this.#role,
      leaderEpoch: this.#leaderEpoch,
      leader: this.#leaderId,
      isr: this.isr,
      highWatermark: this.highWatermark,
      logEndOffset: this.#replica?.logEndOffset,
    };
  }
}
