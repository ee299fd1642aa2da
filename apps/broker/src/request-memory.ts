/**
 * Broker-wide budgets of bytes held in memory (docs/format.md §5, connection limits). One
 * instance is the budget of request bytes (`queued.max.request.bytes`, as Kafka's): bytes read
 * from sockets and not yet handled, and the buffers of large frames being received. A connection
 * that finds it spent stops reading its socket (back-pressure: the client's writes wait in TCP)
 * until bytes are released, instead of buffering more. Another is the budget of the Kafka
 * listener's fetch answers (`kafka.fetch.memory.bytes`, docs/kafka-protocol.md): bytes of
 * answers built and not yet out of Node's socket buffers; a fetch that finds it spent answers
 * smaller (its first message whole), see ./kafka/fetch.ts.
 */

/** A budget, shared by every connection of one broker. */
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

  /** Bytes left before the budget is spent (0 when it is, or passed). */
  get freeBytes(): number {
    return Math.max(0, this.budgetBytes - this.#used);
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

/**
 * Bytes one connection holds of a {@link RequestMemory} for the response it is building (a Kafka
 * fetch answer), handed over with the response and released once the response has left the
 * socket's buffer, or the socket closed.
 */
export class HeldBytes {
  #bytes = 0;

  /** @param memory the budget the bytes are counted in */
  constructor(readonly memory: RequestMemory) {}

  /** Bytes held now and not yet handed over. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Counts `bytes` (already in memory, or about to be) in the budget. */
  add(bytes: number): void {
    if (bytes <= 0) return;
    this.#bytes += bytes;
    this.memory.add(bytes);
  }

  /** Uncounts up to `bytes` of those held. */
  release(bytes: number): void {
    const n = Math.min(bytes, this.#bytes);
    if (n <= 0) return;
    this.#bytes -= n;
    this.memory.release(n);
  }

  /**
   * Hands over every byte held (this then holds none).
   * @returns a function that releases them, once however often it is called
   */
  take(): () => void {
    let bytes = this.#bytes;
    this.#bytes = 0;
    return () => {
      const n = bytes;
      bytes = 0;
      this.memory.release(n);
    };
  }
}
