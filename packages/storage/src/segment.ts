/**
 * One segment file of a partition's log (docs/design.md §2): `<20-digit start offset>.kafka`, holding
 * the messages whose byte offsets begin at `start`. The file is plain message-set bytes with no
 * header and no index; a message at file position `p` has log offset `start + p`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { asStorageError, LogClosedError } from './errors.js';
import { fdatasyncFile } from './flusher.js';

/** File name extension of a segment. */
export const segmentFileSuffix = '.kafka';
/** Digits of the zero-padded start offset in a segment file name. */
export const segmentNameDigits = 20;
const segmentNamePattern = /^(\d{20})\.kafka$/;
const emptyFile = new Uint8Array(0);

/** `00000000000536870912.kafka` for start offset 536870912. */
export function segmentFileName(start: number): string {
  return `${String(start).padStart(segmentNameDigits, '0')}${segmentFileSuffix}`;
}

/** The start offset a segment file name encodes, or `undefined` when `name` is not a segment name. */
export function parseSegmentFileName(name: string): number | undefined {
  const m = segmentNamePattern.exec(name);
  if (m === null) return undefined;
  const start = Number(m[1]);
  return Number.isSafeInteger(start) ? start : undefined;
}

/**
 * fsync a directory so that the names created or removed in it survive a crash (a rolled
 * segment's entry, a deleted one's removal). Some platforms cannot fsync a directory: there it
 * does nothing.
 */
export async function syncDir(dir: string): Promise<void> {
  let handle: fs.promises.FileHandle | undefined;
  try {
    handle = await fs.promises.open(dir, 'r');
  } catch {
    return;
  }
  try {
    await handle.sync();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EINVAL' && code !== 'ENOTSUP' && code !== 'EPERM' && code !== 'EISDIR') throw err;
  } finally {
    await handle.close();
  }
}

/**
 * One segment file. Appends are synchronous positional writes at the end; reads are
 * synchronous positional reads. `size` grows with appends; `syncedBytes` trails it and says
 * how much is known to be on disk.
 *
 * Descriptors: the file is opened on first use, not when the segment is loaded, so a log dir of
 * many partitions starts without one descriptor per segment. A segment that is not the active
 * one (see {@link Segment.retire}) closes its descriptor again as soon as nothing uses it: no
 * read pins it, no fdatasync runs on it and every byte is synced. The active segment keeps its
 * descriptor once opened; {@link Segment.releaseFd} lets an idle one go.
 */
export class Segment {
  /** Bytes in the file (everything appended, synced or not). */
  size: number;
  /** Bytes covered by a completed fdatasync. */
  syncedBytes: number;
  /** Time of the last write in ms since the epoch (file mtime when opened). */
  lastModifiedMs: number;
  /** The open descriptor (read-write), or undefined while the file is not open. */
  #fd: number | undefined;
  /** False once the segment is no longer the one appended to: its descriptor then closes when idle. */
  #active = true;
  /** Set when the file was created by a roll and its directory entry is not yet fsynced; the next `sync()` does it. */
  #dirUnsynced = false;
  /** fdatasync calls in flight; `close()` waits for them. */
  readonly #syncs = new Set<Promise<void>>();
  /** Reads holding the descriptor open (file regions being sent); it is closed only when none is left. */
  #pins = 0;
  /** Set by `close()`; later `pin()` calls throw. */
  #closed = false;
  /** The running or finished close (the fd is closed when it settles). */
  #closing: Promise<void> | undefined;
  /** Resolves the close that waits for the last pin to be released. */
  #unpinned: (() => void) | undefined;

  private constructor(
    /** Byte offset in the partition's log of the segment's first byte. */
    readonly start: number,
    /** Path of the segment file. */
    readonly file: string,
    fd: number | undefined,
    size: number,
    lastModifiedMs: number,
  ) {
    this.#fd = fd;
    this.size = size;
    this.syncedBytes = size;
    this.lastModifiedMs = lastModifiedMs;
  }

  /**
   * Creates the empty segment `dir/<start>.kafka` (a roll). Its directory entry is fsynced by
   * the segment's first `sync()`, before any of its bytes count as flushed.
   * @param exclusive false to open an empty file of that name that another roll is creating
   * @throws DiskFullError when there is no space for it; other errors when the file exists (and
   *   `exclusive`) or cannot be created
   */
  static create(dir: string, start: number, exclusive = true): Segment {
    const file = path.join(dir, segmentFileName(start));
    let fd: number;
    try {
      fd = fs.openSync(file, exclusive ? 'wx+' : 'w+');
    } catch (err) {
      throw asStorageError(err, file);
    }
    const segment = new Segment(start, file, fd, 0, Date.now());
    segment.#dirUnsynced = true;
    return segment;
  }

  /**
   * Creates the empty segment `dir/<start>.kafka` without blocking the event loop (a new
   * partition, a roll by retention or by a follower), closed until first used unless
   * `options.open` is true (then its descriptor is opened here, asynchronously, for the appends
   * that follow). The caller fsyncs `dir` (see {@link syncDir}).
   * @throws DiskFullError when there is no space for it; other errors when the file exists or cannot be created
   */
  static async createAsync(dir: string, start: number, options: { open?: boolean } = {}): Promise<Segment> {
    const file = path.join(dir, segmentFileName(start));
    let fd: number | undefined;
    try {
      if (options.open === true) fd = await openFd(file, 'wx+');
      else await fs.promises.writeFile(file, emptyFile, { flag: 'wx' });
    } catch (err) {
      throw asStorageError(err, file);
    }
    return new Segment(start, file, fd, 0, Date.now());
  }

  /** The existing segment file `file` whose first byte is log offset `start`; not opened until used. */
  static open(file: string, start: number): Segment {
    const stat = fs.statSync(file);
    return new Segment(start, file, undefined, stat.size, stat.mtimeMs);
  }

  /** {@link Segment.open} without blocking the event loop (a stat on libuv's pool). */
  static async openAsync(file: string, start: number): Promise<Segment> {
    const stat = await fs.promises.stat(file);
    return new Segment(start, file, undefined, stat.size, stat.mtimeMs);
  }

  /**
   * The file's descriptor, opening the file when it is not open (read-write). Valid while the
   * segment is pinned, a sync runs, or it is active; do not keep it otherwise.
   * @throws LogClosedError when the segment is closed and its descriptor gone; open errors
   */
  get fd(): number {
    if (this.#fd !== undefined) return this.#fd;
    if (this.#closed) throw new LogClosedError(`segment ${this.file}`);
    this.#fd = fs.openSync(this.file, 'r+');
    return this.#fd;
  }

  /**
   * The file's descriptor, opening the file without blocking the event loop when it is not open.
   * Same validity as {@link Segment.fd}.
   * @throws LogClosedError when the segment is closed; open errors
   */
  async openFd(): Promise<number> {
    if (this.#fd !== undefined) return this.#fd;
    if (this.#closed) throw new LogClosedError(`segment ${this.file}`);
    const fd = await openFd(this.file, 'r+');
    if (this.#fd !== undefined || this.#closed) {
      await closeFd(fd); // opened meanwhile (by a synchronous use), or closed: keep one descriptor
      return this.fd;
    }
    this.#fd = fd;
    return fd;
  }

  /** True while the file has an open descriptor. */
  get isOpen(): boolean {
    return this.#fd !== undefined;
  }

  /** Log offset just past the segment's last byte: `start + size`. */
  get end(): number {
    return this.start + this.size;
  }

  /** True once `close()` has been called. */
  get closed(): boolean {
    return this.#closed;
  }

  /** Reads currently holding the file descriptor open (see {@link Segment.pin}). */
  get pins(): number {
    return this.#pins;
  }

  /**
   * Keeps the file open until the matching {@link Segment.unpin}, even across `close()` or
   * `delete()` (retention): a file region being sent to a socket pins its segment (docs/design.md §2,
   * §3 read path). Deleting removes the file name at once; the descriptor, and with it the
   * data, stays readable until the last pin goes. Opens the file when it is not open.
   * @throws LogClosedError when the segment is already closed; open errors
   */
  pin(): void {
    if (this.#closed) throw new LogClosedError(`segment ${this.file}`);
    void this.fd;
    this.#pins++;
  }

  /** Releases one {@link Segment.pin}; the last one lets a pending `close()` close the fd, or an idle segment's descriptor go. */
  unpin(): void {
    if (this.#pins <= 0) throw new RangeError(`segment ${this.file} is not pinned`);
    if (--this.#pins === 0) {
      this.#unpinned?.();
      if (!this.#active) this.releaseFd();
    }
  }

  /** Marks the segment as no longer the one appended to (after a roll): its descriptor closes whenever it is idle. */
  retire(): void {
    this.#active = false;
    this.releaseFd();
  }

  /** Makes the segment the one appended to again (a truncation cut the log back into it). */
  activate(): void {
    this.#active = true;
  }

  /**
   * Closes the descriptor now if nothing uses it (no pin, no sync in flight, every byte synced);
   * the next use opens the file again. Does nothing otherwise.
   */
  releaseFd(): void {
    if (this.#fd === undefined || this.#closing !== undefined) return;
    if (this.#pins > 0 || this.#syncs.size > 0 || this.syncedBytes < this.size || this.#dirUnsynced) return;
    const fd = this.#fd;
    this.#fd = undefined;
    fs.closeSync(fd);
  }

  /**
   * Writes `bytes` at the end of the file (synchronously; the OS may still hold them in cache).
   * @throws DiskFullError for ENOSPC/EDQUOT, else the write error, after cutting the file back to
   *   its size before the write so no torn entry stays on disk.
   */
  append(bytes: Buffer): void {
    const before = this.size;
    const fd = this.fd;
    let done = 0;
    try {
      while (done < bytes.length) done += fs.writeSync(fd, bytes, done, bytes.length - done, before + done);
    } catch (err) {
      try {
        fs.ftruncateSync(fd, before);
      } catch {
        // The write error below is the one worth reporting.
      }
      throw asStorageError(err, this.file);
    }
    this.size = before + done;
    this.lastModifiedMs = Date.now();
  }

  /**
   * {@link Segment.append} without blocking the event loop: a positional write on libuv's pool.
   * The caller runs one at a time per segment (`size` moves only once the write is done).
   * @throws DiskFullError for ENOSPC/EDQUOT, else the write error, after cutting the file back to
   *   its size before the write so no torn entry stays on disk.
   */
  async appendAsync(bytes: Buffer): Promise<void> {
    const before = this.size;
    const fd = await this.openFd();
    let done = 0;
    try {
      while (done < bytes.length) done += await writeFd(fd, bytes, done, bytes.length - done, before + done);
    } catch (err) {
      await truncateFd(fd, before).catch(() => {}); // the write error below is the one worth reporting
      throw asStorageError(err, this.file);
    }
    this.size = before + done;
    this.lastModifiedMs = Date.now();
  }

  /**
   * Reads `length` bytes from file position `position` (relative to `start`). The caller keeps
   * the range inside `[0, size)`. @returns a new buffer, shorter only if the file was cut.
   */
  read(position: number, length: number): Buffer {
    const buf = Buffer.allocUnsafe(length);
    const done = this.readInto(buf, position, length);
    return done === length ? buf : buf.subarray(0, done);
  }

  /**
   * Reads up to `length` bytes from file position `position` into `target[0, length)`. A
   * segment that is not the active one closes its descriptor again afterwards when idle.
   * @returns the bytes read (fewer only at the end of the file)
   */
  readInto(target: Buffer, position: number, length: number): number {
    const fd = this.fd;
    let done = 0;
    try {
      while (done < length) {
        const n = fs.readSync(fd, target, done, length - done, position + done);
        if (n === 0) break;
        done += n;
      }
    } finally {
      if (!this.#active) this.releaseFd();
    }
    return done;
  }

  /**
   * fdatasync the file (on the flusher's threads, see flusher.ts) and mark what was written
   * before the call as synced; for a segment just rolled, also fsync its directory first, so the
   * new file's name is as durable as its bytes (docs/format.md §4). A no-op on a closed segment.
   * @throws the fdatasync or fsync error.
   */
  async sync(): Promise<void> {
    if (this.#closed) return;
    const covered = this.size;
    const fd = this.fd;
    const dirUnsynced = this.#dirUnsynced;
    const p = dirUnsynced
      ? (async () => {
          await syncDir(path.dirname(this.file));
          await fdatasyncFile(fd);
        })()
      : fdatasyncFile(fd);
    this.#syncs.add(p);
    try {
      await p;
      if (dirUnsynced) this.#dirUnsynced = false;
    } finally {
      this.#syncs.delete(p);
    }
    if (covered > this.syncedBytes) this.syncedBytes = Math.min(covered, this.size); // a truncation meanwhile cut it
    if (!this.#active) this.releaseFd();
  }

  /**
   * Cuts the file to `bytes` bytes and fsyncs it without blocking the event loop (a follower's
   * truncation, docs/replication.md §8.3). `size` and `syncedBytes` are `bytes` from the call on.
   * @throws the ftruncate or fsync error
   */
  async truncateAsync(bytes: number): Promise<void> {
    this.cutSize(bytes);
    const fd = await this.openFd();
    await truncateFd(fd, bytes);
    await new Promise<void>((resolve, reject) => fs.fsync(fd, (err) => (err ? reject(err) : resolve())));
    this.size = bytes;
    this.syncedBytes = bytes;
    this.lastModifiedMs = Date.now();
  }

  /**
   * Lowers `size` (and `syncedBytes`) to `bytes` in memory, before {@link Segment.truncateAsync}
   * cuts the file: from then on the log ends there for appends, reads and flushes.
   */
  cutSize(bytes: number): void {
    this.size = Math.min(this.size, bytes);
    this.syncedBytes = Math.min(this.syncedBytes, bytes);
  }

  /** Cuts the file to `bytes` bytes and fsyncs it (used by recovery). */
  truncate(bytes: number): void {
    const fd = this.fd;
    fs.ftruncateSync(fd, bytes);
    fs.fsyncSync(fd);
    this.size = bytes;
    this.syncedBytes = bytes;
  }

  /**
   * Waits for any fdatasync in flight on the file and for every pin to be released, then
   * closes it. No new pin is accepted from the call on. Idempotent: later calls return the
   * same promise.
   */
  close(): Promise<void> {
    this.#closed = true;
    this.#closing ??= (async () => {
      await Promise.allSettled([...this.#syncs]);
      if (this.#pins > 0) await new Promise<void>((resolve) => (this.#unpinned = resolve));
      const fd = this.#fd;
      this.#fd = undefined;
      if (fd !== undefined) await closeFd(fd);
    })();
    return this.#closing;
  }

  /**
   * Removes the file, fsyncs its directory so the removal is durable, and closes the file (see
   * `close()`). The name goes at once; when reads still pin the segment, the returned promise
   * resolves without waiting for them, and the descriptor is closed when the last one is
   * released, so a slow consumer never holds up retention.
   */
  async delete(): Promise<void> {
    const closing = this.close();
    await fs.promises.rm(this.file, { force: true });
    await syncDir(path.dirname(this.file));
    if (this.#pins === 0) await closing;
    else closing.catch(() => {});
  }
}

/** open(2) on libuv's pool: the descriptor of `file`. */
function openFd(file: string, flags: string): Promise<number> {
  return new Promise((resolve, reject) => fs.open(file, flags, (err, fd) => (err ? reject(err) : resolve(fd))));
}

/** close(2) on libuv's pool. */
function closeFd(fd: number): Promise<void> {
  return new Promise((resolve, reject) => fs.close(fd, (err) => (err ? reject(err) : resolve())));
}

/** pwrite(2) on libuv's pool: the bytes written. */
function writeFd(fd: number, bytes: Buffer, offset: number, length: number, position: number): Promise<number> {
  return new Promise((resolve, reject) => fs.write(fd, bytes, offset, length, position, (err, n) => (err ? reject(err) : resolve(n))));
}

/** ftruncate(2) on libuv's pool. */
function truncateFd(fd: number, bytes: number): Promise<void> {
  return new Promise((resolve, reject) => fs.ftruncate(fd, bytes, (err) => (err ? reject(err) : resolve())));
}
