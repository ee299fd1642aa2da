/**
 * One request at a time to one broker over TCP (docs/replication.md §5.3, "requests to brokers"):
 * the controller's connection to a broker. It sends a request frame and reads the one response
 * frame; a lost connection or a response later than `requestTimeoutMs` closes the socket and
 * fails the request with a retriable {@link ChannelError}, and the next request opens a new
 * socket. The request sender serialises the requests of one broker, so no pipelining is needed.
 * (@klog/client's Connection cannot be used here: the client package depends on the broker's for
 * its tests.)
 */
import { Socket } from 'node:net';
import { frameSizeBytes, openFrame, readFrameSize, type Decoder } from '@klog/protocol';

/** The connection failed, closed, or the broker did not answer in time; worth another attempt. */
export class ChannelError extends Error {
  override readonly name = 'ChannelError';
  readonly retriable = true;
}

/** A response frame: its error code and a decoder over the rest. */
export interface ChannelResponse {
  readonly errorCode: number;
  readonly body: Decoder;
}

/** Largest response frame accepted (bytes): controller responses are an error code per partition. */
const maxResponseBytes = 64 * 1024 * 1024;

/** A request channel to `host:port`. */
export class BrokerChannel {
  #socket: Socket | undefined;
  #closed = false;

  constructor(
    readonly host: string,
    readonly port: number,
    private readonly requestTimeoutMs: number,
  ) {}

  /**
   * Sends one framed request (size prefix included) and resolves with its response.
   * @throws ChannelError when the connection cannot be opened, closes, or no response arrives within the timeout
   */
  async request(frame: Buffer): Promise<ChannelResponse> {
    if (this.#closed) throw new ChannelError(`${this.host}:${this.port}: channel closed`);
    const socket = await this.#open();
    return new Promise<ChannelResponse>((resolve, reject) => {
      let received: Buffer = Buffer.alloc(0);
      const finish = (err: Error | undefined, response?: ChannelResponse): void => {
        clearTimeout(timer);
        socket.off('data', onData);
        socket.off('close', onClose);
        if (err !== undefined) {
          socket.destroy();
          if (this.#socket === socket) this.#socket = undefined;
          reject(err);
        } else resolve(response!);
      };
      const onData = (chunk: Buffer): void => {
        received = received.length === 0 ? chunk : Buffer.concat([received, chunk]);
        let size: number | undefined;
        try {
          size = readFrameSize(received, 0, maxResponseBytes);
        } catch (err) {
          return finish(new ChannelError(`${this.host}:${this.port}: bad response: ${(err as Error).message}`));
        }
        if (size === undefined || received.length < frameSizeBytes + size) return;
        const { head, body } = openFrame(received.subarray(frameSizeBytes, frameSizeBytes + size));
        finish(undefined, { errorCode: head, body });
      };
      const onClose = (): void => finish(new ChannelError(`${this.host}:${this.port}: connection closed before the response`));
      const timer = setTimeout(() => finish(new ChannelError(`${this.host}:${this.port}: no response within ${this.requestTimeoutMs} ms`)), this.requestTimeoutMs);
      socket.on('data', onData);
      socket.on('close', onClose);
      socket.write(frame);
    });
  }

  #open(): Promise<Socket> {
    const open = this.#socket;
    if (open !== undefined && !open.destroyed) return Promise.resolve(open);
    return new Promise((resolve, reject) => {
      const socket = new Socket();
      socket.setNoDelay(true);
      const timer = setTimeout(() => fail(new Error(`connect timed out after ${this.requestTimeoutMs} ms`)), this.requestTimeoutMs);
      const fail = (err: Error): void => {
        clearTimeout(timer);
        socket.destroy();
        reject(new ChannelError(`${this.host}:${this.port}: ${err.message}`, { cause: err }));
      };
      socket.once('error', fail);
      socket.connect(this.port, this.host, () => {
        clearTimeout(timer);
        socket.off('error', fail);
        socket.on('error', () => {}); // surfaces as 'close'
        this.#socket = socket;
        resolve(socket);
      });
    });
  }

  /** Closes the socket; later requests fail. */
  close(): void {
    this.#closed = true;
    this.#socket?.destroy();
    this.#socket = undefined;
  }
}
