/**
 * Sending a {@link FileRegion} to a TCP socket (docs/design.md §3, the read path): with sendfile(2)
 * through klog's native addon (`native/sendfile.cc`) where it was built (Linux), or by reading
 * into pooled buffers and writing them (the fallback, also what `read.path=read-write` forces).
 *
 * On the sendfile path, the native call copies on a thread of libuv's pool until the socket is
 * full and never waits there for it; the wait for a slow reader happens on the event loop (see
 * {@link sendRegion}), so slow readers cannot hold the pool's threads and the other operations
 * that run there (file operations of the log, fs calls of the broker) never queue behind them.
 *
 * Both paths need the socket to themselves for the duration: the caller writes the response
 * header, waits until Node has handed it to the kernel (`socket.writableLength === 0`), sends
 * the region, and only then writes anything else. A klog connection answers one request at a
 * time, so nothing else writes meanwhile.
 */
import * as fs from 'node:fs';
import type { Socket } from 'node:net';
import { BufferPool } from './buffer-pool.js';
import type { FileRegion } from './file-region.js';
import { storageAddon, storageAddonError, type StorageAddon } from './native.js';

/** How segment bytes reach the socket: `sendfile` (zero-copy) or `read-write` (the fallback). */
export type ReadPath = 'sendfile' | 'read-write';

type SendfileAddon = Pick<StorageAddon, 'supported' | 'sendfile' | 'stats'>;

/** Whether sendfile(2) can be used in this process, and if not, why. */
export interface SendfileSupport {
  readonly available: boolean;
  /** Why not, when `available` is false (addon not built, platform, load error). */
  readonly reason?: string;
}

function loadAddon(): { addon?: SendfileAddon; support: SendfileSupport } {
  if (process.env.KLOG_DISABLE_SENDFILE === '1') return { support: { available: false, reason: 'KLOG_DISABLE_SENDFILE=1' } };
  const addon = storageAddon;
  if (addon === undefined) return { support: { available: false, reason: storageAddonError!.replace('native addon', 'sendfile addon') } };
  if (!addon.supported || typeof addon.sendfile !== 'function') return { support: { available: false, reason: 'the addon has no sendfile on this platform' } };
  return { addon, support: { available: true } };
}

const loaded = loadAddon();

/**
 * Whether the sendfile addon loaded (built by `pnpm install`; Linux only). Setting the
 * environment variable `KLOG_DISABLE_SENDFILE=1` before start makes it unavailable.
 */
export const sendfileSupport: SendfileSupport = Object.freeze(loaded.support);

/** The read path a broker uses when not told otherwise: `sendfile` when available, else `read-write`. */
export function defaultReadPath(): ReadPath {
  return sendfileSupport.available ? 'sendfile' : 'read-write';
}

/**
 * Process-wide counters of the sendfile path: `eagain` times a send found the socket full and
 * handed back to wait for it on the event loop, `calls` sendfile(2) calls that moved bytes,
 * `bytes` moved by them. All zero when the addon is not loaded.
 */
export function sendfileStats(): { eagain: number; calls: number; bytes: number } {
  return loaded.addon?.stats() ?? { eagain: 0, calls: 0, bytes: 0 };
}

/** Options of {@link sendRegion}. */
export interface SendRegionOptions {
  /** `sendfile` (falls back to `read-write` for a socket without a descriptor) or `read-write`. */
  readonly path: ReadPath;
  /** Buffers of the read-write path; default a shared pool of 256 KiB buffers. */
  readonly pool?: BufferPool;
}

/**
 * Regions up to this many bytes are better copied into the response than sent (64 KiB): one
 * read of bytes just flushed, so in the page cache, costs less than a trip through libuv's
 * thread pool, and it cannot queue behind the sendfile(2) copies of large fetches there. A
 * long poll answered at the log end usually carries a few messages, so this is the latency
 * path (docs/architecture.md, "Flush").
 */
export const inlineRegionMaxBytes = 64 * 1024;

/** Read-write buffer size: large enough for few syscalls, small enough to pool. */
export const readWriteChunkBytes = 256 * 1024;
/** Shared pool of the read-write path: up to 32 idle 256 KiB buffers (8 MiB). */
export const sharedReadWritePool = new BufferPool(readWriteChunkBytes, 32);

/**
 * Bytes of the region the sendfile path writes itself when the socket is full (16 KiB): the
 * write's callback is its wait for the socket, so a piece small against socket buffers
 * (hundreds of KiB and more) costs one small copy per wait and leaves the rest to sendfile(2).
 */
const waitPieceBytes = 16 * 1024;
/** Buffers of those pieces: up to 16 idle (256 KiB). */
const waitPiecePool = new BufferPool(waitPieceBytes, 16);

/**
 * Sends every byte of `region` to `socket`, by the path asked for, and resolves once the bytes
 * are with the kernel (sendfile) or queued in the socket with its buffer drained below its
 * high-water mark (read-write). Does not release the region: the caller does, after this
 * settles. An empty region resolves at once.
 *
 * The sendfile path alternates: a native sendfile(2) call on libuv's pool sends what fits and
 * returns when the socket is full (EAGAIN); then the next 16 KiB of the region are read (also
 * on the pool, a copy) and written with `socket.write`, whose callback runs once libuv's own
 * watcher of the socket has seen it writable and the piece has left; then sendfile(2) goes on
 * after the piece. No pool thread ever waits for a reader, and the event loop never waits for
 * the disk (docs/architecture.md, "Fetching").
 * @throws Error with code `ERR_KLOG_PENDING_WRITES` when the socket still has buffered writes
 *   (the caller must wait for them); `ERR_SOCKET_CLOSED` when the socket closes first; the
 *   sendfile/read error (e.g. EPIPE, ECONNRESET); `ERR_KLOG_SHORT_FILE` when the segment file
 *   holds fewer bytes than the region. After an error, part of the region may have been sent:
 *   the connection is no longer framed and must be closed.
 */
export async function sendRegion(socket: Socket, region: FileRegion, options: SendRegionOptions): Promise<void> {
  if (region.length === 0) return;
  if (region.released) throw new Error('file region sent after release');
  if (socket.writableLength > 0) throw codeError('ERR_KLOG_PENDING_WRITES', `socket has ${socket.writableLength} bytes of pending writes`);
  const addon = loaded.addon;
  if (options.path === 'sendfile' && addon?.sendfile !== undefined && socketFd(socket) !== undefined) {
    await sendWithSendfile(addon, socket, region);
  } else {
    await sendWithReadWrite(socket, region, options.pool ?? sharedReadWritePool);
  }
}

/** The OS descriptor of a connected TCP socket, or undefined (destroyed, TLS, not a TCP handle). */
function socketFd(socket: Socket): number | undefined {
  const handle = (socket as unknown as { _handle?: { fd?: unknown } | null })._handle;
  const fd = handle?.fd;
  return typeof fd === 'number' && fd >= 0 && !socket.destroyed ? fd : undefined;
}

async function sendWithSendfile(addon: SendfileAddon, socket: Socket, region: FileRegion): Promise<void> {
  let sent = 0;
  while (sent < region.length) {
    // Taken afresh each round: once JS destroys the socket its descriptor is gone (and may be
    // reused), so a destroyed socket is never handed to the addon.
    const fd = socketFd(socket);
    if (fd === undefined) throw codeError('ERR_SOCKET_CLOSED', `socket closed after ${sent} of ${region.length} bytes`);
    const r = await addon.sendfile!(fd, region.fd, region.position + sent, region.length - sent);
    sent += r.bytes;
    if (r.status === 'eof') throw shortFile(region.length - sent);
    if (r.status === 'waiting') sent += await writePiece(socket, region, sent);
  }
}

/**
 * Waits on the event loop for a full socket: reads the next piece of `region` from `sent` on
 * and writes it; resolves with its length once it has left Node's and libuv's buffers.
 * @throws ERR_SOCKET_CLOSED when the socket closes first, the write error (e.g. EPIPE), the read
 *   error, or ERR_KLOG_SHORT_FILE when the file ends within the piece.
 */
async function writePiece(socket: Socket, region: FileRegion, sent: number): Promise<number> {
  const length = Math.min(waitPieceBytes, region.length - sent);
  const piece = waitPiecePool.acquire();
  let n: number;
  try {
    n = await readFullyAsync(region.fd, piece, length, region.position + sent);
  } catch (err) {
    waitPiecePool.release(piece);
    throw err;
  }
  if (n < length) {
    waitPiecePool.release(piece);
    throw shortFile(region.length - sent - n);
  }
  await new Promise<void>((resolve, reject) => {
    const closed = (): void => reject(codeError('ERR_SOCKET_CLOSED', `socket closed after ${sent} of ${region.length} bytes`));
    socket.once('close', closed);
    socket.write(piece.subarray(0, n), (err) => {
      socket.off('close', closed);
      waitPiecePool.release(piece);
      if (err === undefined || err === null) resolve();
      else if ((err as NodeJS.ErrnoException).code === 'ERR_STREAM_DESTROYED') closed();
      else reject(err);
    });
  });
  return n;
}

/** {@link readFully} on libuv's pool: positional reads, looping over short ones. */
async function readFullyAsync(fd: number, target: Buffer, length: number, position: number): Promise<number> {
  let done = 0;
  while (done < length) {
    const n = await new Promise<number>((resolve, reject) =>
      fs.read(fd, target, done, length - done, position + done, (err, bytes) => (err ? reject(err) : resolve(bytes))),
    );
    if (n === 0) break;
    done += n;
  }
  return done;
}

async function sendWithReadWrite(socket: Socket, region: FileRegion, pool: BufferPool): Promise<void> {
  let sent = 0;
  while (sent < region.length) {
    if (socket.destroyed) throw codeError('ERR_SOCKET_CLOSED', `socket closed after ${sent} of ${region.length} bytes`);
    const buffer = pool.acquire();
    let n: number;
    try {
      n = readFully(region.fd, buffer, Math.min(buffer.length, region.length - sent), region.position + sent);
    } catch (err) {
      pool.release(buffer);
      throw err;
    }
    if (n === 0) {
      pool.release(buffer);
      throw shortFile(region.length - sent);
    }
    sent += n;
    // The buffer goes back to the pool once the socket is done with it (written or failed).
    const ok = socket.write(n === buffer.length ? buffer : buffer.subarray(0, n), () => pool.release(buffer));
    if (!ok) await drained(socket);
  }
}

/** Reads up to `length` bytes at `position`, looping over short reads; fewer only at end of file. */
function readFully(fd: number, target: Buffer, length: number, position: number): number {
  let done = 0;
  while (done < length) {
    const n = fs.readSync(fd, target, done, length - done, position + done);
    if (n === 0) break;
    done += n;
  }
  return done;
}

/** Resolves on 'drain'; rejects when the socket closes first. */
function drained(socket: Socket): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const done = (): void => {
      socket.off('drain', done);
      socket.off('close', closed);
      resolve();
    };
    const closed = (): void => {
      socket.off('drain', done);
      socket.off('close', closed);
      reject(codeError('ERR_SOCKET_CLOSED', 'socket closed while waiting for drain'));
    };
    socket.on('drain', done);
    socket.on('close', closed);
    if (socket.destroyed) closed();
  });
}

function shortFile(missing: number): Error {
  return codeError('ERR_KLOG_SHORT_FILE', `segment file ended ${missing} bytes before the region's end`);
}

function codeError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code });
}
