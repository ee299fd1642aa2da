/**
 * The Kafka listener (docs/kafka-protocol.md): a second TCP server of the broker, started with
 * `--kafka-port` (`kafka.port`), that speaks Apache Kafka's wire protocol over the same logs.
 * Each connection cuts its byte stream into frames (`int32 size | request`), refusing a size
 * outside `[8, max.request.bytes]` by closing, and answers one request at a time, in order, as a
 * Kafka broker does; while a backlog over `max.request.bytes` waits it stops reading the socket.
 * A request klog cannot decode, or an API or version it does not serve, closes the connection
 * (what a Kafka broker does); nothing of it reaches a log.
 */
import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { decodeRequestHeader, KafkaProtocolError, apiKeyName } from '@klog/kafka-protocol';
import { KafkaListenerRegistry, type ZkClient } from '@klog/zk-registry';
import type { BrokerContext } from '../handlers/index.js';
import type { KafkaContext } from './context.js';
import { PartitionEnds } from './ends.js';
import { GroupCoordinator } from './groups/coordinator.js';
import { fileOffsetStore, zkOffsetStore } from './groups/offset-store.js';
import { routeKafkaRequest } from './router.js';
import { KafkaTopology } from './topology.js';

/** Smallest request frame: a request header with a null client id. */
const minFrameBytes = 10;

/** A started Kafka listener. */
export interface KafkaListener {
  /** The port it listens on (the real one when 0 was asked for). */
  readonly port: number;
  /** Host and port given to Kafka clients in Metadata and FindCoordinator. */
  readonly advertisedHost: string;
  readonly groups: GroupCoordinator;
  /** Stops accepting and closes every connection. */
  close(): Promise<void>;
}

/**
 * Starts the Kafka listener on `host:port` over the broker's logs; in cluster mode (`zk` given)
 * registers it in ZooKeeper (`/brokers/kafka/<brokerId>`) and keeps group offsets there.
 * @param advertisedHost host given to clients; default the listen host
 * @throws the listen error (e.g. EADDRINUSE)
 */
export async function startKafkaListener(
  broker: BrokerContext,
  port: number,
  advertisedHost: string | undefined,
  zk: ZkClient | undefined,
): Promise<KafkaListener> {
  const server: Server = createServer();
  server.listen(port, broker.config.host);
  await once(server, 'listening');
  const address = server.address();
  const realPort = typeof address === 'object' && address ? address.port : port;
  const host = advertisedHost ?? broker.config.host;
  const topology = new KafkaTopology(broker.logs, { nodeId: broker.config.brokerId, host, port: realPort }, zk);
  const groups = new GroupCoordinator(topology, zk ? zkOffsetStore(zk) : fileOffsetStore(broker.config.logDir), broker.logger);
  const k: KafkaContext = { broker, topology, ends: new PartitionEnds(), groups };
  const sockets = new Set<Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    serve(k, socket);
  });
  if (zk !== undefined) {
    try {
      await new KafkaListenerRegistry(zk).register(broker.config.brokerId, host, realPort);
    } catch (err) {
      server.close();
      throw err;
    }
  }
  broker.logger.info({ kafkaPort: realPort, advertisedHost: host }, 'Kafka listener listening');
  return {
    port: realPort,
    advertisedHost: host,
    groups,
    async close() {
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      groups.close();
      await stopped;
    },
  };
}

/** Serves one Kafka connection until it closes. */
function serve(k: KafkaContext, socket: Socket): void {
  const maxFrameBytes = k.broker.config.maxRequestBytes;
  const gone = new AbortController();
  const ctx: KafkaContext = { ...k, broker: { ...k.broker, closing: AbortSignal.any([k.broker.closing, gone.signal]) } };
  const remote = `${socket.remoteAddress}:${socket.remotePort}`;
  let chunks: Buffer[] = [];
  let buffered = 0;
  let busy = false;
  socket.setNoDelay(true);
  const take = (n: number): Buffer => {
    const all = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, buffered);
    chunks = all.length > n ? [all.subarray(n)] : [];
    buffered -= n;
    return all.subarray(0, n);
  };
  const peekSize = (): number => {
    if (chunks[0]!.length < 4) chunks = [Buffer.concat(chunks, buffered)];
    return chunks[0]!.readInt32BE(0);
  };
  const drop = (why: string, detail: object = {}): void => {
    k.broker.logger.warn({ remote, ...detail }, why);
    socket.destroy();
  };
  const pump = async (): Promise<void> => {
    busy = true;
    try {
      while (buffered >= 4 && !socket.destroyed) {
        const size = peekSize();
        if (size < minFrameBytes || size > maxFrameBytes) return drop('Kafka request size out of bounds, closing connection', { size, maxRequestBytes: maxFrameBytes });
        if (buffered < 4 + size) break;
        const frame = take(4 + size).subarray(4);
        let response: Buffer | Buffer[] | undefined;
        try {
          const { header, body } = decodeRequestHeader(frame);
          try {
            response = await routeKafkaRequest(ctx, header, body);
          } catch (err) {
            if (!(err instanceof KafkaProtocolError)) throw err;
            return drop('bad Kafka request, closing connection', { api: apiKeyName(header.apiKey), version: header.apiVersion, err: err.message });
          }
        } catch (err) {
          if (err instanceof KafkaProtocolError) return drop('bad Kafka request header, closing connection', { err: err.message });
          k.broker.logger.error({ remote, err }, 'Kafka request failed, closing connection');
          return void socket.destroy();
        }
        if (response !== undefined && !socket.destroyed && !write(socket, response)) await drained(socket);
      }
      if (socket.isPaused() && buffered <= maxFrameBytes) socket.resume();
    } finally {
      busy = false;
    }
  };
  socket.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    buffered += chunk.length;
    if (buffered > maxFrameBytes + 4) socket.pause();
    if (!busy) void pump();
  });
  socket.on('error', (err) => k.broker.logger.debug({ remote, err: err.message }, 'Kafka connection error'));
  socket.on('close', () => gone.abort());
}

/** Writes a response's parts together. @returns false when the socket's buffer is full */
function write(socket: Socket, response: Buffer | Buffer[]): boolean {
  if (Buffer.isBuffer(response)) return socket.write(response);
  socket.cork();
  let ok = true;
  for (const part of response) ok = socket.write(part);
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
