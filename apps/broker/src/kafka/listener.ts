/**
 * The Kafka listener (docs/kafka-protocol.md): a second TCP server of the broker, started with
 * `--kafka-port` (`kafka.port`), that speaks Apache Kafka's wire protocol over the same logs.
 * Its connections ({@link KafkaConnection}) count in the broker's connection limits with klog's
 * own (`max.connections`, `connections.max.idle.ms`, `queued.max.request.bytes`; docs/format.md
 * §5, connection limits).
 */
import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { KafkaListenerRegistry, type ZkClient } from '@klog/zk-registry';
import type { ConnectionLimits } from '../connection-limits.js';
import type { BrokerContext } from '../handlers/index.js';
import { KafkaConnection } from './connection.js';
import type { KafkaListenerContext } from './context.js';
import { RequestMemory } from '../request-memory.js';
import { PartitionEnds } from './ends.js';
import { GroupCoordinator } from './groups/coordinator.js';
import { fileOffsetStore, zkOffsetStore } from './groups/offset-store.js';
import { ReadAhead } from './read-ahead.js';
import { KafkaTopology } from './topology.js';

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
 * @param limits the broker's connection limits, which its connections count in
 * @param advertisedHost host given to clients; default the listen host
 * @throws the listen error (e.g. EADDRINUSE)
 */
export async function startKafkaListener(
  broker: BrokerContext,
  limits: ConnectionLimits,
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
  const topology = new KafkaTopology(broker.logs, { nodeId: broker.config.brokerId, host, port: realPort }, zk, () => broker.metadataCache?.topics() ?? []);
  const groups = new GroupCoordinator(topology, zk ? zkOffsetStore(zk) : fileOffsetStore(broker.config.logDir), broker.logger);
  const fetchMemory = new RequestMemory(broker.config.kafkaFetchMemoryBytes);
  broker.metrics.countKafkaFetchMemory(() => fetchMemory.usedBytes);
  const k: KafkaListenerContext = { broker, topology, ends: new PartitionEnds(), groups, readAhead: new ReadAhead(), fetchMemory };
  const sockets = new Set<Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    limits.admit(socket, 'kafka', (s, memory) => new KafkaConnection(k, s, memory));
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
