/**
 * The mirror maker's configuration: defaults, a `--config` file (Java properties or JSON),
 * flags on top. Every duration carries its unit in its name.
 *
 * Properties file keys (JSON uses the same names, or the camelCase field names below):
 *
 * | key | field |
 * |---|---|
 * | `source`, `source.<anything>` (one connect string each; JSON: `sources` array) | sources |
 * | `target` | target |
 * | `group` (`group.id`) | group |
 * | `whitelist` / `blacklist` | whitelist / blacklist |
 * | `num.streams` | numStreams |
 * | `commit.interval.ms` | commitIntervalMs |
 * | `stats.interval.ms` | statsIntervalMs |
 * | `release.flush.timeout.ms` | releaseFlushTimeoutMs |
 * | `shutdown.timeout.ms` | shutdownTimeoutMs |
 * | `max.in.flight.messages` | maxInFlightMessages |
 * | `retry.backoff.ms` / `retry.backoff.max.ms` | retryBackoffMs / retryBackoffMaxMs |
 * | `acks` | acks |
 * | `batch.size` / `linger.ms` | batchSize / lingerMs |
 * | `zookeeper.session.timeout.ms` | zkSessionTimeoutMs |
 * | `rebalance.max.retries` / `rebalance.backoff.ms` | rebalanceMaxRetries / rebalanceBackoffMs |
 * | `auto.offset.reset` | autoOffsetReset |
 * | `drop.one.in` | dropOneIn |
 * | `audit.window.ms` (0: no audit) / `audit.topic` | auditWindowMs / auditTopic |
 * | `metrics.port` / `metrics.host` | metricsPort / metricsHost |
 * | `on.gap` (`fail` or `continue`) | onGap |
 */
import { readFileSync } from 'node:fs';
import { parse as parseProperties } from 'dot-properties';
import { defaultAuditTopic, defaultAuditWindowMs, minAuditWindowMs, type OffsetReset, parseOffsetReset } from '@klog/client';
import { validateTopic } from '@klog/protocol';
import { parseConnectString } from '@klog/zk-registry';

/** A setting that cannot be used; the message names it and the value seen. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/** Everything a mirror maker is started with. */
export interface MirrorConfig {
  /** ZooKeeper connect strings of the clusters to copy from (at least one). */
  sources: string[];
  /** ZooKeeper connect string of the cluster to copy into. */
  target: string;
  /** Consumer group id used in every source cluster. */
  group: string;
  /** Copy the topics whose whole name matches this regular expression. Exactly one of whitelist and blacklist. */
  whitelist?: string;
  /** Copy every topic except those whose whole name matches this regular expression. */
  blacklist?: string;
  /** Streams (consumer threads) per selected topic in each source; default 1. */
  numStreams: number;
  /** How often acknowledged positions are committed to the sources, ms; default 1000. */
  commitIntervalMs: number;
  /** How often rate and lag are logged, ms; default 10,000. */
  statsIntervalMs: number;
  /** Most ms a rebalance waits for the in-flight messages of the partitions it releases; default 10,000. */
  releaseFlushTimeoutMs: number;
  /** Most ms a shutdown waits for the in-flight messages; default 30,000. */
  shutdownTimeoutMs: number;
  /** Most messages sent and not yet acknowledged per source; default 5000. */
  maxInFlightMessages: number;
  /** First wait before resending what the target did not acknowledge, ms; default 200. */
  retryBackoffMs: number;
  /** Longest wait between resends, ms; default 5000. */
  retryBackoffMaxMs: number;
  /**
   * Acknowledgement level asked of the target: 1 appended, 2 appended and flushed, −1 (`all`)
   * flushed on every in-sync replica of a replicated target topic (as 2 on a paper topic,
   * docs/replication.md §11, §14); default 1.
   */
  acks: 1 | 2 | -1;
  /** Producer batch size, messages; default 200. */
  batchSize: number;
  /** Producer linger, ms; default 5. */
  lingerMs: number;
  /** ZooKeeper session timeout of every connection, ms; default 6000. */
  zkSessionTimeoutMs: number;
  /** Attempts of one source rebalance; default 10. */
  rebalanceMaxRetries: number;
  /** Wait between rebalance attempts, ms; default 1000. */
  rebalanceBackoffMs: number;
  /** Where a partition without a committed offset starts; default `smallest` (copy everything kept). */
  autoOffsetReset: OffsetReset;
  /** Testing aid: drop one message in this many instead of sending it (and commit past it). 0: off. */
  dropOneIn: number;
  /**
   * Window of the audit counts the mirror publishes to the target's audit topic (tier
   * `mirror`, docs/audit.md), ms; default 10 minutes; 0 turns the audit off.
   */
  auditWindowMs: number;
  /** The audit topic: never mirrored, counts published to it in the target; default `__audit`. */
  auditTopic: string;
  /** Port of the Prometheus `/metrics` endpoint (docs/metrics.md); 0 picks a free one, which is logged; absent: none. */
  metricsPort?: number;
  /** Address the metrics endpoint listens on; default 127.0.0.1. */
  metricsHost: string;
  /**
   * What a gap does (source retention deleted messages before they were copied): `fail` (the
   * default) stops the mirror with exit code 1 and commits nothing past the gap; `continue` logs
   * it as an error and copies on from the offset `auto.offset.reset` names (the earliest kept,
   * with the default `smallest`).
   */
  onGap: 'fail' | 'continue';
}

export const defaultMirrorConfig = {
  numStreams: 1,
  commitIntervalMs: 1000,
  statsIntervalMs: 10_000,
  releaseFlushTimeoutMs: 10_000,
  shutdownTimeoutMs: 30_000,
  maxInFlightMessages: 5000,
  retryBackoffMs: 200,
  retryBackoffMaxMs: 5000,
  acks: 1,
  batchSize: 200,
  lingerMs: 5,
  zkSessionTimeoutMs: 6000,
  rebalanceMaxRetries: 10,
  rebalanceBackoffMs: 1000,
  autoOffsetReset: 'smallest',
  dropOneIn: 0,
  auditWindowMs: defaultAuditWindowMs,
  auditTopic: defaultAuditTopic,
  metricsHost: '127.0.0.1',
  onGap: 'fail',
} as const satisfies Partial<MirrorConfig>;

/** Numeric settings: field, properties key, least value. */
const numeric: ReadonlyArray<readonly [keyof MirrorConfig, string, number]> = [
  ['numStreams', 'num.streams', 1],
  ['commitIntervalMs', 'commit.interval.ms', 1],
  ['statsIntervalMs', 'stats.interval.ms', 1],
  ['releaseFlushTimeoutMs', 'release.flush.timeout.ms', 0],
  ['shutdownTimeoutMs', 'shutdown.timeout.ms', 0],
  ['maxInFlightMessages', 'max.in.flight.messages', 1],
  ['retryBackoffMs', 'retry.backoff.ms', 1],
  ['retryBackoffMaxMs', 'retry.backoff.max.ms', 1],
  ['batchSize', 'batch.size', 1],
  ['lingerMs', 'linger.ms', 0],
  ['zkSessionTimeoutMs', 'zookeeper.session.timeout.ms', 1],
  ['rebalanceMaxRetries', 'rebalance.max.retries', 1],
  ['rebalanceBackoffMs', 'rebalance.backoff.ms', 0],
  ['dropOneIn', 'drop.one.in', 0],
  ['auditWindowMs', 'audit.window.ms', 0],
  ['metricsPort', 'metrics.port', 0],
];

/** Numeric settings that may be absent. */
const optionalNumeric = new Set<keyof MirrorConfig>(['metricsPort']);

const stringKeys: ReadonlyArray<readonly [keyof MirrorConfig, string[]]> = [
  ['target', ['target']],
  ['group', ['group', 'group.id']],
  ['whitelist', ['whitelist']],
  ['blacklist', ['blacklist']],
  ['autoOffsetReset', ['auto.offset.reset']],
  ['auditTopic', ['audit.topic']],
  ['metricsHost', ['metrics.host']],
  ['onGap', ['on.gap']],
];

/**
 * Parses a non-negative integer setting.
 * @throws ConfigError naming `where` and the value
 */
/**
 * The `acks` setting: 1, 2, or `all` (also −1).
 * @throws ConfigError naming `where` for anything else (0 too: the mirror commits only what the target acknowledged)
 */
export function parseAcksSetting(value: unknown, where: string): 1 | 2 | -1 {
  const v = typeof value === 'string' ? value.trim() : value;
  if (v === 1 || v === '1') return 1;
  if (v === 2 || v === '2') return 2;
  if (v === -1 || v === '-1' || v === 'all') return -1;
  throw new ConfigError(`${where} ${JSON.stringify(value)} must be 1, 2 or all (the mirror commits only what the target acknowledged)`);
}

export function parseIntSetting(value: unknown, where: string, least = 0): number {
  const n = typeof value === 'number' ? value : typeof value === 'string' && /^\s*\d+\s*$/.test(value) ? Number(value) : NaN;
  if (!Number.isSafeInteger(n) || n < least) throw new ConfigError(`${where}: ${JSON.stringify(value)} is not an integer ≥ ${least}`);
  return n;
}

/**
 * Reads a config file: JSON when it starts with `{`, else Java properties.
 * @throws ConfigError when it cannot be read or holds an unknown key or a bad value
 */
export function readConfigFile(file: string): Partial<MirrorConfig> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read config file ${file}: ${(err as Error).message}`);
  }
  const out: Partial<MirrorConfig> = {};
  const set = out as Record<string, unknown>;
  if (text.trimStart().startsWith('{')) {
    let json: Record<string, unknown>;
    try {
      json = JSON.parse(text) as Record<string, unknown>;
    } catch (err) {
      throw new ConfigError(`config file ${file}: invalid JSON: ${(err as Error).message}`);
    }
    for (const [key, value] of Object.entries(json)) {
      if (key === 'sources' || key === 'source') {
        const list = Array.isArray(value) ? value : [value];
        if (!list.every((s) => typeof s === 'string')) throw new ConfigError(`${file}: ${key} must be a string or an array of strings`);
        out.sources = [...(out.sources ?? []), ...(list)];
        continue;
      }
      const num = numeric.find(([field, prop]) => field === key || prop === key);
      const str = stringKeys.find(([field, props]) => field === key || props.includes(key));
      if (num) set[num[0]] = parseIntSetting(value, `${file}: ${key}`, num[2]);
      else if (key === 'acks') set['acks'] = parseAcksSetting(value, `${file}: ${key}`);
      else if (str && typeof value === 'string') set[str[0]] = value;
      else throw new ConfigError(`${file}: unknown setting or bad value ${key}=${JSON.stringify(value)}`);
    }
    return out;
  }
  const props = parseProperties(text) as Record<string, string>;
  for (const [key, value] of Object.entries(props)) {
    if (key === 'source' || key.startsWith('source.')) {
      out.sources = [...(out.sources ?? []), value];
      continue;
    }
    const num = numeric.find(([, prop]) => prop === key);
    const str = stringKeys.find(([, propsOf]) => propsOf.includes(key));
    if (key === 'acks') set['acks'] = parseAcksSetting(value, `${file}: ${key}`);
    else if (num) set[num[0]] = parseIntSetting(value, `${file}: ${key}`, num[2]);
    else if (str) set[str[0]] = value;
    else throw new ConfigError(`${file}: unknown setting ${key}`);
  }
  return out;
}

/**
 * A cluster's identity for comparing connect strings: its servers sorted and lower-cased,
 * with the chroot (`127.0.0.1:2181/a` and `127.0.0.1:2181/a/` are the same cluster).
 */
export function clusterIdentity(connect: string): string {
  const { servers, chroot } = parseConnectString(connect);
  const hosts = servers
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .sort();
  return `${hosts.join(',')}${chroot ?? ''}`;
}

/**
 * Completes and checks a configuration: defaults for what is absent; exactly one of whitelist
 * and blacklist, each a valid regular expression; at least one source; no source twice and
 * none equal to the target (a cluster is never mirrored into itself).
 * @throws ConfigError naming the setting and what was seen
 */
export function resolveConfig(partial: Partial<MirrorConfig>): MirrorConfig {
  const c = { ...defaultMirrorConfig, ...partial } as MirrorConfig;
  if (!c.sources || c.sources.length === 0) throw new ConfigError('at least one --source is required');
  if (!c.target) throw new ConfigError('--target is required');
  if (!c.group) throw new ConfigError('--group is required');
  if ((c.whitelist === undefined) === (c.blacklist === undefined)) throw new ConfigError('give exactly one of --whitelist and --blacklist');
  topicFilter(c);
  for (const [field, where, least] of numeric) {
    const value = (c as unknown as Record<string, unknown>)[field];
    if (value === undefined && optionalNumeric.has(field)) continue;
    parseIntSetting(value, where, least);
  }
  if (c.metricsPort !== undefined && c.metricsPort > 65535) throw new ConfigError(`metrics.port ${c.metricsPort} is above 65535`);
  parseAcksSetting(c.acks, 'acks');
  if (c.auditWindowMs !== 0 && c.auditWindowMs < minAuditWindowMs) throw new ConfigError(`audit.window.ms ${c.auditWindowMs} must be 0 (no audit) or at least ${minAuditWindowMs}`);
  try {
    validateTopic(c.auditTopic);
  } catch (err) {
    throw new ConfigError(`audit.topic: ${(err as Error).message}`);
  }
  if (c.onGap !== 'fail' && c.onGap !== 'continue') throw new ConfigError(`on.gap ${String(c.onGap)} must be fail or continue`);
  try {
    parseOffsetReset(c.autoOffsetReset, 'auto.offset.reset');
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  let target: string;
  try {
    target = clusterIdentity(c.target);
  } catch (err) {
    throw new ConfigError(`--target: ${(err as Error).message}`);
  }
  const seen = new Set<string>();
  for (const source of c.sources) {
    let id: string;
    try {
      id = clusterIdentity(source);
    } catch (err) {
      throw new ConfigError(`--source: ${(err as Error).message}`);
    }
    if (id === target) throw new ConfigError(`source ${source} is the target cluster: a cluster is never mirrored into itself`);
    if (seen.has(id)) throw new ConfigError(`source ${source} is given twice`);
    seen.add(id);
  }
  return c;
}

/**
 * The topic selection: a whitelist copies the topics whose whole name matches, a blacklist
 * every topic whose whole name does not. The audit topic is never selected: each cluster's
 * holds the counts of its own tiers (docs/audit.md).
 * @throws ConfigError for an invalid regular expression
 */
export function topicFilter(c: Pick<MirrorConfig, 'whitelist' | 'blacklist' | 'auditTopic'>): (topic: string) => boolean {
  const pattern = c.whitelist ?? c.blacklist ?? '';
  let re: RegExp;
  try {
    re = new RegExp(`^(?:${pattern})$`);
  } catch (err) {
    throw new ConfigError(`${c.whitelist !== undefined ? '--whitelist' : '--blacklist'} ${JSON.stringify(pattern)}: ${(err as Error).message}`);
  }
  return c.whitelist !== undefined ? (t) => t !== c.auditTopic && re.test(t) : (t) => t !== c.auditTopic && !re.test(t);
}
