/**
 * One client connection: cuts the byte stream into request frames (SPEC §3) and answers them
 * one at a time, in order. A frame whose size prefix is out of bounds cannot be skipped
 * safely, so it gets an InvalidRequest response and the connection is closed; every other bad
 * request gets an error response and the connection goes on. Fetch responses carry file regions
 * that `write` sends after the header with the broker's read path (SPEC §3).
 *
 * Fire-and-forget produce requests have no response, so they are handled without waiting: their
 * message sets go to the connection's {@link ProduceRun}, which is appended before the next
 * request that has a response is handled (so appends stay in arrival order), or once the reads
 * of this turn of the event loop are done (`setImmediate`): the sets of several reads of 64 KiB
 * then go to the log in one write.
 *
 * Memory (docs/format.md §5, broker settings): every byte read and not yet handled counts
 * against the broker's {@link RequestMemory} (`queued.max.request.bytes`). A frame larger than
 * {@link largeFrameBytes} is received into one buffer of its size, reserved from the budget when
 * its size prefix arrives; while the budget cannot take it, or is spent, the socket is not read
 * (the client waits in TCP). A connection that completes no request for
 * `connections.max.idle.ms` is closed by the server ({@link Connection.idleSinceMs}).
 */
import type { Socket } from 'node:net';
import { ErrorCode, ProtocolError, RequestDecoder, bufferView, encodeErrorResponse, frameSizeBytes, readFrameSize } from '@klog/protocol';
import { inlineRegionMaxBytes, sendRegion, type FileRegion } from '@klog/storage';
import { handleFireAndForget, handleRequest, ProduceRun, type BrokerContext, type ResponsePart } from './handlers/index.js';
import type { RequestMemory } from './request-memory.js';

/**
 * Frames above this many bytes are received into a buffer of their own, reserved first from the
 * request budget; smaller ones are cut from the chunks the socket delivers.
 */
export const largeFrameBytes = 1024 * 1024;

/** Releases the file regions of a response that will not be sent. */
function releaseAll(parts: ResponsePart[] | undefined): void {
  for (const p of parts ?? []) if (!Buffer.isBuffer(p)) p.release();
}

/** A large frame being received into its own buffer. */
interface Assembly {
  /** The frame after its size prefix. */
  readonly buf: Buffer;
  /** Bytes of `buf` received so far. */
  filled: number;
}

/** Serves one socket until it closes. */
export class Connection {
  /** Received bytes not yet cut into frames: `chunks[0]` from `headPos` on, then the others whole. */
  private chunks: Buffer[] = [];
  /** Bytes of `chunks[0]` already cut into frames (kept as a position: a view per frame would cost more). */
  private headPos = 0;
  /** Total bytes not yet cut into frames (all counted in `memory`). */
  private buffered = 0;
  /** The large frame being received, its bytes reserved in `memory`. */
  private assembly: Assembly | undefined;
  /** Bytes of `memory` held by the frame being handled (a large frame), released when it is done. */
  private handling = 0;
  /** Cancels the wait for memory while the socket is paused for it. */
  private memoryWait: (() => void) | undefined;
  /** True while a request is being handled; later frames wait their turn. */
  private busy = false;
  private closed = false;
  /** When the last request was completed (or the connection opened), ms since the epoch. */
  private lastRequestMs = Date.now();
  /** The broker's context, with `closing` also aborted when this connection closes. */
  private readonly ctx: BrokerContext;
  /** Fire-and-forget message sets received and not yet appended. */
  private readonly run: ProduceRun;
  /** Set while a `setImmediate` that appends `run` is pending. */
  private runFlush: NodeJS.Immediate | undefined;
  /** Decodes this connection's requests, keeping the topic name it last read. */
  private readonly decoder = new RequestDecoder();

  constructor(
    broker: BrokerContext,
    private readonly socket: Socket,
    private readonly memory: RequestMemory,
  ) {
    const gone = new AbortController();
    this.ctx = { ...broker, closing: AbortSignal.any([broker.closing, gone.signal]) };
    const ctx = this.ctx;
    this.run = new ProduceRun(ctx);
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      if (this.closed) return;
      const rest = this.assembly !== undefined ? this.fill(chunk) : chunk;
      if (rest.length > 0) {
        this.chunks.push(rest);
        this.buffered += rest.length;
        memory.add(rest.length);
      }
      // Hold reading while a backlog of at least one whole request waits; resume in pump().
      if (this.buffered > ctx.config.maxRequestBytes + frameSizeBytes) socket.pause();
      if (memory.exhausted && this.assembly === undefined) this.waitForMemory();
      if (!this.busy) void this.pump();
    });
    socket.on('error', (err) => ctx.logger.debug({ remote: this.remote, err: err.message }, 'connection error'));
    socket.on('close', () => {
      this.closed = true;
      gone.abort(); // a long-poll fetch of this connection stops waiting
      // While a request is handled, the fire-and-forget frames already received are still
      // appended (a producer may close right after sending); pump() then finishes the close.
      if (!this.busy) this.finishClose();
    });
  }

  /**
   * Since when (ms since the epoch) the connection has completed no request, or undefined while
   * it handles one: the server closes it after `connections.max.idle.ms`.
   */
  get idleSinceMs(): number | undefined {
    return this.busy ? undefined : this.lastRequestMs;
  }

  /** Bytes of the request budget this connection holds. */
  get heldBytes(): number {
    return this.buffered + (this.assembly?.buf.length ?? 0) + this.handling;
  }

  /** Appends what the connection gathered, gives back every byte it holds and drops its buffers. */
  private finishClose(): void {
    this.appendRun();
    this.releaseMemory();
  }

  /** Gives back every byte this connection holds, and drops its buffers. */
  private releaseMemory(): void {
    this.memoryWait?.();
    this.memoryWait = undefined;
    this.memory.release(this.heldBytes);
    this.chunks = [];
    this.buffered = 0;
    this.headPos = 0;
    this.assembly = undefined;
    this.handling = 0;
  }

  /** Stops reading until the budget has room again (then reads and cuts frames again). */
  private waitForMemory(): void {
    if (this.memoryWait !== undefined || this.closed) return;
    this.socket.pause();
    this.memoryWait = this.memory.whenReleased(() => {
      this.memoryWait = undefined;
      if (this.closed) return;
      if (this.memory.exhausted) return this.waitForMemory();
      if (!this.busy) void this.pump();
    });
  }

  /** Copies the start of `chunk` into the large frame being received. @returns the bytes after the frame */
  private fill(chunk: Buffer): Buffer {
    const a = this.assembly!;
    const take = Math.min(chunk.length, a.buf.length - a.filled);
    chunk.copy(a.buf, a.filled, 0, take);
    a.filled += take;
    return take === chunk.length ? chunk.subarray(0, 0) : chunk.subarray(take);
  }

  private get remote(): string {
    return `${this.socket.remoteAddress}:${this.socket.remotePort}`;
  }

  /** `address:port` of the client. */
  get remoteAddress(): string {
    return this.remote;
  }

  /**
   * The next whole frame (after its size prefix), or undefined; throws ProtocolError on a bad
   * size. A large frame not yet whole moves into a buffer of its own once the budget takes it.
   */
  private nextFrame(): Buffer | undefined {
    const a = this.assembly;
    if (a !== undefined) {
      if (a.filled < a.buf.length) return undefined;
      this.assembly = undefined;
      this.handling = a.buf.length;
      return a.buf;
    }
    if (this.buffered < frameSizeBytes) return undefined;
    let head = this.chunks[0]!;
    if (head.length - this.headPos < frameSizeBytes) head = this.coalesce(frameSizeBytes);
    const at = this.headPos;
    const size = readFrameSize(head, at, this.ctx.config.maxRequestBytes)!;
    const total = frameSizeBytes + size;
    if (this.buffered < total) {
      if (size > largeFrameBytes) this.assemble(size);
      return undefined;
    }
    if (head.length - at < total) head = this.coalesce(total);
    const start = this.headPos;
    const frame = bufferView(head, start + frameSizeBytes, start + total);
    if (head.length - start > total) this.headPos = start + total;
    else {
      this.chunks.shift();
      this.headPos = 0;
    }
    this.buffered -= total;
    this.memory.release(total);
    return frame;
  }

  /**
   * Moves the large frame of `size` bytes whose prefix heads the buffered bytes (all of them
   * belong to it) into a buffer of its own, once the budget can reserve it; until then the
   * socket is not read.
   */
  private assemble(size: number): void {
    if (this.memoryWait !== undefined) return;
    const before = this.buffered;
    if (!this.memory.tryReserve(size)) {
      this.waitForMemory();
      return;
    }
    const buf = Buffer.allocUnsafeSlow(size);
    let filled = 0;
    let skip = this.headPos + frameSizeBytes;
    for (const c of this.chunks) {
      if (skip >= c.length) {
        skip -= c.length;
        continue;
      }
      filled += c.copy(buf, filled, skip);
      skip = 0;
    }
    this.chunks = [];
    this.headPos = 0;
    this.buffered = 0;
    this.memory.release(before);
    this.assembly = { buf, filled };
    if (this.socket.isPaused() && !this.memory.exhausted) this.socket.resume();
  }

  /**
   * Copies the first `bytes` buffered bytes (a frame, or a frame head, split across chunks) into
   * one new chunk in front of the rest; the bytes after them are not copied.
   */
  private coalesce(bytes: number): Buffer {
    const out = Buffer.allocUnsafe(bytes);
    let filled = 0;
    while (filled < bytes) {
      const c = this.chunks[0]!;
      const from = this.headPos;
      const take = Math.min(c.length - from, bytes - filled);
      c.copy(out, filled, from, from + take);
      filled += take;
      if (from + take === c.length) this.chunks.shift();
      else this.chunks[0] = c.subarray(from + take);
      this.headPos = 0;
    }
    this.chunks.unshift(out);
    return out;
  }

  /** Handles frames in order until none is whole; one request at a time. */
  private async pump(): Promise<void> {
    this.busy = true;
    const run = this.run;
    try {
      for (;;) {
        let frame: Buffer | undefined;
        try {
          frame = this.nextFrame();
        } catch (err) {
          this.appendRun();
          const code = err instanceof ProtocolError ? err.code : ErrorCode.InvalidRequest;
          this.ctx.logger.warn({ remote: this.remote, err: (err as Error).message }, 'bad frame size, closing connection');
          this.socket.end(encodeErrorResponse(code));
          this.socket.destroySoon();
          return;
        }
        if (frame === undefined) break;
        const fireAndForget = handleFireAndForget(this.ctx, this.decoder, frame, run);
        if (fireAndForget !== false) {
          if (fireAndForget !== true) await fireAndForget;
          this.requestDone();
          continue;
        }
        if (this.closed) {
          this.requestDone(); // nobody to answer: skipped
          continue;
        }
        this.appendRun();
        const response = await this.handle(frame);
        if (this.closed) {
          releaseAll(response);
          this.requestDone();
          continue;
        }
        if (response !== undefined) await this.write(response);
        this.requestDone();
      }
      if (run.pending && this.runFlush === undefined) this.runFlush = setImmediate(() => this.appendRun());
      if (this.socket.isPaused() && this.memoryWait === undefined && !this.closed) this.socket.resume();
    } finally {
      this.busy = false;
      if (this.closed) this.finishClose();
    }
  }

  /** A request is done: its large frame's bytes go back to the budget, and the idle clock restarts. */
  private requestDone(): void {
    this.lastRequestMs = Date.now();
    if (this.handling === 0) return;
    this.memory.release(this.handling);
    this.handling = 0;
  }

  /** Appends the fire-and-forget sets received so far. */
  private appendRun(): void {
    if (this.runFlush !== undefined) clearImmediate(this.runFlush);
    this.runFlush = undefined;
    this.run.flush();
  }

  private async handle(frame: Buffer): Promise<ResponsePart[] | undefined> {
    try {
      return await handleRequest(this.ctx, this.decoder, frame);
    } catch (err) {
      this.ctx.logger.error({ remote: this.remote, err }, 'request failed');
      return [encodeErrorResponse(ErrorCode.Unknown)];
    }
  }

  /**
   * Sends a response's parts in order. Buffers up to the next file region are written together
   * (corked); before a region, the connection waits until those bytes have left Node's buffers,
   * then sends the region with {@link sendRegion} (sendfile(2) or read-and-write, SPEC §3 read
   * path), so region bytes never interleave with other writes. Waits for drain at the end when
   * the socket's buffer is full. A region of at most {@link inlineRegionMaxBytes} is copied
   * into the response instead (one read from the page cache, written with the header). Every
   * region is released, sent or not. A failed region send leaves the response half-written, so
   * the connection is closed.
   */
  private async write(given: ResponsePart[]): Promise<void> {
    try {
      const parts = given.map((p) => (Buffer.isBuffer(p) || p.length > inlineRegionMaxBytes ? p : inlineRegion(p)));
      let i = 0;
      while (i < parts.length) {
        let written: Promise<void> | undefined;
        this.socket.cork();
        for (; i < parts.length && Buffer.isBuffer(parts[i]); i++) {
          const b = parts[i] as Buffer;
          written = new Promise<void>((resolve) => this.socket.write(b, () => resolve()));
        }
        this.socket.uncork();
        if (i === parts.length) break;
        const region = parts[i++] as FileRegion;
        if (this.socket.writableLength > 0) {
          // Anything still buffered (this response's header, or the tail of the previous
          // response) goes first: the callback of the last write comes after all earlier ones.
          await (written ?? new Promise<void>((resolve) => this.socket.write(Buffer.alloc(0), () => resolve())));
        }
        if (this.closed || this.socket.destroyed) return;
        await sendRegion(this.socket, region, { path: this.ctx.readPath });
        region.release();
      }
      if (this.socket.writableNeedDrain) await this.drained();
    } catch (err) {
      const code = (err as { code?: string }).code;
      const gone = code === 'ERR_SOCKET_CLOSED' || code === 'EPIPE' || code === 'ECONNRESET';
      this.ctx.logger[gone ? 'debug' : 'error']({ remote: this.remote, err }, 'sending a response failed, closing connection');
      this.socket.destroy();
    } finally {
      for (const p of given) if (!Buffer.isBuffer(p)) p.release();
    }
  }

  private drained(): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        this.socket.off('drain', done);
        this.socket.off('close', done);
        resolve();
      };
      this.socket.on('drain', done);
      this.socket.on('close', done);
    });
  }

  /** Closes the socket now. */
  destroy(): void {
    this.socket.destroy();
  }
}

/**
 * The bytes of a small region, read now; the region is released.
 * @throws Error with code `ERR_KLOG_SHORT_FILE` when the segment file holds fewer bytes than the region
 */
function inlineRegion(region: FileRegion): Buffer {
  try {
    const bytes = region.read(0, region.length);
    if (bytes.length !== region.length) throw Object.assign(new Error(`segment file ended ${region.length - bytes.length} bytes before the region's end`), { code: 'ERR_KLOG_SHORT_FILE' });
    return bytes;
  } finally {
    region.release();
  }
}

/**
 * Closes the connections that have completed no request for `maxIdleMs`
 * (`connections.max.idle.ms`): idle clients, and clients holding a half-sent frame. One log
 * line per connection closed.
 */
export function closeIdle(connections: Iterable<Connection>, maxIdleMs: number, logger: BrokerContext['logger']): void {
  const now = Date.now();
  for (const c of connections) {
    const since = c.idleSinceMs;
    if (since === undefined || now - since < maxIdleMs) continue;
    logger.info({ remote: c.remoteAddress, idleMs: now - since, bufferedBytes: c.heldBytes, maxIdleMs }, 'closing idle connection');
    c.destroy();
  }
}

/**
 * Logs connections refused at `max.connections`: the first at once, then at most one line a
 * second with how many were refused since.
 */
export function refusalLog(logger: BrokerContext['logger'], maxConnections: number): { refused(remote: string): void } {
  let lastLogMs = 0;
  let unlogged = 0;
  return {
    refused(remote: string): void {
      unlogged++;
      const now = Date.now();
      if (now - lastLogMs < 1000) return;
      logger.warn({ remote, refused: unlogged, maxConnections }, 'connection refused: max.connections reached');
      lastLogMs = now;
      unlogged = 0;
    },
  };
}
