/**
 * A small pool of equal-sized buffers for the read-and-write fallback of the read path
 * (docs/design.md §3): a fetch borrows buffers to read segment bytes into and gives each back once the
 * socket has taken it, so steady fetching allocates nothing.
 */

/** Buffers of `bufferBytes` each; at most `maxPooled` idle ones are kept. */
export class BufferPool {
  readonly #idle: Buffer[] = [];

  /**
   * @param bufferBytes size of every buffer, in bytes (positive integer)
   * @param maxPooled most idle buffers kept; more are left to the garbage collector
   * @throws RangeError for a non-positive size or a negative count
   */
  constructor(
    readonly bufferBytes: number,
    readonly maxPooled: number,
  ) {
    if (!Number.isSafeInteger(bufferBytes) || bufferBytes <= 0) throw new RangeError(`bufferBytes must be a positive integer, got ${bufferBytes}`);
    if (!Number.isSafeInteger(maxPooled) || maxPooled < 0) throw new RangeError(`maxPooled must be a non-negative integer, got ${maxPooled}`);
  }

  /** Idle buffers held now. */
  get idle(): number {
    return this.#idle.length;
  }

  /** An idle buffer, or a new one (not zeroed) when none is idle. Give it back with `release`. */
  acquire(): Buffer {
    return this.#idle.pop() ?? Buffer.allocUnsafeSlow(this.bufferBytes);
  }

  /** Gives back a buffer from `acquire` once nothing uses it any more. */
  release(buffer: Buffer): void {
    if (buffer.length === this.bufferBytes && this.#idle.length < this.maxPooled) this.#idle.push(buffer);
  }
}
