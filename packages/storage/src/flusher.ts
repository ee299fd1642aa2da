/**
 * fdatasync of segment files (docs/architecture.md, "Flush"). With the native addon (Linux) each
 * call runs on the flusher's own threads (`native/flusher.cc`), never on libuv's thread pool,
 * so a flush never queues behind sendfile(2) sends to slow consumers; at most
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
 * {@link maxFlushThreads}). Before the first flush any count may be set; later only raised.
 * A no-op on the libuv fallback (its pool is sized by `UV_THREADPOOL_SIZE`).
 * @returns the count in force
 * @throws RangeError outside 1 to {@link maxFlushThreads}
 */
export function setFlushThreads(threads: number): number {
  if (!Number.isSafeInteger(threads) || threads < 1 || threads > maxFlushThreads) {
    throw new RangeError(`flush threads must be an integer from 1 to ${maxFlushThreads}, got ${threads}`);
  }
  return storageAddon?.setFlushThreads?.(threads) ?? threads;
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
