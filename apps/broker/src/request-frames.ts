/**
 * The request frames of one connection, for both of the broker's listeners: klog's
 * (connection.ts, docs/design.md §3) and the Kafka listener (kafka/connection.ts,
 * docs/kafka-protocol.md), which both frame requests as `int32 size | request`.
 *
 * Memory (docs/format.md §5, connection limits): every byte read and not yet handled counts
 * against the broker's {@link RequestMemory} (`queued.max.request.bytes`), over all connections
 * of both listeners. A frame larger than {@link largeFrameBytes} is received into one buffer of
 * its size, reserved from the budget when its size prefix arrives; while the budget cannot take
 * it, or is spent, the socket is not read (the client waits in TCP). While a backlog of more
 * than one whole request (`max.request.bytes`) waits, the socket is not read either.
 */
import type { Socket } from 'node:net';
import { bufferView, frameSizeBytes } from '@klog/protocol';
import type { RequestMemory } from './request-memory.js';

/**
 * Frames above this many bytes are received into a buffer of their own, reserved first from the
 * request budget; smaller ones are cut from the chunks the socket delivers.
 */
export const largeFrameBytes = 1024 * 1024;

/**
 * Buffers of {@link pooledFrameBytes} in which frames cut from several chunks are copied together
 * for connections whose handlers keep no view of a frame once it is done (the Kafka listener's:
 * bytes a handler keeps, it copies): taken for a frame, given back when it is done, so that a
 * busy producer's requests are not each a new buffer to collect. At most `maxBuffers` are kept;
 * a frame finding none free gets a new one.
 */
export class FrameBufferPool {
  #free: Buffer[] = [];

  constructor(readonly maxBuffers: number) {}

  /** A buffer of {@link pooledFrameBytes}. */
  take(): Buffer {
    return this.#free.pop() ?? Buffer.allocUnsafeSlow(pooledFrameBytes);
  }

  /** Gives back a buffer from {@link take}, no longer used. */
  give(buf: Buffer): void {
    if (this.#free.length < this.maxBuffers) this.#free.push(buf);
  }
}

/** Bytes of a pooled buffer: a frame not received into its own buffer, with its size prefix. */
const pooledFrameBytes = largeFrameBytes + frameSizeBytes;

/** Frames smaller than this are copied together into a buffer of their own size, not a pooled one. */
const minPooledFrameBytes = 64 * 1024;

/** A large frame being received into its own buffer. */
interface Assembly {
  /** The frame after its size prefix. */
  readonly buf: Buffer;
  /** Bytes of `buf` received so far. */
  filled: number;
}

/** Cuts one socket's byte stream into request frames, within the broker's request memory. */
export class RequestFrames {
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
  /** The pooled buffer the frame being handled lies in, given back when it is done. */
  private pooled: Buffer | undefined;
  /** Cancels the wait for memory while the socket is paused for it. */
  private memoryWait: (() => void) | undefined;
  private closed = false;

  /**
   * Reads `socket` from now on.
   * @param maxFrameBytes largest frame after its size prefix, in bytes (`max.request.bytes`)
   * @param readSize the frame size whose 4-byte prefix is at `buf[at]`; throws (an error the
   *   listener answers as its protocol says) when it is out of bounds
   * @param readable called when whole frames may be waiting: bytes arrived, or memory came back
   * @param pool where frames cut from several chunks are copied together, when the caller keeps
   *   no view of a frame once it calls {@link done}; without it each gets a buffer of its own
   */
  constructor(
    private readonly socket: Socket,
    private readonly memory: RequestMemory,
    private readonly maxFrameBytes: number,
    private readonly readSize: (buf: Buffer, at: number) => number,
    private readonly readable: () => void,
    private readonly pool?: FrameBufferPool,
  ) {
    socket.on('data', (chunk: Buffer) => {
      if (this.closed) return;
      const rest = this.assembly !== undefined ? this.fill(chunk) : chunk;
      if (rest.length > 0) {
        this.chunks.push(rest);
        this.buffered += rest.length;
        memory.add(rest.length);
      }
      // Hold reading while a backlog of at least one whole request waits; resume in idle().
      if (this.buffered > this.maxFrameBytes + frameSizeBytes) socket.pause();
      if (memory.exhausted && this.assembly === undefined) this.waitForMemory();
      this.readable();
    });
  }

  /** Bytes of the request budget this connection holds. */
  get heldBytes(): number {
    return this.buffered + (this.assembly?.buf.length ?? 0) + this.handling;
  }

  /**
   * The next whole frame (after its size prefix), or undefined; throws what `readSize` throws
   * on a bad size. A large frame not yet whole moves into a buffer of its own once the budget
   * takes it. Call {@link done} when the frame is handled.
   */
  next(): Buffer | undefined {
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
    const size = this.readSize(head, at);
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

  /** The frame last taken is handled: a large frame's bytes go back to the budget, a pooled buffer to its pool. */
  done(): void {
    if (this.pooled !== undefined) {
      this.pool!.give(this.pooled);
      this.pooled = undefined;
    }
    if (this.handling === 0) return;
    this.memory.release(this.handling);
    this.handling = 0;
  }

  /** No whole frame is left to handle: the socket is read again unless memory is awaited. */
  idle(): void {
    if (this.socket.isPaused() && this.memoryWait === undefined && !this.closed) this.socket.resume();
  }

  /** The connection closed: gives back every byte it holds and drops its buffers. */
  close(): void {
    this.closed = true;
    this.memoryWait?.();
    this.memoryWait = undefined;
    this.memory.release(this.heldBytes);
    this.chunks = [];
    this.buffered = 0;
    this.headPos = 0;
    this.assembly = undefined;
    this.handling = 0;
    this.pooled = undefined;
  }

  /** Stops reading until the budget has room again (then reads and cuts frames again). */
  private waitForMemory(): void {
    if (this.memoryWait !== undefined || this.closed || this.socket.destroyed) return;
    this.socket.pause();
    this.memoryWait = this.memory.whenReleased(() => {
      this.memoryWait = undefined;
      if (this.closed) return;
      if (this.memory.exhausted) return this.waitForMemory();
      this.readable();
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
   * one new chunk in front of the rest; the bytes after them are not copied. A whole frame of at
   * least {@link minPooledFrameBytes} goes into a buffer of the pool, when there is one (the frame
   * is cut from it at once, and handed back by {@link done}).
   */
  private coalesce(bytes: number): Buffer {
    const pooled = this.pool !== undefined && bytes >= minPooledFrameBytes && bytes <= pooledFrameBytes ? (this.pooled = this.pool.take()) : undefined;
    const out = pooled === undefined ? Buffer.allocUnsafe(bytes) : pooled.subarray(0, bytes);
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
}
