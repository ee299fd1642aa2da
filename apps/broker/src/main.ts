#!/usr/bin/env node
/**
 * `klog-broker`: starts a broker (docs/design.md §6). Without `--zookeeper` it runs standalone.
 * SIGTERM and SIGINT flush every log, write the clean-shutdown marker and exit 0. Exit codes as
 * every klog command (README, "Exit codes"): bad settings print one line on stderr and exit 2, a
 * failure at run time (the port in use, the log dir locked) exits 1. Logs go to stdout: JSON
 * lines, or pretty on a terminal (`--log-format`).
 */
import { createRequire } from 'node:module';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { createLogger, logFormats, type LogFormat, type LogLevel, logLevels } from '@klog/logger/pino';
import { closeOnSignals } from '@klog/logger/shutdown';
import { ConfigError, defaultBrokerConfig as d, parseBoolean, parseFlushPolicy, parseReadPath, parseSetting, readPropertiesFile, type BrokerConfig } from './config.js';
import { startBroker } from './server.js';

type NumericFlag = Parameters<typeof parseSetting>[0];
/** A commander argument parser from a setting's parser: its ConfigError becomes commander's InvalidArgumentError. */
const parsed =
  <T>(parse: (text: string, source: string) => T, flag: string) =>
  (v: string): T => {
    try {
      return parse(v, flag);
    } catch (err) {
      throw new InvalidArgumentError((err as Error).message);
    }
  };
const int = (key: NumericFlag, flag: string): ((v: string) => number) => parsed((v, source) => parseSetting(key, v, source), flag);

const version = (createRequire(import.meta.url)('../package.json') as { version: string }).version;
const gib = 1024 ** 3;

const program = new Command('klog-broker')
  .description('klog broker: serves partition logs over TCP (standalone without --zookeeper). Each setting: its properties key, its default.')
  .version(version, '-V, --version', 'print the klog version')
  .option('--config <file>', 'Java-style properties file with the settings below by their keys (flags override it)')
  .option('--broker-id <id>', `broker id (broker.id, default ${d.brokerId})`, int('brokerId', '--broker-id'))
  .option('--host <host>', `address to listen on (host, default ${d.host})`)
  .option('--port <port>', `TCP port, 0 picks a free one and logs it (port, default ${d.port})`, int('port', '--port'))
  .option('--log-dir <dir>', 'directory of the partition logs (log.dir, required)')
  .option('--zookeeper <connect>', 'ZooKeeper connect string host:port[/chroot] (zookeeper.connect, default: none, a standalone broker)')
  .option(
    '--zk-session-timeout-ms <ms>',
    `ZooKeeper session timeout (zookeeper.session.timeout.ms, default ${d.zkSessionTimeoutMs})`,
    int('zkSessionTimeoutMs', '--zk-session-timeout-ms'),
  )
  .option('--num-partitions <n>', `partitions of an auto-created topic (num.partitions, default ${d.numPartitions})`, int('numPartitions', '--num-partitions'))
  .option('--segment-bytes <bytes>', `segment size before a roll (segment.bytes, default ${d.segmentBytes} = ${d.segmentBytes / gib} GiB)`, int('segmentBytes', '--segment-bytes'))
  .option('--flush-messages <n>', `flush after this many messages (flush.messages, default ${d.flushMessages})`, int('flushMessages', '--flush-messages'))
  .option('--flush-ms <ms>', `flush at least this often; only flushed messages are visible (flush.ms, default ${d.flushIntervalMs})`, int('flushIntervalMs', '--flush-ms'))
  .option('--flush-policy <policy>', `when logs flush: group (as soon as data waits) or interval, the paper's (flush.policy, default ${d.flushPolicy})`, parsed(parseFlushPolicy, '--flush-policy'))
  .option('--flush-threads <n>', `most fdatasyncs at once, on their own threads (flush.threads, default ${d.flushThreads})`, int('flushThreads', '--flush-threads'))
  .option('--retention-hours <hours>', `delete segments older than this (retention.hours, default ${d.retentionMs / 3_600_000})`, int('retentionMs', '--retention-hours'))
  .option('--retention-ms <ms>', 'delete segments older than this, in ms (retention.ms, default: retention.hours)', int('retentionMs', '--retention-ms'))
  .option('--retention-bytes <bytes>', `most bytes per partition, -1 unlimited (retention.bytes, default ${d.retentionBytes})`, int('retentionBytes', '--retention-bytes'))
  .option(
    '--retention-check-interval-ms <ms>',
    `how often retention runs (retention.check.interval.ms, default ${d.retentionCheckIntervalMs})`,
    int('retentionCheckIntervalMs', '--retention-check-interval-ms'),
  )
  .option(
    '--max-message-bytes <bytes>',
    `largest message payload accepted (max.message.bytes, default ${d.maxMessageBytes})`,
    int('maxMessageBytes', '--max-message-bytes'),
  )
  .option(
    '--max-request-bytes <bytes>',
    `largest request frame accepted (max.request.bytes, default ${d.maxRequestBytes} = ${d.maxRequestBytes / 2 ** 20} MiB)`,
    int('maxRequestBytes', '--max-request-bytes'),
  )
  .option('--read-path <path>', `how fetches send segment bytes: auto, sendfile or read-write (read.path, default ${d.readPath})`, (v: string) => {
    try {
      return parseReadPath(v, '--read-path');
    } catch (err) {
      throw new InvalidArgumentError((err as Error).message);
    }
  })
  .option('--metrics-port <port>', 'serve Prometheus metrics on this port, 0 picks a free one (metrics.port, default: no metrics endpoint)', int('metricsPort', '--metrics-port'))
  .option(
    '--auto-create-topics-enable <bool>',
    `whether a produce creates a topic the broker lacks: true or false (auto.create.topics.enable, default ${d.autoCreateTopics})`,
    parsed(parseBoolean, '--auto-create-topics-enable'),
  )
  .option('--max-partitions <n>', `most partitions topics are created up to (max.partitions, default ${d.maxPartitions})`, int('maxPartitions', '--max-partitions'))
  .option(
    '--queued-max-request-bytes <bytes>',
    `most request bytes buffered over all connections (queued.max.request.bytes, default ${d.queuedMaxRequestBytes / 2 ** 20} MiB)`,
    int('queuedMaxRequestBytes', '--queued-max-request-bytes'),
  )
  .option(
    '--connections-max-idle-ms <ms>',
    `close a connection that completes no request for this long (connections.max.idle.ms, default ${d.connectionsMaxIdleMs})`,
    int('connectionsMaxIdleMs', '--connections-max-idle-ms'),
  )
  .option('--max-connections <n>', `most client connections at once (max.connections, default ${d.maxConnections})`, int('maxConnections', '--max-connections'))
  .option('--kafka-port <port>', "also speak Kafka's wire protocol on this port, 0 picks a free one (kafka.port, default: none)", int('kafkaPort', '--kafka-port'))
  .option(
    '--kafka-fetch-memory-bytes <bytes>',
    `most bytes of Kafka fetch answers held over all connections (kafka.fetch.memory.bytes, default ${d.kafkaFetchMemoryBytes / 2 ** 20} MiB)`,
    int('kafkaFetchMemoryBytes', '--kafka-fetch-memory-bytes'),
  )
  .option('--kafka-advertised-host <host>', 'host given to Kafka clients (kafka.advertised.host, default: --host)')
  .option(
    '--unclean-leader-election-enable <bool>',
    `controller: elect a leader outside the ISR when no ISR member is live, losing what it lacks (unclean.leader.election.enable, default ${d.uncleanLeaderElection})`,
    parsed(parseBoolean, '--unclean-leader-election-enable'),
  )
  .option(
    '--controlled-shutdown-enable <bool>',
    `on SIGTERM, move this broker's leaderships away before stopping (controlled.shutdown.enable, default ${d.controlledShutdownEnable})`,
    parsed(parseBoolean, '--controlled-shutdown-enable'),
  )
  .option(
    '--controlled-shutdown-max-retries <n>',
    `asks of a controlled shutdown after the first while partitions are left (controlled.shutdown.max.retries, default ${d.controlledShutdownMaxRetries})`,
    int('controlledShutdownMaxRetries', '--controlled-shutdown-max-retries'),
  )
  .option(
    '--controlled-shutdown-retry-backoff-ms <ms>',
    `wait between those asks (controlled.shutdown.retry.backoff.ms, default ${d.controlledShutdownRetryBackoffMs})`,
    int('controlledShutdownRetryBackoffMs', '--controlled-shutdown-retry-backoff-ms'),
  )
  .option(
    '--controller-request-timeout-ms <ms>',
    `controller: wait for a broker's answer before reconnecting and sending again (controller.request.timeout.ms, default ${d.controllerRequestTimeoutMs})`,
    int('controllerRequestTimeoutMs', '--controller-request-timeout-ms'),
  )
  .option(
    '--controller-batch-delay-ms <ms>',
    `for tests only: the controller's wait between two batches of partition writes (controller.batch.delay.ms, default ${d.controllerBatchDelayMs})`,
    int('controllerBatchDelayMs', '--controller-batch-delay-ms'),
  )
  .option(
    '--replica-lag-time-max-ms <ms>',
    `a follower not caught up for longer leaves the ISR (replica.lag.time.max.ms, default ${d.replicaLagTimeMaxMs})`,
    int('replicaLagTimeMaxMs', '--replica-lag-time-max-ms'),
  )
  .option(
    '--replica-high-watermark-checkpoint-interval-ms <ms>',
    `how often each replica's high watermark is checkpointed (replica.high.watermark.checkpoint.interval.ms, default ${d.replicaHighWatermarkCheckpointIntervalMs})`,
    int('replicaHighWatermarkCheckpointIntervalMs', '--replica-high-watermark-checkpoint-interval-ms'),
  )
  .option('--replica-fetch-max-bytes <bytes>', `bytes per partition of a follower's fetch (replica.fetch.max.bytes, default ${d.replicaFetchMaxBytes})`, int('replicaFetchMaxBytes', '--replica-fetch-max-bytes'))
  .option('--replica-fetch-wait-max-ms <ms>', `long poll of a follower's fetch (replica.fetch.wait.max.ms, default ${d.replicaFetchWaitMaxMs})`, int('replicaFetchWaitMaxMs', '--replica-fetch-wait-max-ms'))
  .option('--replica-fetch-backoff-ms <ms>', `a follower's wait after a failed fetch (replica.fetch.backoff.ms, default ${d.replicaFetchBackoffMs})`, int('replicaFetchBackoffMs', '--replica-fetch-backoff-ms'))
  .option('--min-insync-replicas <n>', `default min.insync.replicas of replicated topics (min.insync.replicas, default ${d.minInsyncReplicas})`, int('minInsyncReplicas', '--min-insync-replicas'))
  .option(
    '--replica-fetch-start-delay-ms <ms>',
    `for tests only: a new follower waits this long before it truncates and fetches (replica.fetch.start.delay.ms, default ${d.replicaFetchStartDelayMs})`,
    int('replicaFetchStartDelayMs', '--replica-fetch-start-delay-ms'),
  )
  .addOption(new Option('--log-level <level>', 'lowest level logged').choices(logLevels).default('info'))
  .addOption(new Option('--log-format <format>', 'auto: pretty on a terminal, JSON lines otherwise').choices(logFormats).default('auto'))
  .addHelpText(
    'after',
    `
Examples:
  klog-broker --port 9092 --log-dir /tmp/klog-logs
  klog-broker --port 0 --log-dir /tmp/klog-logs --log-format json > broker.log
  klog-broker --zookeeper 127.0.0.1:2181/klog --broker-id 1 --port 9093 --log-dir /tmp/klog-1 --num-partitions 2
  klog-broker --config broker.properties --log-level debug

Exit codes: 0 after a clean shutdown (SIGTERM, SIGINT), 1 failure, 2 usage error.`,
  )
  .exitOverride()
  .showHelpAfterError(false);

async function main(): Promise<void> {
  program.parse();
  const o = program.opts<Record<string, string | number | undefined>>();
  const settings: Partial<BrokerConfig> = o.config !== undefined ? readPropertiesFile(String(o.config)) : {};
  const flags: [string, keyof BrokerConfig][] = [
    ['brokerId', 'brokerId'], ['host', 'host'], ['port', 'port'], ['logDir', 'logDir'], ['zookeeper', 'zookeeper'], ['zkSessionTimeoutMs', 'zkSessionTimeoutMs'],
    ['numPartitions', 'numPartitions'], ['segmentBytes', 'segmentBytes'], ['flushMessages', 'flushMessages'],
    ['flushMs', 'flushIntervalMs'], ['flushPolicy', 'flushPolicy'], ['flushThreads', 'flushThreads'], ['retentionMs', 'retentionMs'], ['retentionBytes', 'retentionBytes'],
    ['retentionCheckIntervalMs', 'retentionCheckIntervalMs'], ['maxMessageBytes', 'maxMessageBytes'], ['maxRequestBytes', 'maxRequestBytes'],
    ['readPath', 'readPath'], ['metricsPort', 'metricsPort'], ['autoCreateTopicsEnable', 'autoCreateTopics'], ['maxPartitions', 'maxPartitions'],
    ['queuedMaxRequestBytes', 'queuedMaxRequestBytes'], ['connectionsMaxIdleMs', 'connectionsMaxIdleMs'], ['maxConnections', 'maxConnections'],
    ['kafkaPort', 'kafkaPort'], ['kafkaAdvertisedHost', 'kafkaAdvertisedHost'], ['kafkaFetchMemoryBytes', 'kafkaFetchMemoryBytes'],
    ['uncleanLeaderElectionEnable', 'uncleanLeaderElection'], ['controlledShutdownEnable', 'controlledShutdownEnable'],
    ['controlledShutdownMaxRetries', 'controlledShutdownMaxRetries'], ['controlledShutdownRetryBackoffMs', 'controlledShutdownRetryBackoffMs'],
    ['controllerRequestTimeoutMs', 'controllerRequestTimeoutMs'], ['controllerBatchDelayMs', 'controllerBatchDelayMs'],
    ['replicaLagTimeMaxMs', 'replicaLagTimeMaxMs'], ['replicaFetchMaxBytes', 'replicaFetchMaxBytes'], ['replicaFetchWaitMaxMs', 'replicaFetchWaitMaxMs'],
    ['replicaFetchBackoffMs', 'replicaFetchBackoffMs'], ['minInsyncReplicas', 'minInsyncReplicas'], ['replicaFetchStartDelayMs', 'replicaFetchStartDelayMs'],
    ['replicaHighWatermarkCheckpointIntervalMs', 'replicaHighWatermarkCheckpointIntervalMs'],
  ];
  for (const [flag, key] of flags) if (o[flag] !== undefined) (settings as Record<string, unknown>)[key] = o[flag];
  if (o.retentionHours !== undefined) settings.retentionMs = Number(o.retentionHours) * 3600 * 1000;
  const logger = createLogger({ name: 'klog-broker', level: o.logLevel as LogLevel, format: o.logFormat as LogFormat, fd: 1 });
  const broker = await startBroker({ ...settings, logDir: settings.logDir ?? '' }, logger);
  closeOnSignals(logger, () => broker.close());
}

main().catch((err: unknown) => {
  // commander has printed its message (or the help, or the version).
  if (err instanceof CommanderError) process.exit(err.exitCode === 0 ? 0 : 2);
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`klog-broker: ${message}\n`);
  process.exit(err instanceof ConfigError ? 2 : 1);
});
