/**
 * One segment file of a partition's log (SPEC §2): `<20-digit start offset>.kafka`, holding
 * the messages whose byte offsets begin at `start`. The file is plain message-set bytes with no
 * header and no index; a message at file position `p` has log offset `start + p`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { LogClosedError } from './errors.js';
import { fdatasyncFile } from './flusher.js';

/** File name extension of a segment. */
export const segmentFileSuffix = '.kafka';
/** Digits of the zero-padded start offset in a segment file name. */
export const segmentNameDigits = 20;
const segmentNamePattern = /^(\d{20})\.kafka$/;

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
 * An open segment file. Appends are synchronous positional writes at the end; reads are
 * synchronous positional reads. `size` grows with appends; `syncedBytes` trails it and says
 * how much is known to be on disk.
 */
export class Segment {
  /** Bytes in the file (everything appended, synced or not). */
  size: number;
  /** Bytes covered by a completed fdatasync. */
  syncedBytes: number;
  /** Time of the last write in ms since the epoch (file mtime when opened). */
  lastModifiedMs: number;
  /** fdatasync calls in flight on `fd`; `close()` waits for them. */
  readonly #syncs = new Set<Promise<void>>();
  /** Reads holding `fd` open (file regions being sent); the fd is closed only when none is left. */
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
    /** Open file descriptor (read-write). */
    readonly fd: number,
    size: number,
    lastModifiedMs: number,
  ) {
    this.size = size;
    this.syncedBytes = size;
    this.lastModifiedMs = lastModifiedMs;
  }

  /** Creates the empty segment `dir/<start>.kafka`. @throws when the file exists or cannot be created. */
  static create(dir: string, start: number): Segment {
    const file = path.join(dir, segmentFileName(start));
    const fd = fs.openSync(file, 'wx+');
    return new Segment(start, file, fd, 0, Date.now());
  }

  /** Opens the existing segment file `file` whose first byte is log offset `start`. */
  static open(file: string, start: number): Segment {
    const fd = fs.openSync(file, 'r+');
    const stat = fs.fstatSync(fd);
    return new Segment(start, file, fd, stat.size, stat.mtimeMs);
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
   * Keeps `fd` open until the matching {@link Segment.unpin}, even across `close()` or
   * `delete()` (retention): a file region being sent to a socket pins its segment (SPEC §2,
   * §3 read path). Deleting removes the file name at once; the descriptor, and with it the
   * data, stays readable until the last pin goes.
   * @throws LogClosedError when the segment is already closed
   */
  pin(): void {
    if (this.#closed) throw new LogClosedError(`segment ${this.file}`);
    this.#pins++;
  }

  /** Releases one {@link Segment.pin}; the last one lets a pending `close()` close the fd. */
  unpin(): void {
    if (this.#pins <= 0) throw new RangeError(`segment ${this.file} is not pinned`);
    if (--this.#pins === 0) this.#unpinned?.();
  }

  /**
   * Writes `bytes` at the end of the file (synchronously; the OS may still hold them in cache).
   * @throws the write error, after cutting the file back to its size before the write so no
   *   torn entry stays on disk.
   */
  append(bytes: Buffer): void {
    const before = this.size;
    let done = 0;
    try {
      while (done < bytes.length) done += fs.writeSync(this.fd, bytes, done, bytes.length - done, before + done);
    } catch (err) {
      try {
        fs.ftruncateSync(this.fd, before);
      } catch {
        // The write error below is the one worth reporting.
      }
      throw err;
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
   * Reads up to `length` bytes from file position `position` into `target[0, length)`.
   * @returns the bytes read (fewer only at the end of the file)
   */
  readInto(target: Buffer, position: number, length: number): number {
    let done = 0;
    while (done < length) {
      const n = fs.readSync(this.fd, target, done, length - done, position + done);
      if (n === 0) break;
      done += n;
    }
    return done;
  }

  /**
   * fdatasync the file (on the flusher's threads, see flusher.ts) and mark what was written
   * before the call as synced. A no-op on a closed segment. @throws the fdatasync error.
   */
  async sync(): Promise<void> {
    if (this.#closed) return;
    const covered = this.size;
    const p = fdatasyncFile(this.fd);
    this.#syncs.add(p);
    try {
      await p;
    } finally {
      this.#syncs.delete(p);
    }
    if (covered > this.syncedBytes) this.syncedBytes = covered;
  }

  /** Cuts the file to `bytes` bytes and fsyncs it (used by recovery). */
  truncate(bytes: number): void {
    fs.ftruncateSync(this.fd, bytes);
    fs.fsyncSync(this.fd);
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
      fs.closeSync(this.fd);
    })();
    return this.#closing;
  }

  /**
   * Removes the file and closes it (see `close()`). The name goes at once; when reads still pin
   * the segment, the returned promise resolves without waiting for them, and the descriptor is
   * closed when the last one is released, so a slow consumer never holds up retention.
   */
  async delete(): Promise<void> {
    const closing = this.close();
    await fs.promises.rm(this.file, { force: true });
    if (this.#pins === 0) await closing;
    else closing.catch(() => {});
  }
}
