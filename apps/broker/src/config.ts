/**
 * The broker's configuration (docs/design.md §2, §6): defaults, a `--config` properties file, flags on
 * top. Every limit carries its unit in its name.
 */
import { readFileSync } from 'node:fs';
import { parse as parseProperties } from 'dot-properties';
import { defaultMaxRequestBytes } from '@klog/protocol';
import { defaultFlushThreads, flushPolicies, maxFlushThreads, type FlushPolicy } from '@klog/storage';

/** Everything a broker is started with. */
export interface BrokerConfig {
  /** This broker's id in a cluster (`broker.id`). */
  brokerId: number;
  /** Address to listen on (`host`); default 127.0.0.1. */
  host: string;
  /** TCP port (`port`); 0 picks a free port, which the broker logs. Default 9092. */
  port: number;
  /** Directory of the partition logs (`log.dir`). */
  logDir: string;
  /** ZooKeeper connect string `host:port[,host:port][/chroot]` (`zookeeper.connect`); absent: standalone broker. */
  zookeeper?: string;
  /** ZooKeeper session timeout in ms (`zookeeper.session.timeout.ms`); default 6000. */
  zkSessionTimeoutMs: number;
  /** Partitions of an auto-created topic (`num.partitions`); default 1. */
  numPartitions: number;
  /** Segment size in bytes before a roll (`segment.bytes`); default 1 GiB. */
  segmentBytes: number;
  /**
   * When logs flush (`flush.policy`, docs/design.md §10): `group` (default) flushes as soon as
   * data waits and no flush of the log runs; `interval` is the paper's, by `flush.messages` or
   * `flush.ms`.
   */
  flushPolicy: FlushPolicy;
  /** Unflushed messages that force a flush (`flush.messages`); default 500; under `group` an upper bound. */
  flushMessages: number;
  /** Most ms a message stays unflushed (`flush.ms`); default 1000; under `group` an upper bound and the retry delay of a failed flush. */
  flushIntervalMs: number;
  /** Most fdatasyncs at once, on threads apart from libuv's pool (`flush.threads`, 1 to 64); default 4. */
  flushThreads: number;
  /** Age in ms of a segment's last write after which retention deletes it (`retention.ms`, or `retention.hours`); default 168 h. */
  retentionMs: number;
  /** Most bytes a partition keeps, −1 for no limit (`retention.bytes`); default −1. */
  retentionBytes: number;
  /** How often retention runs, in ms (`retention.check.interval.ms`); default 300000. */
  retentionCheckIntervalMs: number;
  /** Largest payload in bytes a message may have (`max.message.bytes`); default 1000000. */
  maxMessageBytes: number;
  /** Largest request frame in bytes (`max.request.bytes`); default 100 MiB. */
  maxRequestBytes: number;
  /** Largest `maxBytes` a fetch may ask for (`max.fetch.bytes`); default 100 MiB. */
  maxFetchBytes: number;
  /**
   * How fetches send segment bytes (`read.path`, docs/design.md §3 read path): `auto` (default) uses
   * sendfile(2) where the native addon was built, else read-and-write; `sendfile` requires the
   * addon (start fails without it); `read-write` forces the fallback.
   */
  readPath: ReadPathSetting;
  /** Port of the Prometheus `/metrics` endpoint on `host` (`metrics.port`); 0 picks a free one, which the broker logs; absent: no endpoint. */
  metricsPort?: number;
  /**
   * Whether a produce to a topic the broker does not have creates it (`auto.create.topics.enable`);
   * default true. METADATA never creates a topic either way.
   */
  autoCreateTopics: boolean;
  /** Most partitions the broker creates topics up to, counting those already on disk (`max.partitions`); default 10 000. */
  maxPartitions: number;
  /**
   * Most bytes of requests buffered over all connections (`queued.max.request.bytes`); default
   * 128 MiB, and never less than `max.request.bytes`. A connection that would pass it stops
   * being read until memory is released.
   */
  queuedMaxRequestBytes: number;
  /**
   * A connection that completes no request for this many ms is closed (`connections.max.idle.ms`):
   * an idle one, and one holding a half-sent frame; default 600 000 (10 minutes, as Kafka).
   */
  connectionsMaxIdleMs: number;
  /** Most client connections at once (`max.connections`); more are closed at once, with a log line; default 10 000. */
  maxConnections: number;
  /**
   * Most bytes of Kafka fetch answers held in memory over all connections of the Kafka listener
   * (`kafka.fetch.memory.bytes`, docs/kafka-protocol.md): answers built and not yet out of the
   * sockets' buffers; default 128 MiB. Past it fetches answer smaller, down to one message each.
   */
  kafkaFetchMemoryBytes: number;
  /** Port of the Kafka listener (`kafka.port`, docs/kafka-protocol.md); 0 picks a free one, which the broker logs; absent: no Kafka listener. */
  kafkaPort?: number;
  /** Host given to Kafka clients in Metadata and FindCoordinator answers (`kafka.advertised.host`); default `host`. */
  kafkaAdvertisedHost?: string;
  /**
   * Whether the controller may elect a leader outside the ISR when no ISR member is live
   * (`unclean.leader.election.enable`, docs/replication.md §12); default false. A topic's own
   * setting overrides it.
   */
  uncleanLeaderElection: boolean;
  /** On SIGTERM, move this broker's leaderships away before stopping (`controlled.shutdown.enable`, §15.2); default true. */
  controlledShutdownEnable: boolean;
  /** How many more times a controlled shutdown asks the controller while partitions are left (`controlled.shutdown.max.retries`); default 3. */
  controlledShutdownMaxRetries: number;
  /** Wait between two such asks, ms (`controlled.shutdown.retry.backoff.ms`); default 5000. */
  controlledShutdownRetryBackoffMs: number;
  /** How long the controller waits for a broker's answer before it reconnects and sends again, ms (`controller.request.timeout.ms`); default 30000. */
  controllerRequestTimeoutMs: number;
  /** For tests only: the controller's wait between two batches of partition writes, ms (`controller.batch.delay.ms`); default 0. */
  controllerBatchDelayMs: number;
  /** A follower not caught up (flushed) for longer than this many ms leaves the ISR (`replica.lag.time.max.ms`, docs/replication.md §9.4); default 10 000. */
  replicaLagTimeMaxMs: number;
  /** `maxBytes` per partition of a follower's REPLICA_FETCH, in bytes (`replica.fetch.max.bytes`); default 1 MiB. */
  replicaFetchMaxBytes: number;
  /** How often each replica's high watermark is checkpointed, ms (`replica.high.watermark.checkpoint.interval.ms`, docs/replication.md §8.1); default 5000. */
  replicaHighWatermarkCheckpointIntervalMs: number;
  /** `maxWaitMs` of a follower's REPLICA_FETCH (`replica.fetch.wait.max.ms`); default 500. */
  replicaFetchWaitMaxMs: number;
  /** A follower's wait in ms after a failed replica fetch (`replica.fetch.backoff.ms`); default 1000. */
  replicaFetchBackoffMs: number;
  /** `min.insync.replicas` of topics created without one (`min.insync.replicas`, docs/replication.md §11); default 1. */
  minInsyncReplicas: number;
  /**
   * For tests only: a follower waits this many ms before it truncates and fetches a partition it
   * has just been told to follow (`replica.fetch.start.delay.ms`, docs/replication.md §17.3,
   * §17.4); default 0.
   */
  replicaFetchStartDelayMs: number;
}

/** Values of the `read.path` setting. */
export const readPathSettings = ['auto', 'sendfile', 'read-write'] as const;
/** A `read.path` setting: see {@link BrokerConfig.readPath}. */
export type ReadPathSetting = (typeof readPathSettings)[number];

/**
 * Checks a `read.path` value.
 * @throws ConfigError naming the source and the value seen
 */
export function parseReadPath(text: string, source: string): ReadPathSetting {
  const v = text.trim();
  if ((readPathSettings as readonly string[]).includes(v)) return v as ReadPathSetting;
  throw new ConfigError(`${source}: expected one of ${readPathSettings.join(', ')}, got ${JSON.stringify(text)}`);
}

/**
 * Checks a `flush.policy` value (`group` or `interval`).
 * @throws ConfigError naming the source and the value seen
 */
export function parseFlushPolicy(text: string, source: string): FlushPolicy {
  const v = text.trim();
  if ((flushPolicies as readonly string[]).includes(v)) return v as FlushPolicy;
  throw new ConfigError(`${source}: expected one of ${flushPolicies.join(', ')}, got ${JSON.stringify(text)}`);
}

/** The defaults of every setting but `logDir`. */
export const defaultBrokerConfig: Omit<BrokerConfig, 'logDir'> = {
  brokerId: 0,
  host: '127.0.0.1',
  port: 9092,
  zkSessionTimeoutMs: 6000,
  numPartitions: 1,
  segmentBytes: 1024 * 1024 * 1024,
  flushPolicy: 'group',
  flushMessages: 500,
  flushIntervalMs: 1000,
  flushThreads: defaultFlushThreads,
  retentionMs: 168 * 3600 * 1000,
  retentionBytes: -1,
  retentionCheckIntervalMs: 300_000,
  maxMessageBytes: 1_000_000,
  maxRequestBytes: defaultMaxRequestBytes,
  maxFetchBytes: defaultMaxRequestBytes,
  readPath: 'auto',
  autoCreateTopics: true,
  maxPartitions: 10_000,
  queuedMaxRequestBytes: 128 * 1024 * 1024,
  connectionsMaxIdleMs: 600_000,
  maxConnections: 10_000,
  kafkaFetchMemoryBytes: 128 * 1024 * 1024,
  uncleanLeaderElection: false,
  controlledShutdownEnable: true,
  controlledShutdownMaxRetries: 3,
  controlledShutdownRetryBackoffMs: 5000,
  controllerRequestTimeoutMs: 30_000,
  controllerBatchDelayMs: 0,
  replicaLagTimeMaxMs: 10_000,
  replicaFetchMaxBytes: 1024 * 1024,
  replicaHighWatermarkCheckpointIntervalMs: 5000,
  replicaFetchWaitMaxMs: 500,
  replicaFetchBackoffMs: 1000,
  minInsyncReplicas: 1,
  replicaFetchStartDelayMs: 0,
};

/** A configuration value that is missing or not of its kind; its message names the setting. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

type NumericKey = { [K in keyof BrokerConfig]-?: NonNullable<BrokerConfig[K]> extends number ? K : never }[keyof BrokerConfig];

/**
 * Checks a boolean setting's text: `true` or `false`.
 * @throws ConfigError naming the source and the value seen
 */
export function parseBoolean(text: string, source: string): boolean {
  const v = text.trim();
  if (v === 'true' || v === 'false') return v === 'true';
  throw new ConfigError(`${source}: expected true or false, got ${JSON.stringify(text)}`);
}

/** Each setting's properties-file key; `retention.hours` is handled apart (it scales to ms). */
const propertyKeys: Record<string, keyof BrokerConfig> = {
  'broker.id': 'brokerId',
  brokerid: 'brokerId',
  host: 'host',
  hostname: 'host',
  port: 'port',
  'log.dir': 'logDir',
  'zookeeper.connect': 'zookeeper',
  'zookeeper.session.timeout.ms': 'zkSessionTimeoutMs',
  'num.partitions': 'numPartitions',
  'segment.bytes': 'segmentBytes',
  'flush.messages': 'flushMessages',
  'flush.ms': 'flushIntervalMs',
  'flush.policy': 'flushPolicy',
  'flush.threads': 'flushThreads',
  'retention.ms': 'retentionMs',
  'retention.bytes': 'retentionBytes',
  'retention.check.interval.ms': 'retentionCheckIntervalMs',
  'max.message.bytes': 'maxMessageBytes',
  'max.request.bytes': 'maxRequestBytes',
  'max.fetch.bytes': 'maxFetchBytes',
  'read.path': 'readPath',
  'metrics.port': 'metricsPort',
  'auto.create.topics.enable': 'autoCreateTopics',
  'max.partitions': 'maxPartitions',
  'queued.max.request.bytes': 'queuedMaxRequestBytes',
  'connections.max.idle.ms': 'connectionsMaxIdleMs',
  'max.connections': 'maxConnections',
  'kafka.port': 'kafkaPort',
  'kafka.fetch.memory.bytes': 'kafkaFetchMemoryBytes',
  'kafka.advertised.host': 'kafkaAdvertisedHost',
  'unclean.leader.election.enable': 'uncleanLeaderElection',
  'controlled.shutdown.enable': 'controlledShutdownEnable',
  'controlled.shutdown.max.retries': 'controlledShutdownMaxRetries',
  'controlled.shutdown.retry.backoff.ms': 'controlledShutdownRetryBackoffMs',
  'controller.request.timeout.ms': 'controllerRequestTimeoutMs',
  'controller.batch.delay.ms': 'controllerBatchDelayMs',
  'replica.lag.time.max.ms': 'replicaLagTimeMaxMs',
  'replica.fetch.max.bytes': 'replicaFetchMaxBytes',
  'replica.high.watermark.checkpoint.interval.ms': 'replicaHighWatermarkCheckpointIntervalMs',
  'replica.fetch.wait.max.ms': 'replicaFetchWaitMaxMs',
  'replica.fetch.backoff.ms': 'replicaFetchBackoffMs',
  'min.insync.replicas': 'minInsyncReplicas',
  'replica.fetch.start.delay.ms': 'replicaFetchStartDelayMs',
};

/** Smallest value of each numeric setting. */
const minimums: Record<NumericKey, number> = {
  brokerId: 0,
  port: 0,
  zkSessionTimeoutMs: 1000,
  numPartitions: 1,
  segmentBytes: 64,
  flushMessages: 1,
  flushIntervalMs: 1,
  flushThreads: 1,
  retentionMs: 1,
  retentionBytes: -1,
  retentionCheckIntervalMs: 10,
  maxMessageBytes: 0,
  maxRequestBytes: 16,
  maxFetchBytes: 1,
  metricsPort: 0,
  maxPartitions: 1,
  queuedMaxRequestBytes: 16,
  connectionsMaxIdleMs: 100,
  maxConnections: 1,
  kafkaPort: 0,
  kafkaFetchMemoryBytes: 1,
  controlledShutdownMaxRetries: 0,
  controlledShutdownRetryBackoffMs: 0,
  controllerRequestTimeoutMs: 100,
  controllerBatchDelayMs: 0,
  replicaLagTimeMaxMs: 1,
  replicaFetchMaxBytes: 1,
  replicaHighWatermarkCheckpointIntervalMs: 10,
  replicaFetchWaitMaxMs: 0,
  replicaFetchBackoffMs: 0,
  minInsyncReplicas: 1,
  replicaFetchStartDelayMs: 0,
};

/**
 * Parses a setting's text as an integer of at least its minimum.
 * @throws ConfigError naming the setting and the value seen
 */
export function parseSetting(key: NumericKey, text: string, source: string): number {
  const value = Number(text.trim());
  if (!/^-?\d+$/.test(text.trim()) || !Number.isSafeInteger(value) || value < minimums[key]) {
    throw new ConfigError(`${source}: expected an integer >= ${minimums[key]}, got ${JSON.stringify(text)}`);
  }
  if ((key === 'port' || key === 'metricsPort' || key === 'kafkaPort') && value > 65535) throw new ConfigError(`${source}: port ${value} is above 65535`);
  if (key === 'flushThreads' && value > maxFlushThreads) throw new ConfigError(`${source}: flush.threads ${value} is above ${maxFlushThreads}`);
  return value;
}

/**
 * Reads a Java-style properties file into broker settings (keys as in {@link propertyKeys},
 * plus `retention.hours`). Unknown keys are an error, so a typo does not go unnoticed.
 * @throws ConfigError for an unreadable file, an unknown key or a bad value
 */
export function readPropertiesFile(path: string): Partial<BrokerConfig> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${path}: ${(err as Error).message}`);
  }
  const out: Partial<BrokerConfig> = {};
  for (const [key, value] of Object.entries(parseProperties(text))) {
    if (typeof value !== 'string') continue;
    if (key === 'retention.hours') {
      out.retentionMs = parseSetting('retentionMs', value, `${path}: retention.hours`) * 3600 * 1000;
      continue;
    }
    const setting = propertyKeys[key];
    if (setting === undefined) throw new ConfigError(`${path}: unknown setting ${JSON.stringify(key)}`);
    if (setting === 'host' || setting === 'logDir' || setting === 'zookeeper' || setting === 'kafkaAdvertisedHost') out[setting] = value;
    else if (setting === 'readPath') out.readPath = parseReadPath(value, `${path}: ${key}`);
    else if (setting === 'flushPolicy') out.flushPolicy = parseFlushPolicy(value, `${path}: ${key}`);
    else if (setting === 'autoCreateTopics' || setting === 'uncleanLeaderElection' || setting === 'controlledShutdownEnable') out[setting] = parseBoolean(value, `${path}: ${key}`);
    else out[setting] = parseSetting(setting, value, `${path}: ${key}`);
  }
  return out;
}

/**
 * Fills in defaults (`queued.max.request.bytes` at least `max.request.bytes` when not set).
 * @throws ConfigError when `logDir` is missing, or `queued.max.request.bytes` is set below
 *   `max.request.bytes` (a largest request could never be read)
 */
export function resolveConfig(partial: Partial<BrokerConfig>): BrokerConfig {
  const config = { ...defaultBrokerConfig, ...partial } as BrokerConfig;
  if (!config.logDir) throw new ConfigError('a log dir is required (--log-dir or log.dir)');
  if (partial.queuedMaxRequestBytes === undefined) config.queuedMaxRequestBytes = Math.max(config.queuedMaxRequestBytes, config.maxRequestBytes + 4);
  else if (config.queuedMaxRequestBytes < config.maxRequestBytes + 4) {
    throw new ConfigError(`queued.max.request.bytes ${config.queuedMaxRequestBytes} is below max.request.bytes ${config.maxRequestBytes} + 4: the largest request could never be read`);
  }
  parseReadPath(String(config.readPath), 'read.path');
  parseFlushPolicy(String(config.flushPolicy), 'flush.policy');
  parseSetting('flushThreads', String(config.flushThreads), 'flush.threads');
  return config;
}
