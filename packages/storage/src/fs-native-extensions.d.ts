/** The part of fs-native-extensions (no types of its own) that klog uses: see log-dir-lock.ts. */
declare module 'fs-native-extensions' {
  /**
   * Takes an exclusive (or, with `shared`, a shared) lock on the open file `fd` without waiting:
   * an open-file-description lock (`F_OFD_SETLK`) on Linux, `flock` on macOS.
   * @returns false when another open file description holds a conflicting lock
   */
  export function tryLock(fd: number, options?: { shared?: boolean }): boolean;
  /** Releases a lock taken on `fd` (closing `fd` releases it too). */
  export function unlock(fd: number): void;
}
