/**
 * fdatasync of segment files (docs/architecture.md, "Flush"). With the native addon (Linux) each
 * call runs on the flusher's own threads (`native/flusher.cc`), never on libuv's thread pool,
 * so a flush never queues behind the sendfile(2) copies and file operations there; at most
 * {@link setFlushThreads} fdatasyncs run at once, so thousands of logs flushing share a bounded
 * set of threads rather than flooding the disk. Without the addon, `fs.fdatasync` (libuv's pool).
 */
import * as fs from 'node:fs';
import { storageAddon } from './native.js';

/** Default most fdatasyncs at once (`flush.threads`). */
export const defaultFlushThreads = 4;
/** Largest `flush.threads` accepted. */
export const maxFlushThreads = 64;

/** Where fdatasyncs run: `native` (the flusher's threads) or `libuv` (the fallback). */
export type FlusherKind = 'native' | 'libuv';

/** `native` when the addon's flusher loaded, else `libuv`. */
export const flusherKind: FlusherKind = typeof storageAddon?.fdatasync === 'function' ? 'native' : 'libuv';

/**
 * Turns to flush, at most `threads` logs at once, the others waiting first come first served.
 * A log takes its flush's target (the log end) only once it has a turn, so while the disk is
 * busy a waiting log's flush grows with every append instead of another flush being queued
 * behind it: with thousands of partitions the flushes stay few and large, and each carries
 * everything its log got up to the moment its fdatasync starts (docs/format.md §4).
 */
export class FlushTurns {
  #free: number;
  readonly #waiting: (() => void)[] = [];

  constructor(threads: number) {
    this.#free = threads;
  }

  /** Raises the number of turns at once to `threads` (never lowers it). */
  raise(threads: number, current: number): void {
    for (let added = Math.max(0, threads - current); added > 0; added--) this.#release();
  }

  /** Logs waiting for a turn. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Resolves once the caller has a turn; it must call the returned function exactly once when done. */
  async take(): Promise<() => void> {
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#release();
    };
  }

  #release(): void {
    const next = this.#waiting.shift();
    if (next !== undefined) next();
    else this.#free++;
  }
}

let turnsThreads = defaultFlushThreads;
/** The process-wide turns, as many at once as `flush.threads`. */
export const flushTurns = new FlushTurns(defaultFlushThreads);

/**
 * fdatasync(2) of `fd`, on the flusher's threads.
 * @throws the fdatasync error (an Error with `code`, e.g. EIO, ENOSPC)
 */
export function fdatasyncFile(fd: number): Promise<void> {
  const addon = storageAddon;
  if (addon?.fdatasync !== undefined) return addon.fdatasync(fd);
  return new Promise<void>((resolve, reject) => fs.fdatasync(fd, (err) => (err ? reject(err) : resolve())));
}

/**
 * Sets how many fdatasyncs may run at once, process-wide (`flush.threads`, 1 to
 * {@link maxFlushThreads}): the flusher's threads, and as many {@link flushTurns}. Before the
 * first flush the threads may be set to any count; later, and for the turns, only raised. On
 * the libuv fallback only the turns change.
 * @returns the count in force
 * @throws RangeError outside 1 to {@link maxFlushThreads}
 */
export function setFlushThreads(threads: number): number {
  if (!Number.isSafeInteger(threads) || threads < 1 || threads > maxFlushThreads) {
    throw new RangeError(`flush threads must be an integer from 1 to ${maxFlushThreads}, got ${threads}`);
  }
  const inForce = storageAddon?.setFlushThreads?.(threads) ?? threads;
  if (inForce > turnsThreads) {
    flushTurns.raise(inForce, turnsThreads);
    turnsThreads = inForce;
  }
  return inForce;
}

/** Process-wide flusher counters: fdatasyncs completed and failed, in flight now and at most. */
export interface FlusherStats {
  readonly kind: FlusherKind;
  /** fdatasync calls completed, failed ones included (0 on the libuv fallback). */
  readonly syncs: number;
  readonly errors: number;
  readonly inFlight: number;
  readonly maxInFlight: number;
  readonly threads: number;
}

/** The flusher's counters (all zero on the libuv fallback). */
export function flusherStats(): FlusherStats {
  const s = storageAddon?.flusherStats() ?? { syncs: 0, errors: 0, inFlight: 0, maxInFlight: 0, threads: 0 };
  return { kind: flusherKind, ...s };
}

/**
 * Bytes of the file at `file` that the flusher has seen fdatasynced: its size just before the
 * last successful fdatasync through {@link fdatasyncFile}, or −1 when none has run (or on the
 * libuv fallback). For checking that bytes were on disk before they became visible.
 * @throws the stat error (e.g. ENOENT)
 */
export function syncedFileBytes(file: string): number {
  const st = fs.statSync(file);
  return storageAddon?.syncedBytes?.(st.dev, st.ino) ?? -1;
}
