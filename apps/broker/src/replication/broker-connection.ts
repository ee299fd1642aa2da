/**
 * A request/response connection from this broker to another (a follower to its leader,
 * docs/replication.md §9.2): frames of docs/format.md §5 out, response frames matched to
 * requests in order (a broker answers one connection's requests in order). The broker cannot
 * use packages/client's Connection (the client depends on the broker for its tests), so this is
 * the broker's own, kept to what broker-to-broker requests need: one socket, opened on first
 * use and again after it closed, a timeout per request, and every waiting request failed when
 * the socket closes.
 */
import { connect, type Socket } from 'node:net';
import { type Decoder, frameSizeBytes, openFrame, readFrameSize } from '@klog/protocol';

/** A response frame: its leading int16 (the error code) and a decoder over the rest. */
export interface BrokerResponse {
  readonly errorCode: number;
  readonly body: Decoder;
}

/** Options of a {@link BrokerConnection}. */
export interface BrokerConnectionOptions {
  readonly host: string;
  readonly port: number;
  /** Most ms for the connection to open; default 10,000. */
  readonly connectTimeoutMs?: number;
  /** Largest response frame accepted, in bytes; default 128 MiB (a larger size closes the connection). */
  readonly maxResponseBytes?: number;
}

/** The error of a request whose connection failed or closed, or that timed out. */
export class BrokerConnectionError extends Error {
  override readonly name = 'BrokerConnectionError';
}

interface Pending {
  readonly resolve: (r: BrokerResponse) => void;
  readonly reject: (e: Error) => void;
  readonly timer: NodeJS.Timeout;
}

/** One connection to one broker. */
export class BrokerConnection {
  #socket: Socket | undefined;
  #opening: Promise<Socket> | undefined;
  #chunks: Buffer[] = [];
  #buffered = 0;
  readonly #pending: Pending[] = [];
  #closed = false;

  constructor(readonly options: BrokerConnectionOptions) {}

  /** `host:port` of the broker. */
  get address(): string {
    return `${this.options.host}:${this.options.port}`;
  }

  /**
   * Sends a framed request and resolves with its response frame.
   * @param timeoutMs most ms to wait for the response
   * @throws BrokerConnectionError when the connection cannot be opened, closes first, or the time is up (the connection is then closed)
   */
  async request(frame: Buffer, timeoutMs: number): Promise<BrokerResponse> {
    if (this.#closed) throw new BrokerConnectionError(`connection to ${this.address} is closed`);
    const socket = await this.#open();
    return new Promise<BrokerResponse>((resolve, reject) => {
      const timer = setTimeout(() => this.#fail(new BrokerConnectionError(`no response from ${this.address} within ${timeoutMs} ms`)), timeoutMs);
      this.#pending.push({ resolve, reject, timer });
      socket.write(frame);
    });
  }

  /** Closes the socket; waiting requests fail. */
  close(): void {
    this.#closed = true;
    this.#fail(new BrokerConnectionError(`connection to ${this.address} closed`));
  }

  #open(): Promise<Socket> {
    if (this.#socket !== undefined && !this.#socket.destroyed) return Promise.resolve(this.#socket);
    this.#opening ??= new Promise<Socket>((resolve, reject) => {
      const socket = connect({ host: this.options.host, port: this.options.port });
      socket.setNoDelay(true);
      const timer = setTimeout(() => socket.destroy(new BrokerConnectionError(`connecting to ${this.address} timed out`)), this.options.connectTimeoutMs ?? 10_000);
      socket.once('connect', () => {
        clearTimeout(timer);
        this.#opening = undefined;
        this.#socket = socket;
        resolve(socket);
      });
      socket.on('data', (chunk: Buffer) => this.#onData(chunk));
      socket.on('error', (err) => {
        clearTimeout(timer);
        if (this.#opening !== undefined && this.#socket !== socket) {
          this.#opening = undefined;
          reject(new BrokerConnectionError(`cannot connect to ${this.address}: ${err.message}`));
        }
        this.#fail(new BrokerConnectionError(`connection to ${this.address} failed: ${err.message}`));
      });
      socket.on('close', () => {
        clearTimeout(timer);
        if (this.#socket === socket) this.#fail(new BrokerConnectionError(`connection to ${this.address} closed`));
        if (this.#opening !== undefined && this.#socket !== socket) {
          this.#opening = undefined;
          reject(new BrokerConnectionError(`cannot connect to ${this.address}: closed`));
        }
      });
    });
    return this.#opening;
  }

  #onData(chunk: Buffer): void {
    this.#chunks.push(chunk);
    this.#buffered += chunk.length;
    for (;;) {
      if (this.#buffered < frameSizeBytes) return;
      let head = this.#chunks[0]!;
      if (head.length < frameSizeBytes) head = this.#join();
      let size: number;
      try {
        size = readFrameSize(head, 0, this.options.maxResponseBytes ?? 128 * 1024 * 1024)!;
      } catch (err) {
        this.#fail(new BrokerConnectionError(`bad response from ${this.address}: ${(err as Error).message}`));
        return;
      }
      const total = frameSizeBytes + size;
      if (this.#buffered < total) return;
      if (head.length < total) head = this.#join();
      const frame = head.subarray(frameSizeBytes, total);
      if (head.length > total) this.#chunks[0] = head.subarray(total);
      else this.#chunks.shift();
      this.#buffered -= total;
      const p = this.#pending.shift();
      if (p === undefined) continue;
      clearTimeout(p.timer);
      const { head: errorCode, body } = openFrame(frame);
      p.resolve({ errorCode, body });
    }
  }

  /** Joins every buffered chunk into one. */
  #join(): Buffer {
    const all = Buffer.concat(this.#chunks);
    this.#chunks = [all];
    return all;
  }

  #fail(err: Error): void {
    const socket = this.#socket;
    this.#socket = undefined;
    this.#chunks = [];
    this.#buffered = 0;
    socket?.destroy();
    for (const p of this.#pending.splice(0)) {
      clearTimeout(p.timer);
      p.reject(err);
    }
  }
}
