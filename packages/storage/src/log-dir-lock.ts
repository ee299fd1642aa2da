/**
 * The lock that keeps a second broker out of a log dir: two processes appending to the same
 * segments would overwrite each other's messages, and one's clean-shutdown marker would make the
 * other skip recovery after a crash.
 *
 * `LOG_DIR/.lock` holds the pid of the process that owns the dir. It is created exclusively; a
 * lock whose pid no longer runs (its owner crashed) is stale and taken over.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Name of the lock file in a log dir. */
export const lockFileName = '.lock';

/** Another live process (or another log manager of this one) holds the log dir. */
export class LogDirLockedError extends Error {
  override readonly name = 'LogDirLockedError';
  constructor(
    readonly logDir: string,
    /** pid of the holder. */
    readonly pid: number,
  ) {
    super(`log dir ${logDir} is in use by process ${pid}${pid === process.pid ? ' (this one)' : ''}: one broker per log dir`);
  }
}

function holderOf(file: string): number | undefined {
  try {
    const pid = Number(fs.readFileSync(file, 'utf8').trim());
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Takes the lock of `logDir` (which must exist) for this process.
 * @returns a function that releases it
 * @throws LogDirLockedError when a running process holds it; file system errors
 */
export function lockLogDir(logDir: string): () => void {
  const file = path.join(logDir, lockFileName);
  for (;;) {
    let fd: number;
    try {
      fd = fs.openSync(file, 'wx');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = holderOf(file);
      if (pid !== undefined && isRunning(pid)) throw new LogDirLockedError(logDir, pid);
      // Stale: the holder is gone (or the file was left half-written). Take it over.
      fs.rmSync(file, { force: true });
      continue;
    }
    try {
      fs.writeSync(fd, `${process.pid}\n`);
    } finally {
      fs.closeSync(fd);
    }
    return () => {
      if (holderOf(file) === process.pid) fs.rmSync(file, { force: true });
    };
  }
}
