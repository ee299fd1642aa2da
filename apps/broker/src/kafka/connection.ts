/**
 * One connection of the Kafka listener (docs/kafka-protocol.md): its byte stream is cut into
 * frames (`int32 size | request`) by {@link RequestFrames}, within the broker's request memory
 * and limits shared with klog's own listener (docs/format.md §5, connection limits), refusing a
 * size outside `[10, max.request.bytes]` by closing; requests are handled one at a time and
 * answered in order, as a Kafka broker does, except that a produce with acks -1 waiting for its
 * flush or its high watermark does not hold up the produce requests after it: they are appended
 * meanwhile and their responses queued behind its (at most {@link maxQueuedResponses}); any
 * other request waits until every response before it is written. A request klog cannot decode,
 * or an API or version it does not serve, closes the connection (what a Kafka broker does);
 * nothing of it reaches a log. A connection that completes no request for
 * `connections.max.idle.ms` is closed. The bytes of a fetch answer held in the listener's fetch memory (`kafka.fetch.memory.bytes`) are released
 * when the response has left the socket's buffer (its write callback), or when the request
 * fails or the socket closes.
 */
import type { Socket } from 'node:net';
import { ApiKey, decodeRequestHeader, KafkaProtocolError, apiKeyName } from '@klog/kafka-protocol';
import type { LimitedConnection } from '../connection-limits.js';
import { OrderedAnswers } from '../ordered-answers.js';
import { FrameBufferPool, RequestFrames } from '../request-frames.js';
import { HeldBytes, type RequestMemory } from '../request-memory.js';
import { LaterResponse, type KafkaContext, type KafkaListenerContext } from './context.js';
import { routeKafkaRequest } from './router.js';

/**
 * Most responses queued behind one still to come (a produce waiting for its flush or high
 * watermark) before the connection stops handling requests until they are written.
 */
const maxQueuedResponses = 64;

/**
 * Where the listener's requests cut from several chunks are copied together (no Kafka handler
 * keeps a view of its request once it has answered), process-wide.
 */
const framePool = new FrameBufferPool(8);

/** Smallest request frame: a request header with a null client id. */
const minFrameBytes = 10;

/** A request size out of bounds: the connection is closed, as a Kafka broker does. */
class FrameSizeError extends Error {
  constructor(readonly size: number) {
    super(`Kafka request size ${size} out of bounds`);
  }
}

/** Serves one Kafka connection until it closes. */
export class KafkaConnection implements LimitedConnection {
  private readonly frames: RequestFrames;
  /** The listener's context, with `closing` also aborted when this connection closes. */
  private readonly ctx: KafkaContext;
  /** True while a request is being handled; later frames wait their turn. */
  private busy = false;
  /** When the last request was completed (or the connection opened), ms since the epoch. */
  private lastRequestMs = Date.now();
  /** Responses queued ({@link enqueue}) and not yet written (or their failure closed the connection), in request order. */
  private readonly queued: OrderedAnswers<Buffer | Buffer[] | undefined>;
  /** Releases of responses written whose bytes have not yet left the socket's buffer. */
  private readonly unsent = new Set<() => void>();
  readonly remoteAddress: string;

  constructor(
    k: KafkaListenerContext,
    private readonly socket: Socket,
    memory: RequestMemory,
  ) {
    const gone = new AbortController();
    this.ctx = { ...k, broker: { ...k.broker, closing: AbortSignal.any([k.broker.closing, gone.signal]) }, held: new HeldBytes(k.fetchMemory) };
    this.remoteAddress = `${socket.remoteAddress}:${socket.remotePort}`;
    const maxFrameBytes = k.broker.config.maxRequestBytes;
    socket.setNoDelay(true);
    this.queued = new OrderedAnswers<Buffer | Buffer[] | undefined>(maxQueuedResponses, {
      // A send that fails closes the connection; later responses still take their turn.
      write: (response, release) =>
        this.send(response, release)
          .catch((err: unknown) => this.fail(err))
          .finally(() => void (this.lastRequestMs = Date.now())),
      // A LaterResponse that rejected (already released): the connection is closed.
      failed: (err) => {
        if (!this.socket.destroyed) this.fail(err);
      },
    });
    this.frames = new RequestFrames(
      socket,
      memory,
      maxFrameBytes,
      (buf, at) => {
        const size = buf.readInt32BE(at);
        if (size < minFrameBytes || size > maxFrameBytes) throw new FrameSizeError(size);
        return size;
      },
      () => {
        if (!this.busy && !socket.destroyed) void this.pump();
      },
      framePool,
    );
    socket.on('error', (err) => k.broker.logger.debug({ remote: this.remoteAddress, err: err.message }, 'Kafka connection error'));
    socket.on('close', () => {
      gone.abort(); // a long-poll fetch of this connection stops waiting
      for (const release of this.unsent) release();
      this.unsent.clear();
      if (!this.busy) this.frames.close();
    });
  }

  /**
   * Since when (ms since the epoch) the connection has completed no request, or undefined while
   * it handles one or an answer waits to be written (an acks -1 produce waiting for its flush or
   * its high watermark): such a connection is not idle, however long the wait.
   */
  get idleSinceMs(): number | undefined {
    return this.busy || this.queued.waiting > 0 ? undefined : this.lastRequestMs;
  }

  /** Bytes of the request budget this connection holds. */
  get heldBytes(): number {
    return this.frames.heldBytes;
  }

  /** Closes the socket now. */
  destroy(): void {
    this.socket.destroy();
  }

  /** A request failed other than by its bytes: logged, and the connection closed. */
  private fail(err: unknown): void {
    this.ctx.broker.logger.error({ remote: this.remoteAddress, err }, 'Kafka request failed, closing connection');
    this.socket.destroy();
  }

  /** Writes one response (nothing for undefined), then waits while the socket's buffer is full. */
  private async send(response: Buffer | Buffer[] | undefined, release: () => void): Promise<void> {
    if (response === undefined || this.socket.destroyed) return release();
    this.unsent.add(release);
    const sent = (): void => {
      this.unsent.delete(release);
      release();
    };
    if (!write(this.socket, response, sent)) await drained(this.socket);
  }

  /**
   * Queues a response to be written after those queued before it, once it is there (a
   * {@link LaterResponse} once its promise settles; one that rejects closes the connection).
   */
  private enqueue(response: Buffer | Buffer[] | LaterResponse | undefined, release: () => void): void {
    this.queued.add(response instanceof LaterResponse ? response.response : response, release);
  }

  private drop(why: string, detail: object = {}): void {
    this.ctx.broker.logger.warn({ remote: this.remoteAddress, ...detail }, why);
    this.socket.destroy();
  }

  /** Handles frames in order until none is whole; one request at a time. */
  private async pump(): Promise<void> {
    const socket = this.socket;
    this.busy = true;
    try {
      while (!socket.destroyed) {
        let frame: Buffer | undefined;
        try {
          frame = this.frames.next();
        } catch (err) {
          if (!(err instanceof FrameSizeError)) throw err;
          return this.drop('Kafka request size out of bounds, closing connection', { size: err.size, maxRequestBytes: this.ctx.broker.config.maxRequestBytes });
        }
        if (frame === undefined) break;
        let response: Buffer | Buffer[] | LaterResponse | undefined;
        try {
          const { header, body } = decodeRequestHeader(frame);
          // Only a produce is handled while earlier responses wait: any other request sees
          // every earlier produce flushed, as one handled after their answers would.
          if (this.queued.waiting > 0 && header.apiKey !== ApiKey.Produce) await this.queued.allWritten;
          try {
            response = await routeKafkaRequest(this.ctx, header, body);
          } catch (err) {
            if (!(err instanceof KafkaProtocolError)) throw err;
            return this.drop('bad Kafka request, closing connection', { api: apiKeyName(header.apiKey), version: header.apiVersion, err: err.message });
          }
        } catch (err) {
          if (err instanceof KafkaProtocolError) return this.drop('bad Kafka request header, closing connection', { err: err.message });
          return this.fail(err);
        } finally {
          this.frames.done();
        }
        const release = this.ctx.held.take();
        if (response instanceof LaterResponse || this.queued.waiting > 0) {
          this.enqueue(response, release);
          if (this.queued.full) await this.queued.allWritten;
        } else await this.send(response, release);
        this.lastRequestMs = Date.now();
      }
      this.frames.idle();
    } finally {
      this.ctx.held.take()(); // a request that failed or closed the connection
      this.busy = false;
      if (socket.destroyed) this.frames.close();
    }
  }
}

/**
 * Writes a response's parts together; `sent` is called once the last has left the socket's
 * buffer, or failed. @returns false when the socket's buffer is full
 */
function write(socket: Socket, response: Buffer | Buffer[], sent: () => void): boolean {
  if (Buffer.isBuffer(response)) return socket.write(response, () => sent());
  if (response.length === 0) {
    sent();
    return true;
  }
  socket.cork();
  let ok = true;
  for (let i = 0; i < response.length; i++) ok = i === response.length - 1 ? socket.write(response[i]!, () => sent()) : socket.write(response[i]!);
  socket.uncork();
  return ok;
}

function drained(socket: Socket): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      socket.off('drain', done);
      socket.off('close', done);
      resolve();
    };
    socket.on('drain', done);
    socket.on('close', done);
  });
}
