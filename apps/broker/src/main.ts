#!/usr/bin/env node
/**
 * `klog-broker`: starts a broker (SPEC §6). Without `--zookeeper` it runs standalone.
 * SIGTERM and SIGINT flush every log, write the clean-shutdown marker and exit 0.
 * Bad settings print one line on stderr and exit 2.
 */
import { Command, InvalidArgumentError } from 'commander';
import { pino } from 'pino';
import { ConfigError, parseFlushPolicy, parseReadPath, parseSetting, readPropertiesFile, type BrokerConfig } from './config.js';
import { startBroker } from './server.js';

type NumericFlag = Parameters<typeof parseSetting>[0];
const int = (key: NumericFlag, flag: string) => (v: string): number => {
  try {
    return parseSetting(key, v, flag);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
};

const program = new Command('klog-broker')
  .description('klog broker: serves partition logs over TCP (standalone without --zookeeper)')
  .option('--config <file>', 'Java-style properties file (flags override it)')
  .option('--broker-id <id>', 'broker id (broker.id)', int('brokerId', '--broker-id'))
  .option('--host <host>', 'address to listen on (host)')
  .option('--port <port>', 'TCP port, 0 picks a free one (port)', int('port', '--port'))
  .option('--log-dir <dir>', 'directory of the partition logs (log.dir)')
  .option('--zookeeper <connect>', 'ZooKeeper connect string host:port[/chroot] (zookeeper.connect)')
  .option('--zk-session-timeout-ms <ms>', 'ZooKeeper session timeout (zookeeper.session.timeout.ms)', int('zkSessionTimeoutMs', '--zk-session-timeout-ms'))
  .option('--num-partitions <n>', 'partitions of an auto-created topic (num.partitions)', int('numPartitions', '--num-partitions'))
  .option('--segment-bytes <bytes>', 'segment size before a roll (segment.bytes)', int('segmentBytes', '--segment-bytes'))
  .option('--flush-messages <n>', 'flush after this many messages (flush.messages)', int('flushMessages', '--flush-messages'))
  .option('--flush-ms <ms>', 'flush at least this often (flush.ms)', int('flushIntervalMs', '--flush-ms'))
  .option('--flush-policy <policy>', 'when logs flush: group (as soon as data waits) or interval (flush.policy)', (v: string) => {
    try {
      return parseFlushPolicy(v, '--flush-policy');
    } catch (err) {
      throw new InvalidArgumentError((err as Error).message);
    }
  })
  .option('--flush-threads <n>', 'most fdatasyncs at once (flush.threads)', int('flushThreads', '--flush-threads'))
  .option('--retention-hours <hours>', 'delete segments older than this (retention.hours)', int('retentionMs', '--retention-hours'))
  .option('--retention-ms <ms>', 'delete segments older than this, in ms (retention.ms)', int('retentionMs', '--retention-ms'))
  .option('--retention-bytes <bytes>', 'most bytes per partition, -1 unlimited (retention.bytes)', int('retentionBytes', '--retention-bytes'))
  .option('--retention-check-interval-ms <ms>', 'how often retention runs (retention.check.interval.ms)', int('retentionCheckIntervalMs', '--retention-check-interval-ms'))
  .option('--max-message-bytes <bytes>', 'largest message payload accepted (max.message.bytes)', int('maxMessageBytes', '--max-message-bytes'))
  .option('--max-request-bytes <bytes>', 'largest request frame accepted (max.request.bytes)', int('maxRequestBytes', '--max-request-bytes'))
  .option('--read-path <path>', 'how fetches send segment bytes: auto, sendfile or read-write (read.path)', (v: string) => {
    try {
      return parseReadPath(v, '--read-path');
    } catch (err) {
      throw new InvalidArgumentError((err as Error).message);
    }
  })
  .option('--metrics-port <port>', 'serve Prometheus metrics on this port, 0 picks a free one (metrics.port)', int('metricsPort', '--metrics-port'))
  .option('--kafka-port <port>', "also speak Kafka's wire protocol on this port, 0 picks a free one (kafka.port)", int('kafkaPort', '--kafka-port'))
  .option('--kafka-advertised-host <host>', 'host given to Kafka clients (kafka.advertised.host); default --host')
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
    ['readPath', 'readPath'], ['metricsPort', 'metricsPort'], ['kafkaPort', 'kafkaPort'], ['kafkaAdvertisedHost', 'kafkaAdvertisedHost'],
  ];
  for (const [flag, key] of flags) if (o[flag] !== undefined) (settings as Record<string, unknown>)[key] = o[flag];
  if (o.retentionHours !== undefined) settings.retentionMs = Number(o.retentionHours) * 3600 * 1000;
  const logger = pino({ name: 'klog-broker' });
  const broker = await startBroker({ ...settings, logDir: settings.logDir ?? '' }, logger);
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    broker.close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err: unknown) => {
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`klog-broker: ${message}\n`);
  process.exit(err instanceof ConfigError ? 2 : 1);
});
