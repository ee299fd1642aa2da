#!/usr/bin/env node
/**
 * `klog-audit` (docs/audit.md): counts what each `--zookeeper` cluster holds (the audit
 * consumer, tier `consumer`), reads every cluster's audit topic, reconciles the tiers per
 * (topic, window) and prints the report: a table, or `--json`; `--html FILE` also writes a
 * self-contained page with a chart. Clusters are given in the order messages flow (the online
 * cluster first, then the analytics cluster mirrored from it).
 *
 * Exit status, as every klog command's (README, "Exit codes"): 0; 1 with `--check` when a closed
 * window is short (messages lost) or could not be judged (incomplete: some of its counts are
 * partial), or when there is nothing to judge (no audit events, or every window still open), and
 * for a cluster that cannot be reached; 2 for bad arguments (one line on stderr).
 */
import { createRequire } from 'node:module';
import { accessSync, constants, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { defaultAuditTopic, defaultAuditWindowMs, minAuditWindowMs } from '@klog/client';
import { validateTopic } from '@klog/protocol';
import { createLogger, logFormats, type LogFormat, type LogLevel, logLevels } from '@klog/logger/pino';
import { readAuditLog } from './audit-log.js';
import { Cluster, parseClusterSpecs, partitionLabel } from './cluster.js';
import { countCluster } from './cluster-counter.js';
import { renderHtmlReport } from './html-report.js';
import { reconcile, type ClusterEvents, type IncompleteTier } from './reconcile.js';
import { renderTable, summaryLine } from './table.js';

/** A bad argument found after commander parsed them (exit code 2, as commander's own). */
class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** The consumer group the audit consumer commits as, unless `--group` says otherwise. */
export const defaultAuditGroup = 'klog-audit';

const int = (flag: string, least: number) => (v: string): number => {
  const n = /^\d+$/.test(v.trim()) ? Number(v) : NaN;
  if (!Number.isSafeInteger(n) || n < least) throw new InvalidArgumentError(`${flag}: ${JSON.stringify(v)} is not an integer ≥ ${least}`);
  return n;
};
const collect = (v: string, previous: string[] = []): string[] => [...previous, v];
const topic = (v: string): string => {
  try {
    validateTopic(v);
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
  return v;
};

interface AuditOptions {
  zookeeper: string[];
  windowMs: number;
  graceMs?: number;
  auditTopic: string;
  group: string;
  count: boolean;
  json?: boolean;
  html?: string;
  check?: boolean;
  logLevel: LogLevel;
  logFormat: LogFormat;
}

const program = new Command('klog-audit')
  .description('klog audit: counts each cluster, reads the audit topics and reconciles per-window message counts between tiers')
  .version((createRequire(import.meta.url)('../package.json') as { version: string }).version, '-V, --version', 'print the klog version')
  .requiredOption('--zookeeper <[name=]zk-connect>', 'a cluster, in the order messages flow through them (repeat: online first, then analytics)', collect)
  .option('--window-ms <ms>', `window length in ms (at least ${minAuditWindowMs}); producers and mirror makers must use it or a divisor of it`, int('--window-ms', minAuditWindowMs), defaultAuditWindowMs)
  .option('--grace-ms <ms>', 'how long after its end a window stays open (default: one window)', int('--grace-ms', 0))
  .option('--audit-topic <topic>', 'the audit topic of every cluster', topic, defaultAuditTopic)
  .option('--group <id>', 'consumer group the audit consumer counts and commits as', defaultAuditGroup)
  .option('--no-count', 'do not count the clusters: report from the audit topics alone')
  .option('--json', 'print the report as one JSON object instead of a table')
  .option('--html <file>', 'also write the report as a self-contained HTML page with a chart')
  .option('--check', 'exit 1 when a closed window is short (messages lost) or incomplete (not judged), or nothing can be judged yet')
  .addOption(new Option('--log-level <level>', 'lowest level of the logs on stderr').choices(logLevels).default('warn'))
  .addOption(new Option('--log-format <format>', 'auto: pretty on a terminal, JSON lines otherwise').choices(logFormats).default('auto'))
  .addHelpText(
    'after',
    `
Examples:
  klog-audit --zookeeper online=127.0.0.1:2181/klog --window-ms 10000 --grace-ms 5000
  klog-audit --zookeeper online=127.0.0.1:2181/online --zookeeper analytics=127.0.0.1:2181/analytics --check
  klog-audit --zookeeper 127.0.0.1:2181/klog --no-count --json --html audit.html

Exit codes: 0 ok, 1 a failed --check or a failure (a cluster that cannot be reached), 2 usage error.`,
  )
  .exitOverride()
  .showHelpAfterError(false);

async function main(argv: string[]): Promise<number> {
  program.parse(argv);
  const o = program.opts<AuditOptions>();
  let specs: ReturnType<typeof parseClusterSpecs>;
  try {
    specs = parseClusterSpecs(o.zookeeper);
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (o.html !== undefined) {
    try {
      accessSync(dirname(resolve(o.html)), constants.W_OK);
    } catch {
      throw new UsageError(`--html ${o.html}: its folder does not exist or is not writable`);
    }
  }
  const logger = createLogger({ name: 'klog-audit', level: o.logLevel, format: o.logFormat, fd: 2 });
  const graceMs = o.graceMs ?? o.windowMs;
  const warnings: string[] = [];
  const clusters: Cluster[] = [];
  try {
    for (const spec of specs) {
      let cluster: Cluster;
      try {
        cluster = await Cluster.open(spec, { logger });
      } catch (err) {
        throw new Error(`cannot reach cluster ${spec.name} (${spec.connect}): ${(err as Error).message}`, { cause: err });
      }
      clusters.push(cluster);
      if ((await cluster.registry.listBrokerIds()).length === 0) {
        throw new Error(`no broker is registered in cluster ${spec.name} (${spec.connect}): check the connect string and its chroot`);
      }
    }
    const events: ClusterEvents[] = [];
    for (const cluster of clusters) {
      const partial: IncompleteTier[] = [];
      if (o.count) {
        const r = await countCluster(cluster, { group: o.group, windowMs: o.windowMs, auditTopic: o.auditTopic, logger });
        // One line per topic and reason, however many partitions.
        const byReason = new Map<string, { topic: string; reason: string; partitions: string[] }>();
        for (const s of r.skipped) {
          const k = `${s.topic}\0${s.reason}`;
          const entry = byReason.get(k) ?? { topic: s.topic, reason: s.reason, partitions: [] };
          entry.partitions.push(partitionLabel(s));
          byReason.set(k, entry);
        }
        for (const e of byReason.values()) {
          const reason = `partitions ${e.partitions.join(', ')} not counted: ${e.reason}`;
          warnings.push(`${cluster.name}: ${e.topic} ${reason}`);
          partial.push({ cluster: cluster.name, tier: 'consumer', topic: e.topic, reason });
        }
        for (const l of r.lost) warnings.push(`${cluster.name}: ${l.topic} ${partitionLabel(l)} offsets [${l.from}, ${l.to}) were deleted by retention before they were counted`);
        if (r.untimed > 0) warnings.push(`${cluster.name}: ${r.untimed} messages without a creation time (or with one no window holds) were not counted`);
      }
      const log = await readAuditLog(cluster, o.auditTopic, o.group);
      for (const u of log.unreadable) {
        warnings.push(`${cluster.name}: audit topic partition ${u}`);
        partial.push({ cluster: cluster.name, reason: `audit topic partition ${u}` });
      }
      events.push({ name: cluster.name, events: log.events, undecodable: log.undecodable, incomplete: partial });
    }
    const report = reconcile(events, { windowMs: o.windowMs, graceMs, now: Date.now(), group: o.group });
    for (const w of warnings) process.stderr.write(`klog-audit: warning: ${w}\n`);
    process.stdout.write(o.json ? `${JSON.stringify({ ...report, warnings })}\n` : renderTable(report));
    if (o.html !== undefined) {
      writeFileSync(o.html, renderHtmlReport(report, warnings));
      process.stderr.write(`klog-audit: wrote ${o.html}\n`);
    }
    if (o.check && (report.summary.short > 0 || report.summary.incomplete > 0)) {
      process.stderr.write(`klog-audit: check failed: ${summaryLine(report)}\n`);
      return 1;
    }
    const judged = report.summary.complete + report.summary.short + report.summary.over;
    if (o.check && judged === 0) {
      const why =
        report.windows.length === 0
          ? `no audit events in ${clusters.map((c) => c.name).join(', ')} (audit topic ${o.auditTopic})`
          : `no window has closed yet: ${report.summary.open} open (grace ${graceMs} ms)`;
      process.stderr.write(`klog-audit: check failed: nothing to judge: ${why}\n`);
      return 1;
    }
    return 0;
  } finally {
    for (const c of clusters) await c.close().catch(() => {});
  }
}

main(process.argv).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof CommanderError) process.exit(err.exitCode === 0 ? 0 : 2);
    process.stderr.write(`klog-audit: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(err instanceof UsageError ? 2 : 1);
  },
);
