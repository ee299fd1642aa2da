/**
 * A running broker (the paper §3): a TCP server whose connections share one LogManager.
 */
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import type { Server as HttpServer } from 'node:http';
import { LogManager, defaultReadPath, flusherKind, sendfileSupport, type ReadPath } from '@klog/storage';
import { crcSupport } from '@klog/protocol';
import { pino, type Logger } from 'pino';
import { ConfigError, resolveConfig, type BrokerConfig } from './config.js';
import { joinCluster, type ClusterMembership } from './cluster.js';
import { Connection } from './connection.js';
import { ConnectionLimits } from './connection-limits.js';
import type { BrokerContext } from './handlers/index.js';
import { BrokerMetrics, serveMetrics } from './metrics.js';
import { startKafkaListener, type KafkaListener } from './kafka/listener.js';
import { Controller } from './controller/controller.js';
import { ControllerMetrics } from './controller/controller-metrics.js';
import { controlledShutdown } from './controller/controlled-shutdown.js';
import { localTarget, remoteTarget } from './controller/targets.js';
import { MetadataCache } from './replication/metadata-cache.js';
import { ReplicaManager } from './replication/replica-manager.js';
import { ReplicationMetrics } from './replication/replication-metrics.js';
import { logManagerReplicaStore } from './replication/replica-store.js';
import { ZkIsrWriter } from './replication/zk-isr-writer.js';
import { renameStaleReplicas } from './replication/stale-replicas.js';

/** A started broker. */
export interface Broker {
  /** The settings it runs with; `port` is the real port when 0 was asked for. */
  readonly config: BrokerConfig;
  readonly host: string;
  readonly port: number;
  readonly logs: LogManager;
  readonly metrics: BrokerMetrics;
  /** How fetches send segment bytes: `sendfile` (zero-copy) or `read-write` (docs/design.md §3 read path). */
  readonly readPath: ReadPath;
  /** Port of the Prometheus `/metrics` endpoint, or undefined when none was asked for. */
  readonly metricsPort: number | undefined;
  /** The broker's ZooKeeper membership in cluster mode; undefined when standalone. */
  readonly cluster: ClusterMembership | undefined;
  /** The Kafka listener (docs/kafka-protocol.md), or undefined without `kafka.port`. */
  readonly kafka: KafkaListener | undefined;
  /** The controller election and controller (docs/replication.md §5) in cluster mode; undefined when standalone. */
  readonly controller: Controller | undefined;
  /** Replicated topics as watched in ZooKeeper (docs/replication.md §13.1) in cluster mode; undefined when standalone. */
  readonly metadataCache: MetadataCache | undefined;
  /** The replicated partitions of the broker and their roles (docs/replication.md §9). */
  readonly replicas: ReplicaManager;
  /** Stops accepting, closes connections, flushes every log and writes the clean-shutdown marker. */
  close(): Promise<void>;
}

/**
 * Opens the logs under `logDir` (recovering them when the last shutdown was not clean), starts
 * serving on `host:port` and, with `zookeeper` set, registers the broker and its topics there.
 * @param settings any of {@link BrokerConfig}; `logDir` is required
 * @param logger pino logger; default: JSON lines on stdout
 * The read path is `sendfile` when the native addon is available and `read.path` is not
 * `read-write`; it is logged in the "broker listening" line with the metrics port, if any, and
 * the flags Node was started with (`nodeFlags`: the `klog-broker` command's are in its first
 * line, docs/design.md §10).
 * @throws ConfigError for bad settings (also `read.path=sendfile` without the addon); the listen error (e.g. EADDRINUSE) when the port is
 *   taken; BrokerIdInUseError when a live broker in the cluster has the same id
 */
export async function startBroker(settings: Partial<BrokerConfig> & { logDir: string }, logger: Logger = pino()): Promise<Broker> {
  const config = resolveConfig(settings);
  const readPath = resolveReadPath(config);
  const logs = await LogManager.open({ ...config, logger });
  const abort = new AbortController();
  const metrics = new BrokerMetrics(readPath, logs);
  let cluster: ClusterMembership | undefined;
  // The leader's ISR writes go to ZooKeeper once the broker has joined the cluster (docs/replication.md §3.2).
  const isrWriter = config.zookeeper === undefined ? undefined : new ZkIsrWriter(() => cluster?.zk, logger);
  const replicationMetrics = new ReplicationMetrics(metrics.registry);
  replicationMetrics.countStaleReplicaDirs(metrics.registry, () => logs.staleReplicaDirs);
  const replicas = new ReplicaManager({ config, logger, metrics: replicationMetrics, store: logManagerReplicaStore(logs), isrWriter });
  const ctx: BrokerContext = { config, logs, logger, metrics, readPath, closing: abort.signal, replicas };
  const controllerMetrics = new ControllerMetrics(metrics.registry);
  const limits = new ConnectionLimits(config, logger);
  metrics.countConnections(() => limits.size);
  const server: Server = createServer((socket) => limits.admit(socket, 'klog', (s, memory) => new Connection(ctx, s, memory)));
  server.listen(config.port, config.host);
  try {
    await once(server, 'listening');
  } catch (err) {
    limits.stop();
    await logs.close();
    throw err;
  }
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  let metricsServer: HttpServer | undefined;
  let metricsPort: number | undefined;
  if (config.metricsPort !== undefined) {
    try {
      ({ server: metricsServer, port: metricsPort } = await serveMetrics(metrics, config.host, config.metricsPort));
    } catch (err) {
      limits.stop();
      server.close();
      await logs.close();
      throw err;
    }
  }
  if (config.zookeeper !== undefined) {
    try {
      cluster = await joinCluster(config, port, logs, logger);
      // A session that expired may have been replaced by another leader: fence every leadership (§9.1).
      cluster.zk.on('expired', () => replicas.fenceAll('the ZooKeeper session expired'));
      // Replicas of topics deleted (or created again) while the broker was down are renamed aside (§8.1).
      await renameStaleReplicas(cluster.zk, logs, logger).catch((err: unknown) => logger.warn({ err }, 'checking replica directories against ZooKeeper failed; they are kept'));
    } catch (err) {
      limits.stop();
      server.close();
      metricsServer?.close();
      await logs.close();
      throw err;
    }
  }
  let controller: Controller | undefined;
  let metadataCache: MetadataCache | undefined;
  if (cluster !== undefined) {
    metadataCache = new MetadataCache(cluster.zk, logger);
    controller = new Controller({
      zk: cluster.zk,
      brokerId: config.brokerId,
      logger: logger.child({ component: 'controller' }),
      metrics: controllerMetrics,
      uncleanLeaderElection: config.uncleanLeaderElection,
      defaultMinInsyncReplicas: config.minInsyncReplicas,
      batchDelayMs: config.controllerBatchDelayMs,
      target: (b, address) => (b === config.brokerId ? localTarget(ctx) : remoteTarget(address.host, address.port, config.controllerRequestTimeoutMs)),
    });
    ctx.metadataCache = metadataCache;
    ctx.controller = controller;
    const cache = metadataCache;
    replicas.useTopicDirectory((topic) => cache.isReplicated(topic));
    controller.start();
  }
  let kafka: KafkaListener | undefined;
  if (config.kafkaPort !== undefined) {
    try {
      kafka = await startKafkaListener(ctx, limits, config.kafkaPort, config.kafkaAdvertisedHost, cluster?.zk);
    } catch (err) {
      limits.stop();
      server.close();
      metricsServer?.close();
      await controller?.stop();
      metadataCache?.close();
      await cluster?.leave();
      await logs.close();
      throw err;
    }
  }
  logger.info(
    {
      brokerId: config.brokerId,
      host: config.host,
      port,
      logDir: config.logDir,
      mode: cluster ? 'cluster' : 'standalone',
      topics: Object.fromEntries(logs.topics()),
      readPath,
      ...(readPath === 'read-write' && config.readPath !== 'read-write' ? { sendfileUnavailable: sendfileSupport.reason } : {}),
      crcPath: crcSupport.path,
      flushPolicy: config.flushPolicy,
      flusher: flusherKind,
      nodeFlags: process.execArgv,
      ...(crcSupport.reason !== undefined ? { crcAddonUnavailable: crcSupport.reason } : {}),
      ...(metricsPort !== undefined ? { metricsPort } : {}),
      ...(kafka !== undefined ? { kafkaPort: kafka.port } : {}),
    },
    'broker listening',
  );

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closing ??= (async () => {
      // Controlled shutdown first (docs/replication.md §15.2), while the broker still serves
      // what it leads; it follows no leader any more, so no leader puts it back in an ISR.
      await replicas.stopFollowing();
      if (cluster !== undefined && controller !== undefined && config.controlledShutdownEnable && (metadataCache?.topicCount ?? 0) > 0) {
        await controlledShutdown({ zk: cluster.zk, controller, config, logger });
      }
      await controller?.stop();
      metadataCache?.close();
      abort.abort();
      limits.stop();
      await replicas.close();
      await kafka?.close();
      await cluster?.leave();
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      limits.destroyAll();
      metricsServer?.closeAllConnections();
      const metricsStopped = new Promise<void>((resolve) => (metricsServer ? metricsServer.close(() => resolve()) : resolve()));
      await stopped;
      await metricsStopped;
      await logs.close();
      logger.info({ metrics: await metrics.toJSON() }, 'broker stopped');
    })());

  const effective = { ...config, port, ...(metricsPort !== undefined ? { metricsPort } : {}), ...(kafka !== undefined ? { kafkaPort: kafka.port } : {}) };
  return { config: effective, host: config.host, port, logs, metrics, readPath, metricsPort, cluster, kafka, replicas, controller, metadataCache, close };
}

/**
 * The read path for `read.path`: `auto` → sendfile when the addon is available, else read-write.
 * @throws ConfigError for `sendfile` when the addon is not available (with the reason)
 */
function resolveReadPath(config: BrokerConfig): ReadPath {
  if (config.readPath === 'read-write') return 'read-write';
  if (config.readPath === 'sendfile' && !sendfileSupport.available) {
    throw new ConfigError(`read.path=sendfile but sendfile is not available: ${sendfileSupport.reason ?? 'unknown reason'}`);
  }
  return defaultReadPath();
}
