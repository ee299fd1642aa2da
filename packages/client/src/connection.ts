/**
 * One TCP connection to one broker (docs/design.md §3): Nagle off, requests framed by
 * @klog/protocol, responses matched to requests in the order they were sent (a broker answers
 * the requests of one connection in order). Three write operations: {@link Connection.request}
 * for a request that gets a response, {@link Connection.send} for one that does not (PRODUCE,
 * MULTIPRODUCE), and {@link Connection.reserveFrame} for room to write a frame in place.
 *
 * Requests are pipelined: each is queued in call order and the queue is handed to the socket
 * once the caller's synchronous work is done (a microtask later) or once it holds
 * {@link coalesceBytes}, so many requests leave in one write (one system call) instead of one
 * each. Frames reserved one after another with {@link Connection.reserveFrame} are contiguous and
 * go out as one buffer; others together in one vectored write.
 *
 * Responses are read straight into a receive buffer sized for the frame being received (the
 * socket's `onread` option), and each whole frame is handed out as a view on it: a 1 MiB fetch
 * response is not copied after the kernel put it there (only the start of a frame that arrived
 * behind the previous one is moved, once, into a buffer of its size).
 *
 * Requests waiting for a response are a FIFO ring ({@link PendingRequests}): answering one, or
 * starting its clock once it is written, costs no scan and no closure. The request timeout is one
 * timer per connection, armed for the earliest deadline of the written requests; it is not moved
 * when a response arrives, and when it fires it fails the connection if a request is past its
 * deadline, else re-arms for the earliest one. A request that waits fails with the same error as
 * with a timer of its own: "no response within N ms; connection closed".
 *
 * The socket is opened on first use and again on the first use after it closed, so a broker
 * restart costs the requests that were waiting, not the Connection.
 */
import { type OnReadOpts, Socket, type SocketConstructorOpts } from 'node:net';
import { performance } from 'node:perf_hooks';
import { bufferView, type Decoder, frameSizeBytes, openFrame, readFrameSize } from '@klog/protocol';
import { KlogConnectionError } from './errors.js';
import { PendingRequests } from './pending-requests.js';

/** Options of a {@link Connection}. */
export interface ConnectionOptions {
  readonly host: string;
  readonly port: number;
  /** Most ms to wait for the TCP connection to open. Default 10,000. */
  readonly connectTimeoutMs?: number;
  /** Most ms to wait for a response (beyond any long-poll wait the request asks for). Default 30,000. */
  readonly requestTimeoutMs?: number;
  /** Largest response frame accepted, in bytes; a larger size prefix closes the connection. Default 128 MiB. */
  readonly maxResponseBytes?: number;
}

/** A response: its error code and a decoder over its body. */
export interface Response {
  readonly errorCode: number;
  readonly body: Decoder;
}

/** Default most ms to wait for a response. */
export const defaultRequestTimeoutMs = 30_000;
/** Default most ms to wait for a connection to open. */
export const defaultConnectTimeoutMs = 10_000;
/** Default largest response frame, in bytes. */
export const defaultMaxResponseBytes = 128 * 1024 * 1024;
/** Smallest free space, in bytes, the receive buffer offers a read; with less, reading goes on in a new buffer. */
const minReadBytes = 16 * 1024;
/** Bytes of a receive buffer beyond the frame it is made for (room for the start of the next frames), and of one made for no frame. */
const receiveSlackBytes = 64 * 1024;

/** Queued request bytes that are handed to the socket at once, without waiting for the microtask. */
export const coalesceBytes = 256 * 1024;
/** Bytes of each slab {@link Connection.reserveFrame} carves frames from; larger frames get a slab of their own. */
export const frameSlabBytes = 1024 * 1024;
/** Largest frame, in bytes, that {@link Connection.reserveFrame} carves from a shared slab. */
export const maxSlabFrameBytes = frameSlabBytes / 4;

/** Called once a queued frame has been handed to the operating system, or with the error that stopped it. */
export type WrittenCallback = (err?: Error) => void;

/** Queued frames that are contiguous in one ArrayBuffer: one write. */
interface OutRun {
  readonly memory: ArrayBufferLike;
  readonly start: number;
  end: number;
  /**
   * The callbacks of the frames of the run, in order: those of `earlier` (undefined while
   * there are none), then `last` for each of the last `lastTimes` frames. A sender that passes
   * one callback for many frames costs a count, not an entry per frame.
   */
  earlier: WrittenCallback[] | undefined;
  last: WrittenCallback;
  lastTimes: number;
}

/** What {@link Connection.frameSlab} is before the first slab. */
const emptyBuffer = Buffer.alloc(0);

/** The written callback of a frame whose sender does not wait for it. */
function ignoreWritten(): void {}

/** Calls the callback of every frame of `run`, in order. */
function callBack(run: OutRun, err: Error | undefined): void {
  const { earlier, last } = run;
  if (earlier !== undefined) for (const cb of earlier) cb(err);
  for (let i = run.lastTimes; i > 0; i--) last(err);
}

/** A request/response channel to one broker. Not safe to share across processes; fine to share across callers. */
export class Connection {
  /** `host:port`, for messages. */
  readonly address: string;
  private readonly host: string;
  private readonly port: number;
  private readonly connectTimeoutMs: number;
  private readonly requestTimeoutMs: number;
  private readonly maxResponseBytes: number;

  /** The open (or opening) socket; undefined before first use and after it closed. */
  private socket: Socket | undefined;
  /** Resolves once `socket` is connected. */
  private connecting: Promise<Socket> | undefined;
  /** Requests queued or written and waiting for their response, oldest first. */
  private readonly pending = new PendingRequests<Response>();
  /**
   * Request frames of the current socket whose written callback has come, less the responses
   * received: the next written callback is that of `pending.at(writtenAhead)` (negative when a
   * response came before its request's written callback).
   */
  private writtenAhead = 0;
  /** The written callback of every request frame of the current socket (see {@link open}). */
  private requestWritten: WrittenCallback = ignoreWritten;
  /**
   * The one request-timeout timer of the connection, armed for `timerAt` (`performance.now()`
   * ms), at or before the earliest deadline of the written requests; undefined while none waits.
   */
  private timer: NodeJS.Timeout | undefined;
  private timerAt = 0;
  /** The receive buffer: bytes arrive at `rxEnd`; `[rxStart, rxEnd)` is the start of frames not yet whole. */
  private rx: Buffer = Buffer.alloc(0);
  private rxStart = 0;
  private rxEnd = 0;
  /** Set by close(): no further use. */
  private closed = false;
  /** Frames queued for the socket, in call order. */
  private out: OutRun[] = [];
  /** Bytes in `out`. */
  private outBytes = 0;
  /** True while a microtask that writes `out` is pending. */
  private writeScheduled = false;
  /** The slab reserveFrame carves from, and how much of it is used. */
  private slab: Buffer | undefined;
  private slabUsed = 0;
  /** The ArrayBuffer of `slab` and where `slab` starts in it: read once per slab, not once per frame. */
  private slabMemory: ArrayBufferLike | undefined;
  private slabOffset = 0;

  constructor(options: ConnectionOptions) {
    this.address = `${options.host}:${options.port}`;
    this.host = options.host;
    this.port = options.port;
    this.connectTimeoutMs = options.connectTimeoutMs ?? defaultConnectTimeoutMs;
    this.requestTimeoutMs = options.requestTimeoutMs ?? defaultRequestTimeoutMs;
    this.maxResponseBytes = options.maxResponseBytes ?? defaultMaxResponseBytes;
  }

  /** Requests waiting for a response. */
  get inFlight(): number {
    return this.pending.length;
  }

  /**
   * Queues a framed request that gets a response and resolves with that response.
   * @param frame a whole request frame (size prefix included), as the encode functions of @klog/protocol make
   * @param extraWaitMs ms the broker may legitimately hold the request (a long-poll fetch's maxWaitMs), added to the request timeout
   * @throws KlogConnectionError when the connection cannot be opened, closes first, or the response takes longer than the timeout
   */
  request(frame: Buffer, extraWaitMs = 0): Promise<Response> {
    return new Promise<Response>((resolve, reject) => {
      if (this.closed) {
        reject(new KlogConnectionError(this.address, 'connection is closed'));
        return;
      }
      // The socket first, so that the frame gets this socket's written callback.
      if (this.socket === undefined) this.openInBackground();
      this.pending.push({ resolve, reject, timeoutMs: this.requestTimeoutMs + extraWaitMs, deadline: Infinity });
      // The clock starts when the request is handed to the socket; a failed write fails it through fail().
      this.enqueueBytes(frame.buffer, frame.byteOffset, frame.length, this.requestWritten);
    });
  }

  /**
   * Queues a framed request that gets no response (PRODUCE, MULTIPRODUCE): either `frame`, a
   * whole frame in a buffer of its own, or the `bytes` bytes at position `at` of
   * {@link frameSlab}, which {@link reserveFrame} reserved and the caller wrote since.
   * `written` is called once: with no argument once the bytes have been handed to the
   * operating system (so waiting for it bounds the bytes queued in this process), or with a
   * KlogConnectionError when the connection cannot be opened, is closed (then in a microtask)
   * or fails first. Frames, reserved or not, leave in the order they were queued.
   */
  send(frame: Buffer, written?: WrittenCallback): void;
  send(at: number, bytes: number, written: WrittenCallback): void;
  send(frame: Buffer | number, a?: number | WrittenCallback, b?: WrittenCallback): void {
    const written = (typeof frame === 'number' ? b : (a as WrittenCallback | undefined)) ?? ignoreWritten;
    if (this.closed) {
      const err = new KlogConnectionError(this.address, 'connection is closed');
      queueMicrotask(() => written(err));
      return;
    }
    if (typeof frame === 'number') this.enqueueBytes(this.slabMemory!, this.slabOffset + frame, a as number, written);
    else this.enqueueBytes(frame.buffer, frame.byteOffset, frame.length, written);
  }

  /**
   * Reserves room for one outgoing frame of `bytes` bytes in {@link frameSlab}, after the
   * previous frame, so that frames written into consecutive reservations and queued in the
   * same order leave in one write without being copied together (and without a Buffer per
   * frame, which costs more than a small frame's bytes). A frame over {@link maxSlabFrameBytes}
   * gets a slab of its own.
   * @returns the position in {@link frameSlab} where the frame goes; write it there and queue it
   *   with {@link send} (or hand `frameSlab.subarray(at, at + bytes)` to {@link request}) before
   *   the next reserveFrame call, which may start a new slab. Its contents are undefined until written.
   */
  reserveFrame(bytes: number): number {
    if (bytes > maxSlabFrameBytes) {
      this.useSlab(Buffer.allocUnsafeSlow(bytes));
      this.slabUsed = bytes;
      return 0;
    }
    if (this.slab === undefined || this.slab.length - this.slabUsed < bytes) this.useSlab(Buffer.allocUnsafeSlow(frameSlabBytes));
    const at = this.slabUsed;
    this.slabUsed += bytes;
    return at;
  }

  /** The slab of the last {@link reserveFrame} call (its contents undefined where not written); empty before the first. */
  get frameSlab(): Buffer {
    return this.slab ?? emptyBuffer;
  }

  private useSlab(slab: Buffer): void {
    this.slab = slab;
    this.slabUsed = 0;
    this.slabMemory = slab.buffer;
    this.slabOffset = slab.byteOffset;
  }

  /** Bytes queued and not yet handed to the socket. */
  get queuedBytes(): number {
    return this.outBytes;
  }

  /** Queues the frame of `length` bytes at `start` of `memory` behind the frames queued before it, opening the socket when needed. */
  private enqueueBytes(memory: ArrayBufferLike, start: number, length: number, written: WrittenCallback): void {
    const last = this.out[this.out.length - 1];
    if (last !== undefined && last.memory === memory && last.end === start) {
      last.end += length;
      if (last.last === written) last.lastTimes++;
      else {
        const earlier = (last.earlier ??= []);
        for (let i = last.lastTimes; i > 0; i--) earlier.push(last.last);
        last.last = written;
        last.lastTimes = 1;
      }
    } else {
      this.out.push({ memory, start, end: start + length, earlier: undefined, last: written, lastTimes: 1 });
    }
    this.outBytes += length;
    if (this.socket === undefined) this.openInBackground();
    if (this.outBytes >= coalesceBytes) this.writeQueued();
    else if (!this.writeScheduled) {
      this.writeScheduled = true;
      queueMicrotask(() => {
        this.writeScheduled = false;
        this.writeQueued();
      });
    }
  }

  /** Hands the queued frames to the socket once it is connected (the 'connect' handler calls this again). */
  private writeQueued(): void {
    const socket = this.socket;
    if (socket === undefined || socket.connecting || this.out.length === 0) return;
    const runs = this.out;
    this.out = [];
    this.outBytes = 0;
    if (runs.length > 1) socket.cork();
    for (const run of runs) {
      socket.write(Buffer.from(run.memory, run.start, run.end - run.start), (err?: Error | null) => {
        callBack(run, err ? new KlogConnectionError(this.address, `write failed: ${err.message}`, { cause: err }) : undefined);
      });
    }
    if (runs.length > 1) socket.uncork();
  }

  /** Closes the socket; waiting requests fail with KlogConnectionError. The Connection cannot be used again. */
  async close(): Promise<void> {
    this.closed = true;
    const socket = this.socket;
    this.fail(new KlogConnectionError(this.address, 'connection closed by the client'));
    if (socket && !socket.destroyed) {
      await new Promise<void>((resolve) => {
        socket.once('close', () => resolve());
        socket.end();
        setTimeout(() => socket.destroy(), 1000).unref();
      });
    }
  }

  /** The next request frame of the socket has been handed to the operating system (or failed to be): its clock starts. */
  private written(failed: boolean): void {
    const p = this.pending.at(this.writtenAhead++);
    if (p === undefined || failed) return;
    const deadline = performance.now() + p.timeoutMs;
    p.deadline = deadline;
    if (this.timer === undefined || deadline < this.timerAt) this.armTimer(deadline);
  }

  /** (Re)arms the request-timeout timer for `deadline` (`performance.now()` ms). */
  private armTimer(deadline: number): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timerAt = deadline;
    this.timer = setTimeout(this.onTimer, Math.max(1, Math.ceil(deadline - performance.now())));
  }

  /** The timer is due: fails the connection if a written request is past its deadline, else re-arms for the earliest deadline. */
  private readonly onTimer = (): void => {
    this.timer = undefined;
    const p = this.pending.earliestDeadline();
    if (p === undefined) return;
    if (p.deadline <= performance.now()) this.fail(new KlogConnectionError(this.address, `no response within ${p.timeoutMs} ms; connection closed`));
    else this.armTimer(p.deadline);
  };

  private openInBackground(): void {
    this.open().catch(() => {
      // fail() has reported the error to every queued frame and waiting request.
    });
  }

  private open(): Promise<Socket> {
    if (this.closed) return Promise.reject(new KlogConnectionError(this.address, 'connection is closed'));
    if (this.connecting) return this.connecting;
    this.connecting = new Promise<Socket>((resolve, reject) => {
      // `onread` is read by the net.Socket constructor, though @types/node lists it for connect() only.
      const onread: OnReadOpts = {
        buffer: () => this.readBuffer(),
        callback: (n: number) => {
          this.onRead(socket, n);
          return true;
        },
      };
      const socket = new Socket({ onread } as SocketConstructorOpts);
      this.socket = socket;
      // Written callbacks of an earlier socket (which fail() has settled) do not count for this one.
      this.writtenAhead = 0;
      this.requestWritten = (err) => {
        if (this.socket === socket) this.written(err !== undefined);
      };
      socket.setNoDelay(true);
      const timer = setTimeout(() => {
        socket.destroy(new Error(`connect timed out after ${this.connectTimeoutMs} ms`));
      }, this.connectTimeoutMs);
      let connected = false;
      socket.once('connect', () => {
        connected = true;
        clearTimeout(timer);
        resolve(socket);
        this.writeQueued();
      });
      socket.on('error', () => {
        // 'close' follows and reports; this handler keeps the error from being thrown.
      });
      let connectError: Error | undefined;
      socket.once('close', (hadError) => {
        clearTimeout(timer);
        const why = connected ? (hadError ? 'connection failed' : 'connection closed by the broker') : `cannot connect${connectError ? `: ${connectError.message}` : ''}`;
        const err = new KlogConnectionError(this.address, why, connectError ? { cause: connectError } : undefined);
        if (!connected) reject(err);
        // After fail() or a reconnect this socket is no longer ours and its requests are already settled.
        if (this.socket === socket) this.fail(err);
      });
      socket.once('error', (e) => {
        if (!connected) {
          connectError = e;
          reject(new KlogConnectionError(this.address, `cannot connect: ${e.message}`, { cause: e }));
        }
      });
      socket.connect(this.port, this.host);
    });
    return this.connecting;
  }

  /** Fails every waiting request and every queued frame with `err` and drops the socket. */
  private fail(err: Error): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    for (const p of this.pending.drain()) p.reject(err);
    const queued = this.out;
    this.out = [];
    this.outBytes = 0;
    for (const run of queued) callBack(run, err);
    this.writtenAhead = 0;
    const socket = this.socket;
    if (socket) {
      this.socket = undefined;
      this.connecting = undefined;
      this.rx = Buffer.alloc(0);
      this.rxStart = 0;
      this.rxEnd = 0;
      socket.destroy();
    }
  }

  /** Where the next read puts its bytes: the free end of the receive buffer, or a new one. */
  private readBuffer(): Buffer {
    if (this.rx.length - this.rxEnd < minReadBytes) this.moveTo(receiveSlackBytes);
    return this.rx.subarray(this.rxEnd);
  }

  /**
   * Moves the unfinished frame `[rxStart, rxEnd)` to the start of a new receive buffer with
   * room for `bytes` from there plus {@link receiveSlackBytes} (the buffer before it stays with
   * the frames already handed out).
   */
  private moveTo(bytes: number): void {
    const pending = this.rxEnd - this.rxStart;
    const next = Buffer.allocUnsafe(Math.max(bytes, pending) + receiveSlackBytes);
    this.rx.copy(next, 0, this.rxStart, this.rxEnd);
    this.rx = next;
    this.rxStart = 0;
    this.rxEnd = pending;
  }

  /** `n` bytes arrived at `rxEnd`: hands out every whole frame, and makes room for the rest of a partial one. */
  private onRead(socket: Socket, n: number): void {
    this.rxEnd += n;
    while (this.socket === socket && this.rxEnd - this.rxStart >= frameSizeBytes) {
      let size: number;
      try {
        size = readFrameSize(this.rx, this.rxStart, this.maxResponseBytes)!;
      } catch (e) {
        this.fail(new KlogConnectionError(this.address, `bad response frame: ${(e as Error).message}`));
        return;
      }
      const total = frameSizeBytes + size;
      if (this.rxEnd - this.rxStart < total) {
        // The rest of the frame is read straight into place.
        if (this.rxStart + total > this.rx.length) this.moveTo(total);
        return;
      }
      const frame = bufferView(this.rx, this.rxStart + frameSizeBytes, this.rxStart + total);
      this.rxStart += total;
      this.deliver(frame);
    }
  }

  private deliver(frame: Buffer): void {
    const p = this.pending.shift();
    if (!p) {
      this.fail(new KlogConnectionError(this.address, 'response received with no request waiting for it'));
      return;
    }
    this.writtenAhead--;
    if (this.pending.length === 0 && this.timer !== undefined) {
      // Idle: no timer keeps the process alive.
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    try {
      const { head, body } = openFrame(frame);
      p.resolve({ errorCode: head, body });
    } catch (e) {
      p.reject(new KlogConnectionError(this.address, `bad response: ${(e as Error).message}`));
    }
  }
}
