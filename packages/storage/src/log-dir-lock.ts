/**
 * The lock that keeps a second broker out of a log dir: two processes appending to the same
 * segments would overwrite each other's messages, and one's clean-shutdown marker would make the
 * other skip recovery after a crash.
 *
 * `LOG_DIR/.lock` carries an exclusive open-file-description lock (`fcntl(F_OFD_SETLK)` on Linux,
 * `flock` on macOS, through fs-native-extensions) for as long as the log manager is open. The
 * kernel drops the lock when its holder exits, however it exits (`kill -9` included), so a lock
 * left by a dead broker is never mistaken for a live one, whatever pid it names or whoever has
 * that pid now (a broker that is PID 1 in a container restarts as PID 1 again). The file also
 * holds the holder's pid, for people and error messages only.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { tryLock } from 'fs-native-extensions';

/** Name of the lock file in a log dir. */
export const lockFileName = '.lock';

/** Another live process (or another log manager of this one) holds the log dir. */
export class LogDirLockedError extends Error {
  override readonly name = 'LogDirLockedError';
  constructor(
    readonly logDir: string,
    /** pid of the holder as its lock file names it; undefined when the file does not name one. */
    readonly pid: number | undefined,
  ) {
    const who = pid === undefined ? 'another process' : `process ${pid}${pid === process.pid ? ' (this one)' : ''}`;
    super(`log dir ${logDir} is in use by ${who}: one broker per log dir`);
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

/** True when `fd` is still the file at `file` (not one its holder removed on release). */
function isCurrent(fd: number, file: string): boolean {
  const held = fs.fstatSync(fd);
  try {
    const now = fs.statSync(file);
    return now.ino === held.ino && now.dev === held.dev;
  } catch {
    return false;
  }
}

/**
 * Takes the lock of `logDir` (which must exist) for this process, without waiting.
 * @returns a function that releases it (removing the file, then dropping the lock)
 * @throws LogDirLockedError when another open lock holds it (another process, or another log
 *   manager of this one); file system errors
 */
export function lockLogDir(logDir: string): () => void {
  const file = path.join(logDir, lockFileName);
  for (;;) {
    const fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o644);
    let locked: boolean;
    try {
      locked = tryLock(fd);
    } catch (err) {
      fs.closeSync(fd);
      throw err;
    }
    if (!locked) {
      fs.closeSync(fd);
      throw new LogDirLockedError(logDir, holderOf(file));
    }
    // The holder we waited out may have removed the file on release: then lock the one there now.
    if (!isCurrent(fd, file)) {
      fs.closeSync(fd);
      continue;
    }
    try {
      fs.ftruncateSync(fd, 0);
      fs.writeSync(fd, `${process.pid}\n`, 0);
    } catch (err) {
      fs.closeSync(fd);
      throw err;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // Remove the name while the lock is still held, so nobody locks a file that is going away.
      fs.rmSync(file, { force: true });
      fs.closeSync(fd);
    };
  }
}
