#!/usr/bin/env node
/**
 * `klog-mirror-maker`: copies the selected topics of every `--source` cluster into the
 * `--target` cluster (docs/design.md §6). SIGTERM and SIGINT finish what is in flight, commit what
 * the target acknowledged and exit 0. Exit codes as every klog command (README, "Exit codes"): bad
 * settings print one line on stderr and exit 2, a failure at run time exits 1. Logs go to stdout:
 * JSON lines, or pretty on a terminal (`--log-format`).
 */
import { createRequire } from 'node:module';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { createLogger, logFormats, type LogFormat, type LogLevel, logLevels } from '@klog/logger/pino';
import { closeOnSignals } from '@klog/logger/shutdown';
import { ConfigError, parseAcksSetting, parseIntSetting, readConfigFile, resolveConfig, type MirrorConfig } from './config.js';
import { MirrorMaker } from './mirror-maker.js';

const int = (flag: string, least = 0) => (v: string): number => {
  try {
    return parseIntSetting(v, flag, least);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
};
const collect = (v: string, previous: string[] = []): string[] => [...previous, v];

const program = new Command('klog-mirror-maker')
  .description('klog mirror maker: copies topics from source clusters into a target cluster, at least once')
  .version((createRequire(import.meta.url)('../package.json') as { version: string }).version, '-V, --version', 'print the klog version')
  .option('--config <file>', 'properties or JSON file with the same settings (flags override it)')
  .option('--source <zk-connect>', 'ZooKeeper connect string of a source cluster (repeat for more)', collect)
  .option('--target <zk-connect>', 'ZooKeeper connect string of the target cluster')
  .option('--group <id>', 'consumer group id used in every source cluster')
  .option('--whitelist <regex>', 'copy the topics whose whole name matches (topics created later too)')
  .option('--blacklist <regex>', 'copy every topic except those whose whole name matches')
  .option('--num-streams <n>', 'streams (consumer threads) per selected topic in each source (default 1)', int('--num-streams', 1))
  .option('--commit-interval-ms <ms>', 'commit acknowledged source offsets this often (default 1000)', int('--commit-interval-ms', 1))
  .option('--stats-interval-ms <ms>', 'log rate and per-partition lag this often (default 10000)', int('--stats-interval-ms', 1))
  .option('--release-flush-timeout-ms <ms>', 'most wait for in-flight messages before a rebalance releases partitions (default 10000)', int('--release-flush-timeout-ms'))
  .option('--shutdown-timeout-ms <ms>', 'most wait for in-flight messages on shutdown (default 30000)', int('--shutdown-timeout-ms'))
  .option('--max-in-flight-messages <n>', 'messages sent and not yet acknowledged, per source (default 5000)', int('--max-in-flight-messages', 1))
  .option('--retry-backoff-ms <ms>', 'first wait before resending what the target did not acknowledge (default 200)', int('--retry-backoff-ms', 1))
  .option('--retry-backoff-max-ms <ms>', 'longest wait between resends (default 5000)', int('--retry-backoff-max-ms', 1))
  .option('--acks <1|2|all>', 'target acknowledgement: 1 appended, 2 appended and flushed, all flushed on every in-sync replica of a replicated target (default 1)', (v: string) => {
    try {
      return parseAcksSetting(v, '--acks');
    } catch (err) {
      throw new InvalidArgumentError((err as Error).message);
    }
  })
  .option('--batch-size <n>', 'producer batch size in messages (default 200)', int('--batch-size', 1))
  .option('--linger-ms <ms>', 'producer linger (default 5)', int('--linger-ms'))
  .option('--zk-session-timeout-ms <ms>', 'ZooKeeper session timeout (default 6000)', int('--zk-session-timeout-ms', 1))
  .option('--rebalance-max-retries <n>', 'attempts of one source rebalance (default 10)', int('--rebalance-max-retries', 1))
  .option('--rebalance-backoff-ms <ms>', 'wait between rebalance attempts (default 1000)', int('--rebalance-backoff-ms'))
  .option('--auto-offset-reset <where>', 'start of a partition with no committed offset: smallest (default) or largest')
  .option('--drop-one-in <n>', 'TESTING AID: drop one message in n instead of copying it (exercises audits); 0 off', int('--drop-one-in'))
  .option('--audit-window-ms <ms>', 'window of the audit counts published to the target\'s audit topic (default 600000; 0: no audit)', int('--audit-window-ms'))
  .option('--audit-topic <topic>', 'the audit topic: never mirrored; counts go to it in the target (default __audit)')
  .option('--metrics-port <port>', 'serve Prometheus metrics (copied, lag, gaps) on this port, 0 picks a free one (metrics.port)', int('--metrics-port'))
  .option('--metrics-host <host>', 'address of the metrics endpoint (default 127.0.0.1)')
  .option('--on-gap <what>', 'when source retention deleted messages before they were copied: fail (default: exit 1, commit nothing past the gap) or continue (log it, copy on)')
  .addOption(new Option('--log-level <level>', 'lowest level logged').choices(logLevels).default('info'))
  .addOption(new Option('--log-format <format>', 'auto: pretty on a terminal, JSON lines otherwise').choices(logFormats).default('auto'))
  .addHelpText(
    'after',
    `
Examples:
  klog-mirror-maker --source 127.0.0.1:2181/online --target 127.0.0.1:2181/analytics --group mirror --whitelist '.*'
  klog-mirror-maker --config mirror.properties --log-level debug
  klog-mirror-maker --source zk1:2181/dc1 --source zk2:2181/dc2 --target zk3:2181/analytics --group mirror --blacklist 'tmp\\..*'

Exit codes: 0 after a clean shutdown (SIGTERM, SIGINT), 1 failure, 2 usage error.`,
  )
  .exitOverride()
  .showHelpAfterError(false);

async function main(): Promise<void> {
  program.parse();
  const o = program.opts<Record<string, unknown>>();
  const settings: Partial<MirrorConfig> = typeof o['config'] === 'string' ? readConfigFile(o['config']) : {};
  if (o['source'] !== undefined) settings.sources = o['source'] as string[];
  const keys: (keyof MirrorConfig)[] = [
    'target', 'group', 'whitelist', 'blacklist', 'numStreams', 'commitIntervalMs', 'statsIntervalMs', 'releaseFlushTimeoutMs',
    'shutdownTimeoutMs', 'maxInFlightMessages', 'retryBackoffMs', 'retryBackoffMaxMs', 'acks', 'batchSize', 'lingerMs',
    'zkSessionTimeoutMs', 'rebalanceMaxRetries', 'rebalanceBackoffMs', 'autoOffsetReset', 'dropOneIn', 'auditWindowMs', 'auditTopic', 'onGap',
    'metricsPort', 'metricsHost',
  ];
  for (const k of keys) if (o[k] !== undefined) (settings as Record<string, unknown>)[k] = o[k];
  // A whitelist flag replaces a blacklist from the file and the other way round.
  if (o['whitelist'] !== undefined && o['blacklist'] === undefined) delete settings.blacklist;
  if (o['blacklist'] !== undefined && o['whitelist'] === undefined) delete settings.whitelist;
  const config = resolveConfig(settings);
  const logger = createLogger({ name: 'klog-mirror-maker', level: o['logLevel'] as LogLevel, format: o['logFormat'] as LogFormat, fd: 1 });
  if (config.dropOneIn > 0) logger.warn({ dropOneIn: config.dropOneIn }, 'testing aid --drop-one-in is on: messages are deliberately lost');
  const mirror = new MirrorMaker(config, logger);
  mirror.onFatal = (err) => {
    process.stderr.write(`klog-mirror-maker: ${err.message}\n`);
    process.exit(1);
  };
  closeOnSignals(logger, () => mirror.close(), 'shutting down: finishing in-flight messages and committing');
  await mirror.start();
}

main().catch((err: unknown) => {
  // commander has printed its message (or the help, or the version).
  if (err instanceof CommanderError) process.exit(err.exitCode === 0 ? 0 : 2);
  const message = err instanceof Error ? err.message : String(err);
  process.stderr.write(`klog-mirror-maker: ${message}\n`);
  process.exit(err instanceof ConfigError ? 2 : 1);
});
