/**
 * The broker-wide budget of request bytes held in memory (`queued.max.request.bytes`, as
 * Kafka's): bytes read from sockets and not yet handled, and the buffers of large frames being
 * received. A connection that finds the budget spent stops reading its socket (back-pressure:
 * the client's writes wait in TCP) until bytes are released, instead of buffering more.
 */

/** The budget, shared by every connection of one broker. */
export class RequestMemory {
  /** Bytes counted now (may pass the budget by what sockets delivered before they were paused). */
  #used = 0;
  /** Called, in order, once bytes are released while the budget has room. */
  readonly #waiting = new Set<() => void>();

  /** @param budgetBytes most bytes held at once before connections stop reading */
  constructor(readonly budgetBytes: number) {}

  /** Bytes counted now. */
  get usedBytes(): number {
    return this.#used;
  }

  /** True when no more bytes should be read. */
  get exhausted(): boolean {
    return this.#used >= this.budgetBytes;
  }

  /** Counts bytes already in memory (a chunk a socket delivered). */
  add(bytes: number): void {
    this.#used += bytes;
  }

  /** Counts `bytes` when they fit the budget. @returns whether they were counted */
  tryReserve(bytes: number): boolean {
    if (this.#used + bytes > this.budgetBytes) return false;
    this.#used += bytes;
    return true;
  }

  /** Uncounts `bytes` and wakes waiters while the budget has room. */
  release(bytes: number): void {
    if (bytes <= 0) return;
    this.#used = Math.max(0, this.#used - bytes);
    for (const wake of [...this.#waiting]) {
      if (this.exhausted) break;
      this.#waiting.delete(wake);
      wake();
    }
  }

  /**
   * Calls `wake` once, the next time bytes are released and the budget has room (the caller
   * checks again what it needs, and waits again if it still does not fit).
   * @returns a function that cancels the wait
   */
  whenReleased(wake: () => void): () => void {
    this.#waiting.add(wake);
    return () => this.#waiting.delete(wake);
  }
}
