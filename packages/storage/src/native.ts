/**
 * The storage package's native addon (`native/sendfile.cc`, `native/flusher.cc`, built into
 * `build/Release/klog_sendfile.node` by `pnpm install` on Linux), loaded once for the read path
 * (sendfile(2), see send-region.ts) and the flusher (fdatasync on threads of its own, see
 * flusher.ts). Absent (another platform, no compiler, a failed build), both have fallbacks.
 */
import { createRequire } from 'node:module';

/** What the native addon exports. */
export interface StorageAddon {
  readonly supported: boolean;
  /** Sends until done, the file's end or a full socket ("waiting"), on libuv's pool; see native/sendfile.cc. */
  sendfile?(socketFd: number, fileFd: number, position: number, length: number): Promise<{ bytes: number; status: 'complete' | 'eof' | 'waiting' }>;
  stats(): { eagain: number; calls: number; bytes: number };
  fdatasync?(fd: number): Promise<void>;
  setFlushThreads?(threads: number): number;
  syncedBytes?(dev: number, ino: number): number;
  flusherStats(): { syncs: number; errors: number; inFlight: number; maxInFlight: number; threads: number };
}

function load(): { addon?: StorageAddon; error?: string } {
  if (process.platform !== 'linux') return { error: `no native addon on ${process.platform}` };
  try {
    return { addon: createRequire(import.meta.url)('../build/Release/klog_sendfile.node') as StorageAddon };
  } catch (err) {
    return { error: `native addon not loaded: ${(err as Error).message.split('\n')[0]}` };
  }
}

const loaded = load();

/** The addon, or undefined when it did not load (then {@link storageAddonError} says why). */
export const storageAddon: StorageAddon | undefined = loaded.addon;
/** Why the addon did not load; undefined when it did. */
export const storageAddonError: string | undefined = loaded.error;
