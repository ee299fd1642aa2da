/**
 * The requests of one connection that wait for their response, oldest first (docs/design.md §3):
 * a broker answers the requests of a connection in the order they were sent (docs/format.md §5,
 * "Responses carry no request type or correlation id"), so the queue is a FIFO and each response
 * belongs to its oldest entry. Kept in a ring of slots that grows by doubling, so that adding,
 * answering and finding the i-th request cost no scan and no allocation per request.
 */

/** One request waiting for its response. */
export interface PendingRequest<R> {
  readonly resolve: (r: R) => void;
  readonly reject: (e: Error) => void;
  /** Most ms to wait for the response once the request is written. */
  readonly timeoutMs: number;
  /** `performance.now()` ms by which the response is due; Infinity until the request is written. */
  deadline: number;
}

/** A FIFO of {@link PendingRequest}s in a growable ring. */
export class PendingRequests<R> {
  private slots: (PendingRequest<R> | undefined)[] = new Array<PendingRequest<R> | undefined>(16);
  /** Slot of the oldest entry. */
  private head = 0;
  private count = 0;

  /** Entries waiting. */
  get length(): number {
    return this.count;
  }

  /** Adds `p` as the newest entry. */
  push(p: PendingRequest<R>): void {
    if (this.count === this.slots.length) this.grow();
    this.slots[(this.head + this.count) & (this.slots.length - 1)] = p;
    this.count++;
  }

  /** Removes and returns the oldest entry, or undefined when there is none. */
  shift(): PendingRequest<R> | undefined {
    if (this.count === 0) return undefined;
    const p = this.slots[this.head];
    this.slots[this.head] = undefined;
    this.head = (this.head + 1) & (this.slots.length - 1);
    this.count--;
    return p;
  }

  /** The entry `i` places after the oldest (0 is the oldest), or undefined when there are not that many. */
  at(i: number): PendingRequest<R> | undefined {
    if (i < 0 || i >= this.count) return undefined;
    return this.slots[(this.head + i) & (this.slots.length - 1)];
  }

  /**
   * The entry with the earliest deadline (the oldest of those that tie), or undefined when none
   * is written. O(length): for a timer that fires, not for every request.
   */
  earliestDeadline(): PendingRequest<R> | undefined {
    let best: PendingRequest<R> | undefined;
    for (let i = 0; i < this.count; i++) {
      const p = this.slots[(this.head + i) & (this.slots.length - 1)]!;
      if (p.deadline !== Infinity && (best === undefined || p.deadline < best.deadline)) best = p;
    }
    return best;
  }

  /** Removes every entry and returns them, oldest first. */
  drain(): PendingRequest<R>[] {
    const all: PendingRequest<R>[] = [];
    for (let p = this.shift(); p !== undefined; p = this.shift()) all.push(p);
    return all;
  }

  private grow(): void {
    const next = new Array<PendingRequest<R> | undefined>(this.slots.length * 2);
    for (let i = 0; i < this.count; i++) next[i] = this.slots[(this.head + i) & (this.slots.length - 1)];
    this.slots = next;
    this.head = 0;
  }
}
