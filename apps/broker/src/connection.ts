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
 */
import type { Socket } from 'node:net';
import { ErrorCode, ProtocolError, bufferView, encodeErrorResponse, frameSizeBytes, readFrameSize } from '@klog/protocol';
import { inlineRegionMaxBytes, sendRegion, type FileRegion } from '@klog/storage';
import { handleFireAndForget, handleRequest, ProduceRun, type BrokerContext, type ResponsePart } from './handlers/index.js';

/** Releases the file regions of a response that will not be sent. */
function releaseAll(parts: ResponsePart[] | undefined): void {
  for (const p of parts ?? []) if (!Buffer.isBuffer(p)) p.release();
}

/** Serves one socket until it closes. */
export class Connection {
  /** Received bytes not yet cut into frames: `chunks[0]` from `headPos` on, then the others whole. */
  private chunks: Buffer[] = [];
  /** Bytes of `chunks[0]` already cut into frames (kept as a position: a view per frame would cost more). */
  private headPos = 0;
  /** Total bytes not yet cut into frames. */
  private buffered = 0;
  /** True while a request is being handled; later frames wait their turn. */
  private busy = false;
  private closed = false;
  /** The broker's context, with `closing` also aborted when this connection closes. */
  private readonly ctx: BrokerContext;
  /** Fire-and-forget message sets received and not yet appended. */
  private readonly run: ProduceRun;
  /** Set while a `setImmediate` that appends `run` is pending. */
  private runFlush: NodeJS.Immediate | undefined;

  constructor(
    broker: BrokerContext,
    private readonly socket: Socket,
  ) {
    const gone = new AbortController();
    this.ctx = { ...broker, closing: AbortSignal.any([broker.closing, gone.signal]) };
    const ctx = this.ctx;
    this.run = new ProduceRun(ctx);
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      this.chunks.push(chunk);
      this.buffered += chunk.length;
      // Hold reading while a backlog of at least one whole request waits; resume in pump().
      if (this.buffered > ctx.config.maxRequestBytes + frameSizeBytes) socket.pause();
      if (!this.busy) void this.pump();
    });
    socket.on('error', (err) => ctx.logger.debug({ remote: this.remote, err: err.message }, 'connection error'));
    socket.on('close', () => {
      this.appendRun();
      this.closed = true;
      gone.abort(); // a long-poll fetch of this connection stops waiting
    });
  }

  private get remote(): string {
    return `${this.socket.remoteAddress}:${this.socket.remotePort}`;
  }

  /** The next whole frame (after its size prefix), or undefined; throws ProtocolError on a bad size. */
  private nextFrame(): Buffer | undefined {
    if (this.buffered < frameSizeBytes) return undefined;
    let head = this.chunks[0]!;
    if (head.length - this.headPos < frameSizeBytes) head = this.coalesce(frameSizeBytes);
    const at = this.headPos;
    const size = readFrameSize(head, at, this.ctx.config.maxRequestBytes)!;
    const total = frameSizeBytes + size;
    if (this.buffered < total) return undefined;
    if (head.length - at < total) head = this.coalesce(total);
    const start = this.headPos;
    const frame = bufferView(head, start + frameSizeBytes, start + total);
    if (head.length - start > total) this.headPos = start + total;
    else {
      this.chunks.shift();
      this.headPos = 0;
    }
    this.buffered -= total;
    return frame;
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
        if (frame === undefined || this.closed) break;
        if (handleFireAndForget(this.ctx, frame, run)) continue;
        this.appendRun();
        const response = await this.handle(frame);
        if (this.closed) {
          releaseAll(response);
          break;
        }
        if (response !== undefined) await this.write(response);
      }
      if (run.pending && this.runFlush === undefined) this.runFlush = setImmediate(() => this.appendRun());
      if (this.socket.isPaused()) this.socket.resume();
    } finally {
      this.busy = false;
    }
  }

  /** Appends the fire-and-forget sets received so far. */
  private appendRun(): void {
    if (this.runFlush !== undefined) clearImmediate(this.runFlush);
    this.runFlush = undefined;
    this.run.flush();
  }

  private async handle(frame: Buffer): Promise<ResponsePart[] | undefined> {
    try {
      return await handleRequest(this.ctx, frame);
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
