/**
 * One client connection: cuts the byte stream into request frames (SPEC §3) and answers them
 * one at a time, in order. A frame whose size prefix is out of bounds cannot be skipped
 * safely, so it gets an InvalidRequest response and the connection is closed; every other bad
 * request gets an error response and the connection goes on.
 */
import type { Socket } from 'node:net';
import { ErrorCode, ProtocolError, encodeErrorResponse, frameSizeBytes, readFrameSize } from '@klog/protocol';
import { handleRequest, type BrokerContext } from './handlers/index.js';

/** Serves one socket until it closes. */
export class Connection {
  /** Received bytes not yet cut into frames. */
  private chunks: Buffer[] = [];
  /** Total bytes in `chunks`. */
  private buffered = 0;
  /** True while a request is being handled; later frames wait their turn. */
  private busy = false;
  private closed = false;

  constructor(
    private readonly ctx: BrokerContext,
    private readonly socket: Socket,
  ) {
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
      this.closed = true;
    });
  }

  private get remote(): string {
    return `${this.socket.remoteAddress}:${this.socket.remotePort}`;
  }

  /** The next whole frame (after its size prefix), or undefined; throws ProtocolError on a bad size. */
  private nextFrame(): Buffer | undefined {
    if (this.buffered < frameSizeBytes) return undefined;
    let head = this.chunks[0]!;
    if (head.length < frameSizeBytes) head = this.coalesce();
    const size = readFrameSize(head, 0, this.ctx.config.maxRequestBytes)!;
    if (this.buffered < frameSizeBytes + size) return undefined;
    if (head.length < frameSizeBytes + size) head = this.coalesce();
    const frame = head.subarray(frameSizeBytes, frameSizeBytes + size);
    const rest = head.subarray(frameSizeBytes + size);
    if (rest.length > 0) this.chunks[0] = rest;
    else this.chunks.shift();
    this.buffered -= frameSizeBytes + size;
    return frame;
  }

  private coalesce(): Buffer {
    const all = Buffer.concat(this.chunks, this.buffered);
    this.chunks = [all];
    return all;
  }

  /** Handles frames in order until none is whole; one request at a time. */
  private async pump(): Promise<void> {
    this.busy = true;
    try {
      for (;;) {
        let frame: Buffer | undefined;
        try {
          frame = this.nextFrame();
        } catch (err) {
          const code = err instanceof ProtocolError ? err.code : ErrorCode.InvalidRequest;
          this.ctx.logger.warn({ remote: this.remote, err: (err as Error).message }, 'bad frame size, closing connection');
          this.socket.end(encodeErrorResponse(code));
          this.socket.destroySoon();
          return;
        }
        if (frame === undefined || this.closed) break;
        const response = await this.handle(frame);
        if (this.closed) break;
        if (response !== undefined) await this.write(response);
      }
      if (this.socket.isPaused()) this.socket.resume();
    } finally {
      this.busy = false;
    }
  }

  private async handle(frame: Buffer): Promise<Buffer[] | undefined> {
    try {
      return await handleRequest(this.ctx, frame);
    } catch (err) {
      this.ctx.logger.error({ remote: this.remote, err }, 'request failed');
      return [encodeErrorResponse(ErrorCode.Unknown)];
    }
  }

  /** Writes a response's buffers together; waits for drain when the socket's buffer is full. */
  private async write(buffers: Buffer[]): Promise<void> {
    this.socket.cork();
    for (const b of buffers) this.socket.write(b);
    this.socket.uncork();
    if (this.socket.writableNeedDrain) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          this.socket.off('drain', done);
          this.socket.off('close', done);
          resolve();
        };
        this.socket.on('drain', done);
        this.socket.on('close', done);
      });
    }
  }

  /** Closes the socket now. */
  destroy(): void {
    this.socket.destroy();
  }
}
