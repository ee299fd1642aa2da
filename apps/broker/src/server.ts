/**
 * A running broker (the paper §3): a TCP server whose connections share one LogManager.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import { LogManager } from '@klog/storage';
import { pino, type Logger } from 'pino';
import { resolveConfig, type BrokerConfig } from './config.js';
import { Connection } from './connection.js';
import type { BrokerContext } from './handlers/index.js';
import { BrokerMetrics } from './metrics.js';

/** A started broker. */
export interface Broker {
  /** The settings it runs with; `port` is the real port when 0 was asked for. */
  readonly config: BrokerConfig;
  readonly host: string;
  readonly port: number;
  readonly logs: LogManager;
  readonly metrics: BrokerMetrics;
  /** Stops accepting, closes connections, flushes every log and writes the clean-shutdown marker. */
  close(): Promise<void>;
}

/**
 * Opens the logs under `logDir` (recovering them when the last shutdown was not clean) and
 * starts serving on `host:port`.
 * @param settings any of {@link BrokerConfig}; `logDir` is required
 * @param logger pino logger; default: JSON lines on stdout
 * @throws ConfigError for bad settings; the listen error (e.g. EADDRINUSE) when the port is taken
 */
export async function startBroker(settings: Partial<BrokerConfig> & { logDir: string }, logger: Logger = pino()): Promise<Broker> {
  const config = resolveConfig(settings);
  const logs = await LogManager.open({ ...config, logger });
  const abort = new AbortController();
  const metrics = new BrokerMetrics();
  const ctx: BrokerContext = { config, logs, logger, metrics, closing: abort.signal };
  const connections = new Set<Connection>();
  const server: Server = createServer((socket) => {
    const c = new Connection(ctx, socket);
    connections.add(c);
    socket.on('close', () => connections.delete(c));
  });
  server.listen(config.port, config.host);
  try {
    await once(server, 'listening');
  } catch (err) {
    await logs.close();
    throw err;
  }
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  logger.info(
    { brokerId: config.brokerId, host: config.host, port, logDir: config.logDir, topics: Object.fromEntries(logs.topics()), readPath: 'read-write' },
    'broker listening',
  );

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      abort.abort();
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const c of connections) c.destroy();
      await stopped;
      await logs.close();
      logger.info({ metrics: metrics.toJSON() }, 'broker stopped');
    })());

  return { config: { ...config, port }, host: config.host, port, logs, metrics, close };
}
