/**
 * What the leader of a replicated partition tracks about its followers (docs/replication.md
 * §9.4, §9.5): each follower's positions, when it was last caught up, the ISR shrinks and
 * expands those call for, and the high watermark. Pure logic: no I/O, no timers; time comes in
 * as `nowMs` arguments, and the ISR writes to ZooKeeper are made by the caller
 * (`partition.ts`), which reports them back with {@link LeaderState.beginIsrChange},
 * {@link LeaderState.finishIsrChange} and {@link LeaderState.abandonIsrChange}.
 *
 * All offsets are byte offsets of the partition's log.
 */

/** What the leader knows of one follower in the current leader epoch (docs/replication.md §9.4). */
export interface FollowerPosition {
  /** The `fetchOffset` of its last fetch: it holds everything before it. Undefined until its first fetch in this epoch. */
  fetchedEnd: number | undefined;
  /** `min(flushedOffset, fetchOffset)` of its last fetch: it has fdatasynced everything before it. Undefined until its first fetch. */
  flushedEnd: number | undefined;
  /** The leader's log end when it answered the follower's previous fetch; −1 before any. */
  lastFetchEnd: number;
  /** When (ms since the epoch) the leader answered the follower's previous fetch; −1 before any. */
  lastFetchMs: number;
  /** The last time (ms since the epoch) the follower was known to hold, flushed, everything the leader had. */
  lastCaughtUpMs: number;
}

/** How a leader starts tracking a partition (docs/replication.md §9.1, "becoming leader"). */
export interface LeaderStateOptions {
  /** This broker's id: always an ISR member, never tracked as a follower. */
  readonly leaderId: number;
  /** The partition's replica list (broker ids, preferred leader first). */
  readonly replicas: readonly number[];
  /** The ISR as last written to ZooKeeper (from the LEADER_AND_ISR). */
  readonly isr: readonly number[];
  /** The start offset of the leader's current epoch in its log: a follower joins the ISR only once it fetched past it. */
  readonly epochStartOffset: number;
  /** The high watermark the broker last learnt (as a follower, or 0); capped at `leaderFlushedEnd`. */
  readonly highWatermark: number;
  /** The leader log's flushed end (`Log.visibleEnd`) now. */
  readonly leaderFlushedEnd: number;
  /** `replica.lag.time.max.ms`: a follower not caught up for longer leaves the ISR. */
  readonly replicaLagTimeMaxMs: number;
  /** Now, ms since the epoch: every ISR follower counts as caught up now. */
  readonly nowMs: number;
}

/** A change of ISR the leader should write (docs/replication.md §9.4). */
export interface IsrProposal {
  /** The new ISR, in replica-list order; always holds the leader. */
  readonly isr: readonly number[];
  /** Followers that join. */
  readonly added: readonly number[];
  /** Followers that leave. */
  readonly removed: readonly number[];
}

/**
 * The leader-side replication state of one partition for one leader epoch. Create a new one
 * on every becoming-leader; the ISR may be updated within the epoch ({@link setWrittenIsr}).
 */
export class LeaderState {
  readonly leaderId: number;
  readonly replicas: readonly number[];
  readonly epochStartOffset: number;
  readonly replicaLagTimeMaxMs: number;
  #isr: readonly number[];
  #pendingIsr: readonly number[] | undefined;
  #highWatermark: number;
  #leaderFlushedEnd: number;
  readonly #followers = new Map<number, FollowerPosition>();

  constructor(o: LeaderStateOptions) {
    this.leaderId = o.leaderId;
    this.replicas = [...o.replicas];
    this.epochStartOffset = o.epochStartOffset;
    this.replicaLagTimeMaxMs = o.replicaLagTimeMaxMs;
    this.#isr = this.#ordered(new Set([...o.isr, o.leaderId]));
    this.#leaderFlushedEnd = o.leaderFlushedEnd;
    this.#highWatermark = Math.max(0, Math.min(o.highWatermark, o.leaderFlushedEnd));
    for (const id of this.replicas) {
      if (id === o.leaderId) continue;
      this.#followers.set(id, { fetchedEnd: undefined, flushedEnd: undefined, lastFetchEnd: -1, lastFetchMs: -1, lastCaughtUpMs: o.nowMs });
    }
  }

  /** The ISR as last written to ZooKeeper: what `min.insync.replicas` is checked against (docs/replication.md §11). */
  get isr(): readonly number[] {
    return this.#isr;
  }

  /** The ISR being written, or undefined when no write is pending. */
  get pendingIsr(): readonly number[] | undefined {
    return this.#pendingIsr;
  }

  /** The union of the written and the pending ISR: the members the high watermark waits for (docs/replication.md §9.4, "pending writes"). */
  get hwIsr(): readonly number[] {
    if (this.#pendingIsr === undefined) return this.#isr;
    return this.#ordered(new Set([...this.#isr, ...this.#pendingIsr]));
  }

  /** The high watermark: never moves backwards, never above the leader's flushed end (docs/replication.md §9.5). */
  get highWatermark(): number {
    return this.#highWatermark;
  }

  /** What the leader knows of follower `id`, or undefined when `id` is not a follower of the partition. */
  follower(id: number): Readonly<FollowerPosition> | undefined {
    return this.#followers.get(id);
  }

  /** True when `id` is in the partition's replica list. */
  isReplica(id: number): boolean {
    return this.replicas.includes(id);
  }

  /**
   * Takes a follower's fetch into account (docs/replication.md §9.4): its positions, whether it
   * was caught up, then the high watermark.
   * @param fetchOffset the fetch's `fetchOffset` (the follower's log end)
   * @param flushedOffset the fetch's `flushedOffset`; a value above `fetchOffset` counts as `fetchOffset`
   * @param leaderLogEnd the leader's log end as the fetch is answered
   * @param leaderFlushedEnd the leader's flushed end now
   * @returns true when the high watermark moved
   * @throws RangeError when `replicaId` is not a follower of the partition
   */
  recordFetch(replicaId: number, fetchOffset: number, flushedOffset: number, leaderLogEnd: number, leaderFlushedEnd: number, nowMs: number): boolean {
    const f = this.#followers.get(replicaId);
    if (f === undefined) throw new RangeError(`broker ${replicaId} is not a follower of this partition (replicas ${this.replicas.join(',')})`);
    const flushedEnd = Math.min(flushedOffset, fetchOffset);
    f.fetchedEnd = fetchOffset;
    f.flushedEnd = flushedEnd;
    if (flushedEnd >= leaderLogEnd) f.lastCaughtUpMs = nowMs;
    else if (f.lastFetchEnd >= 0 && flushedEnd >= f.lastFetchEnd) f.lastCaughtUpMs = Math.max(f.lastCaughtUpMs, f.lastFetchMs);
    f.lastFetchEnd = leaderLogEnd;
    f.lastFetchMs = nowMs;
    return this.leaderFlushed(leaderFlushedEnd);
  }

  /**
   * The leader's log flushed (or anything else that may move the high watermark happened).
   * @returns true when the high watermark moved
   */
  leaderFlushed(leaderFlushedEnd: number): boolean {
    this.#leaderFlushedEnd = Math.max(this.#leaderFlushedEnd, leaderFlushedEnd);
    return this.#updateHighWatermark();
  }

  /**
   * The ISR change due now, if any (docs/replication.md §9.4), or undefined; nothing while a
   * write is pending (the caller asks again once it is done).
   * - shrink: an ISR follower not caught up for more than `replica.lag.time.max.ms`, or one
   *   whose last fetch reported a flushed end below the high watermark;
   * - expand: a follower outside the ISR whose flushed end is ≥ the high watermark, whose
   *   fetched end is ≥ the start of the leader's epoch, and that was caught up within
   *   `replica.lag.time.max.ms` (the shrink would not remove it again at once: a dead
   *   follower's last positions, on an idle partition, still meet the first two).
   */
  proposeIsrChange(nowMs: number): IsrProposal | undefined {
    if (this.#pendingIsr !== undefined) return undefined;
    const next = new Set(this.#isr);
    const added: number[] = [];
    const removed: number[] = [];
    for (const [id, f] of this.#followers) {
      if (next.has(id)) {
        const lagging = nowMs - f.lastCaughtUpMs > this.replicaLagTimeMaxMs;
        const lost = f.flushedEnd !== undefined && f.flushedEnd < this.#highWatermark;
        if (lagging || lost) {
          next.delete(id);
          removed.push(id);
        }
      } else if (
        f.flushedEnd !== undefined &&
        f.fetchedEnd !== undefined &&
        f.flushedEnd >= this.#highWatermark &&
        f.fetchedEnd >= this.epochStartOffset &&
        nowMs - f.lastCaughtUpMs <= this.replicaLagTimeMaxMs
      ) {
        next.add(id);
        added.push(id);
      }
    }
    if (added.length === 0 && removed.length === 0) return undefined;
    return { isr: this.#ordered(next), added, removed };
  }

  /** A write of `isr` to ZooKeeper starts: until it ends, the high watermark waits for the union of both ISRs. */
  beginIsrChange(isr: readonly number[]): void {
    this.#pendingIsr = this.#ordered(new Set([...isr, this.leaderId]));
  }

  /**
   * The pending write of the ISR succeeded: `isr` is the ISR as written now.
   * @returns true when the high watermark moved (a member left)
   */
  finishIsrChange(isr: readonly number[]): boolean {
    this.#pendingIsr = undefined;
    return this.setWrittenIsr(isr);
  }

  /** The pending write failed: the ISR stays as last written. */
  abandonIsrChange(): void {
    this.#pendingIsr = undefined;
  }

  /**
   * The ISR as written to ZooKeeper changed without a write of this leader's (a LEADER_AND_ISR of
   * the same epoch with a newer state, or a write read back). Followers that join count as caught up now.
   * @returns true when the high watermark moved
   */
  setWrittenIsr(isr: readonly number[]): boolean {
    this.#isr = this.#ordered(new Set([...isr, this.leaderId]));
    return this.#updateHighWatermark();
  }

  /** Bytes follower `id` lacks of the leader's log end (undefined before its first fetch). */
  lagBytes(id: number, leaderLogEnd: number): number | undefined {
    const f = this.#followers.get(id);
    return f?.fetchedEnd === undefined ? undefined : Math.max(0, leaderLogEnd - f.fetchedEnd);
  }

  /** `max(HW, min(leader's flushed end, flushedEnd of every other member of the union ISR))`; a member with unknown positions holds it. */
  #updateHighWatermark(): boolean {
    let candidate = this.#leaderFlushedEnd;
    for (const id of this.hwIsr) {
      if (id === this.leaderId) continue;
      const flushed = this.#followers.get(id)?.flushedEnd;
      if (flushed === undefined) return false;
      candidate = Math.min(candidate, flushed);
    }
    if (candidate <= this.#highWatermark) return false;
    this.#highWatermark = candidate;
    return true;
  }

  /** The ids in replica-list order (ids outside the list last, ascending). */
  #ordered(ids: Set<number>): number[] {
    const out = this.replicas.filter((id) => ids.has(id));
    const others = [...ids].filter((id) => !this.replicas.includes(id)).sort((a, b) => a - b);
    return [...out, ...others];
  }
}
