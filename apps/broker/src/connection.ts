/**
 * One client connection: cuts the byte stream into request frames (docs/design.md §3) and answers them
 * in order, one at a time except PRODUCE_ACKs. A frame whose size prefix is out of bounds cannot be skipped
 * safely, so it gets an InvalidRequest response and the connection is closed; every other bad
 * request gets an error response and the connection goes on. Fetch responses carry file regions
 * that `write` sends after the header with the broker's read path (docs/design.md §3).
 *
 * Fire-and-forget produce requests have no response, so they are handled without waiting: their
 * message sets go to the connection's {@link ProduceRun}, which is appended before the next
 * request that has a response is handled (so appends stay in arrival order), or once the reads
 * of this turn of the event loop are done (`setImmediate`): the sets of several reads of 64 KiB
 * then go to the log in one write.
 *
 * PRODUCE_ACK requests are pipelined: each is appended in turn, and the next frame is taken as
 * soon as its sets are in the log, while its answer waits for its ack level (the flush, or the
 * high watermark for acks all) and is written in order after the answers before it. The sets
 * of many requests then share one flush and, on a replicated partition, one round of follower
 * fetches, instead of one each. At most {@link maxPipelinedResponses} answers wait at once; any
 * other request is handled once every answer before it is written, as before.
 *
 * Memory (docs/format.md §5, connection limits): the frames are cut by {@link RequestFrames},
 * within the broker's request memory (`queued.max.request.bytes`). A connection that completes
 * no request for `connections.max.idle.ms` is closed ({@link Connection.idleSinceMs},
 * connection-limits.ts).
 */
import type { Socket } from 'node:net';
import { ErrorCode, ProtocolError, RequestDecoder, encodeErrorResponse, readFrameSize } from '@klog/protocol';
import { inlineRegionMaxBytes, sendRegion, type FileRegion } from '@klog/storage';
import { handleFireAndForget, handleRequest, ProduceRun, startProduceAck, type BrokerContext, type ResponsePart } from './handlers/index.js';
import type { LimitedConnection } from './connection-limits.js';
import { OrderedAnswers } from './ordered-answers.js';
import { RequestFrames } from './request-frames.js';
import type { RequestMemory } from './request-memory.js';


/**
 * Most bytes of a run of response buffers copied into one buffer for a single write (a fetch
 * answer's header and an inlined region): one write costs less than a corked writev of two, and
 * copying this much costs less than the difference.
 */
const coalescedWriteMaxBytes = inlineRegionMaxBytes + 64;

/** Releases the file regions of a response that will not be sent. */
function releaseAll(parts: ResponsePart[] | undefined): void {
  for (const p of parts ?? []) if (!Buffer.isBuffer(p)) p.release();
}


/** Most PRODUCE_ACK answers of one connection waiting for their ack level at once; the next frame waits for room. */
export const maxPipelinedResponses = 1024;

/** Serves one socket until it closes. */
export class Connection implements LimitedConnection {
  /** The request frames read from the socket. */
  private readonly frames: RequestFrames;
  /** True while a request is being handled; later frames wait their turn. */
  private busy = false;
  private closed = false;
  /** PRODUCE_ACK answers started and not yet written (or dropped on close), in request order. */
  private readonly pipelined: OrderedAnswers<ResponsePart[]>;
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
    memory: RequestMemory,
  ) {
    const gone = new AbortController();
    this.ctx = { ...broker, closing: AbortSignal.any([broker.closing, gone.signal]) };
    const ctx = this.ctx;
    this.run = new ProduceRun(ctx);
    this.pipelined = new OrderedAnswers<ResponsePart[]>(maxPipelinedResponses, {
      write: (parts) => this.writePipelined(parts),
      // Neither an answer of startProduceAck nor write rejects: a failure here is a bug, and the
      // client would take the answers after it for the wrong requests.
      failed: (err) => {
        this.ctx.logger.error({ remote: this.remote, err }, 'a pipelined answer failed, closing connection');
        this.socket.destroy();
      },
    });
    socket.setNoDelay(true);
    const maxFrameBytes = ctx.config.maxRequestBytes;
    this.frames = new RequestFrames(socket, memory, maxFrameBytes, (buf, at) => readFrameSize(buf, at, maxFrameBytes)!, () => {
      if (!this.busy && !this.closed) void this.pump();
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
    return this.busy || this.pipelined.waiting > 0 ? undefined : this.lastRequestMs;
  }

  /** Bytes of the request budget this connection holds. */
  get heldBytes(): number {
    return this.frames.heldBytes;
  }

  /** Appends what the connection gathered, gives back every byte it holds and drops its buffers. */
  private finishClose(): void {
    this.appendRun();
    this.frames.close();
  }


  private get remote(): string {
    return `${this.socket.remoteAddress}:${this.socket.remotePort}`;
  }

  /** `address:port` of the client. */
  get remoteAddress(): string {
    return this.remote;
  }


  /** Handles frames in order until none is whole; one request at a time. */
  private async pump(): Promise<void> {
    this.busy = true;
    const run = this.run;
    try {
      for (;;) {
        let frame: Buffer | undefined;
        try {
          frame = this.frames.next();
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
        while (this.pipelined.full) await this.pipelined.allWritten;
        const started = startProduceAck(this.ctx, this.decoder, frame);
        if (started !== false) {
          const { response } = await started;
          // Appended: the frame's bytes are no longer needed; the answer is written in turn.
          this.requestDone();
          this.pipelined.add(response);
          continue;
        }
        if (this.pipelined.waiting > 0) await this.pipelined.allWritten;
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
      this.frames.idle();
    } finally {
      this.busy = false;
      if (this.closed) this.finishClose();
    }
  }

  /** Writes a pipelined answer whose turn came, or drops it when the connection closed; the idle clock restarts. */
  private async writePipelined(parts: ResponsePart[]): Promise<void> {
    try {
      if (this.closed) releaseAll(parts);
      else await this.write(parts);
    } finally {
      this.lastRequestMs = Date.now();
    }
  }

  /** A request is done: its large frame's bytes go back to the budget, and the idle clock restarts. */
  private requestDone(): void {
    this.lastRequestMs = Date.now();
    this.frames.done();
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
   * Sends a response's parts in order. Buffers up to the next file region are written together:
   * as one write when they are small (a fetch answer of a small region: header and bytes), else
   * corked. Before a region, the connection waits until those bytes have left Node's buffers,
   * then sends the region with {@link sendRegion} (sendfile(2) or read-and-write, docs/design.md
   * §3 read path), so region bytes never interleave with other writes; buffers after the last
   * region are not waited for. Waits for drain at the end when the socket's buffer is full. A
   * region of at most {@link inlineRegionMaxBytes} is copied into the response instead (one read
   * from the page cache, shared with the fetch's check of its first message). Every region is
   * released, sent or not. A failed region send leaves the response half-written, so the
   * connection is closed.
   */
  private async write(given: ResponsePart[]): Promise<void> {
    try {
      const parts = given.map((p) => (Buffer.isBuffer(p) || p.length > inlineRegionMaxBytes ? p : inlineRegion(p)));
      for (let i = 0; i < parts.length; ) {
        const from = i;
        while (i < parts.length && Buffer.isBuffer(parts[i])) i++;
        if (i === parts.length) {
          this.writeBuffers(parts as Buffer[], from, i);
          break;
        }
        const written = i > from ? new Promise<void>((resolve) => this.writeBuffers(parts as Buffer[], from, i, resolve)) : undefined;
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

  /**
   * Writes `parts[from, to)` (at least one): copied into one buffer when together they are at
   * most {@link coalescedWriteMaxBytes}, else corked; `done` is called once all have been written.
   */
  private writeBuffers(parts: readonly Buffer[], from: number, to: number, done?: () => void): void {
    const socket = this.socket;
    if (to - from === 1) {
      socket.write(parts[from]!, done);
      return;
    }
    let bytes = 0;
    for (let i = from; i < to; i++) bytes += parts[i]!.length;
    if (bytes <= coalescedWriteMaxBytes) {
      socket.write(Buffer.concat(parts.slice(from, to), bytes), done);
      return;
    }
    socket.cork();
    for (let i = from; i < to; i++) socket.write(parts[i]!, i === to - 1 ? done : undefined);
    socket.uncork();
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

