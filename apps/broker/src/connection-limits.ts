/**
 * The connection limits of a broker, over every connection of both its listeners, klog's and
 * the Kafka listener (docs/format.md §5, connection limits; docs/kafka-protocol.md):
 * `max.connections` open at once (one more is closed at once, with a log line), closed after
 * `connections.max.idle.ms` without completing a request, and the request bytes they hold
 * counted in one {@link RequestMemory} (`queued.max.request.bytes`).
 */
import type { Socket } from 'node:net';
import type { Logger } from '@klog/logger';
import type { BrokerConfig } from './config.js';
import { RequestMemory } from './request-memory.js';

/** What the limits need of a connection, whichever protocol it speaks. */
export interface LimitedConnection {
  /** Since when (ms since the epoch) it has completed no request; undefined while it handles one. */
  readonly idleSinceMs: number | undefined;
  /** Bytes of the request budget it holds. */
  readonly heldBytes: number;
  /** `address:port` of the client. */
  readonly remoteAddress: string;
  /** Closes the socket now. */
  destroy(): void;
}

/** The broker's open connections and the limits they share. */
export class ConnectionLimits {
  /** The request bytes budget of every connection (`queued.max.request.bytes`). */
  readonly memory: RequestMemory;
  readonly #open = new Set<LimitedConnection>();
  readonly #refusals: ReturnType<typeof refusalLog>;
  readonly #idleSweep: NodeJS.Timeout;

  /** Starts the idle sweep (every quarter of `connections.max.idle.ms`, 10 ms to 1 s). */
  constructor(
    private readonly config: Pick<BrokerConfig, 'maxConnections' | 'connectionsMaxIdleMs' | 'queuedMaxRequestBytes'>,
    private readonly logger: Logger,
  ) {
    this.memory = new RequestMemory(config.queuedMaxRequestBytes);
    this.#refusals = refusalLog(logger, config.maxConnections);
    const sweepMs = Math.min(1000, Math.max(10, config.connectionsMaxIdleMs / 4));
    this.#idleSweep = setInterval(() => closeIdle(this.#open, config.connectionsMaxIdleMs, logger), sweepMs);
    this.#idleSweep.unref();
  }

  /** Connections open now, over both listeners. */
  get size(): number {
    return this.#open.size;
  }

  /**
   * Takes a socket `listener` accepted: past `max.connections` it is closed at once (and the
   * refusal logged); else `serve` makes its connection, which counts until the socket closes.
   */
  admit(socket: Socket, listener: 'klog' | 'kafka', serve: (socket: Socket, memory: RequestMemory) => LimitedConnection): void {
    if (this.#open.size >= this.config.maxConnections) {
      this.#refusals.refused(`${socket.remoteAddress}:${socket.remotePort}`, listener);
      socket.destroy();
      return;
    }
    const c = serve(socket, this.memory);
    this.#open.add(c);
    socket.on('close', () => this.#open.delete(c));
  }

  /** Closes every connection now. */
  destroyAll(): void {
    for (const c of this.#open) c.destroy();
  }

  /** Stops the idle sweep (the broker is closing). */
  stop(): void {
    clearInterval(this.#idleSweep);
  }
}

/**
 * Closes the connections that have completed no request for `maxIdleMs`
 * (`connections.max.idle.ms`): idle clients, and clients holding a half-sent frame. One log
 * line per connection closed.
 */
export function closeIdle(connections: Iterable<LimitedConnection>, maxIdleMs: number, logger: Logger): void {
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
 * second with how many were refused since (on either listener; the line names the last one's).
 */
export function refusalLog(logger: Logger, maxConnections: number): { refused(remote: string, listener: string): void } {
  let lastLogMs = 0;
  let unlogged = 0;
  return {
    refused(remote: string, listener: string): void {
      unlogged++;
      const now = Date.now();
      if (now - lastLogMs < 1000) return;
      logger.warn({ remote, listener, refused: unlogged, maxConnections }, 'connection refused: max.connections reached');
      lastLogMs = now;
      unlogged = 0;
    },
  };
}
