/**
 * One TCP connection to one broker (SPEC §3): Nagle off, requests framed by @klog/protocol,
 * responses matched to requests in the order they were sent (a broker answers the requests of
 * one connection in order). Requests that get no response (PRODUCE, MULTIPRODUCE) are written
 * with {@link Connection.send}; requests that do, with {@link Connection.request}.
 *
 * The socket is opened on first use and again on the first use after it closed, so a broker
 * restart costs the requests that were waiting, not the Connection.
 */
import { Socket } from 'node:net';
import { type Decoder, frameSizeBytes, openFrame, readFrameSize } from '@klog/protocol';
import { KlogConnectionError } from './errors.js';

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

interface Pending {
  readonly resolve: (r: Response) => void;
  readonly reject: (e: Error) => void;
  readonly timeoutMs: number;
  timer?: NodeJS.Timeout;
}

/** Default most ms to wait for a response. */
export const defaultRequestTimeoutMs = 30_000;
/** Default most ms to wait for a connection to open. */
export const defaultConnectTimeoutMs = 10_000;
/** Default largest response frame, in bytes. */
export const defaultMaxResponseBytes = 128 * 1024 * 1024;

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
  /** Requests written and waiting for their response, oldest first. */
  private readonly pending: Pending[] = [];
  /** Received bytes not yet part of a whole frame. */
  private chunks: Buffer[] = [];
  /** Total bytes in `chunks`. */
  private buffered = 0;
  /** Set by close(): no further use. */
  private closed = false;

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
   * Writes a framed request that gets a response and resolves with that response.
   * @param frame a whole request frame (size prefix included), as the encode functions of @klog/protocol make
   * @param extraWaitMs ms the broker may legitimately hold the request (a long-poll fetch's maxWaitMs), added to the request timeout
   * @throws KlogConnectionError when the connection cannot be opened, closes first, or the response takes longer than the timeout
   */
  async request(frame: Buffer, extraWaitMs = 0): Promise<Response> {
    const socket = await this.open();
    if (this.socket !== socket || socket.destroyed) throw new KlogConnectionError(this.address, 'connection closed');
    return new Promise<Response>((resolve, reject) => {
      const p: Pending = { resolve, reject, timeoutMs: this.requestTimeoutMs + extraWaitMs };
      this.pending.push(p);
      // The clock starts when the request is handed to the socket.
      socket.write(frame, () => this.arm(p));
    });
  }

  /**
   * Writes a framed request that gets no response (PRODUCE, MULTIPRODUCE). Resolves once the
   * bytes have been handed to the operating system, so awaiting it bounds the bytes queued in
   * this process.
   * @throws KlogConnectionError when the connection cannot be opened or fails while writing
   */
  async send(frame: Buffer): Promise<void> {
    const socket = await this.open();
    await new Promise<void>((resolve, reject) => {
      socket.write(frame, (err) => {
        if (err) reject(new KlogConnectionError(this.address, `write failed: ${err.message}`, { cause: err }));
        else resolve();
      });
    });
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

  private arm(p: Pending): void {
    if (!this.pending.includes(p)) return;
    p.timer = setTimeout(() => {
      this.fail(new KlogConnectionError(this.address, `no response within ${p.timeoutMs} ms; connection closed`));
    }, p.timeoutMs);
  }

  private open(): Promise<Socket> {
    if (this.closed) return Promise.reject(new KlogConnectionError(this.address, 'connection is closed'));
    if (this.connecting) return this.connecting;
    this.connecting = new Promise<Socket>((resolve, reject) => {
      const socket = new Socket();
      this.socket = socket;
      socket.setNoDelay(true);
      const timer = setTimeout(() => {
        socket.destroy(new Error(`connect timed out after ${this.connectTimeoutMs} ms`));
      }, this.connectTimeoutMs);
      let connected = false;
      socket.once('connect', () => {
        connected = true;
        clearTimeout(timer);
        resolve(socket);
      });
      socket.on('data', (chunk: Buffer) => this.onData(chunk));
      socket.on('error', () => {
        // 'close' follows and reports; this handler keeps the error from being thrown.
      });
      socket.once('close', (hadError) => {
        clearTimeout(timer);
        const why = connected ? (hadError ? 'connection failed' : 'connection closed by the broker') : 'cannot connect';
        const err = new KlogConnectionError(this.address, why);
        if (!connected) reject(err);
        // After fail() or a reconnect this socket is no longer ours and its requests are already settled.
        if (this.socket === socket) this.fail(err);
      });
      socket.once('error', (e) => {
        if (!connected) reject(new KlogConnectionError(this.address, `cannot connect: ${e.message}`, { cause: e }));
      });
      socket.connect(this.port, this.host);
    });
    return this.connecting;
  }

  /** Fails every waiting request with `err` and drops the socket. */
  private fail(err: Error): void {
    const waiting = this.pending.splice(0);
    for (const p of waiting) {
      if (p.timer) clearTimeout(p.timer);
      p.reject(err);
    }
    const socket = this.socket;
    if (socket) {
      this.socket = undefined;
      this.connecting = undefined;
      this.chunks = [];
      this.buffered = 0;
      socket.destroy();
    }
  }

  private onData(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    while (this.buffered >= frameSizeBytes) {
      const head = this.chunks[0]!.length >= frameSizeBytes ? this.chunks[0]! : this.join();
      let size: number | undefined;
      try {
        size = readFrameSize(head, 0, this.maxResponseBytes);
      } catch (e) {
        this.fail(new KlogConnectionError(this.address, `bad response frame: ${(e as Error).message}`));
        return;
      }
      if (size === undefined || this.buffered < frameSizeBytes + size) return;
      const all = this.join();
      const frame = all.subarray(frameSizeBytes, frameSizeBytes + size);
      const rest = all.subarray(frameSizeBytes + size);
      this.chunks = rest.length > 0 ? [rest] : [];
      this.buffered = rest.length;
      this.deliver(frame);
    }
  }

  /** Concatenates the buffered chunks into one (a no-op when there is one) and returns it. */
  private join(): Buffer {
    if (this.chunks.length !== 1) this.chunks = [Buffer.concat(this.chunks, this.buffered)];
    return this.chunks[0]!;
  }

  private deliver(frame: Buffer): void {
    const p = this.pending.shift();
    if (!p) {
      this.fail(new KlogConnectionError(this.address, 'response received with no request waiting for it'));
      return;
    }
    if (p.timer) clearTimeout(p.timer);
    try {
      const { head, body } = openFrame(frame);
      p.resolve({ errorCode: head, body });
    } catch (e) {
      p.reject(new KlogConnectionError(this.address, `bad response: ${(e as Error).message}`));
    }
  }
}
