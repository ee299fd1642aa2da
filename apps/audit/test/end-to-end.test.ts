/**
 * The audit end to end, as deployed: producers → online cluster → mirror maker → analytics
 * cluster, every piece a real process or a real client (brokers, `klog-mirror-maker`,
 * `klog produce --audit`, `klog-audit`), ZooKeeper real, windows of 2 s.
 *
 * - 50,000 messages over three topics (one gzip-compressed, one from `klog produce --audit`):
 *   once everything is copied and counted, every closed window is complete for every tier, and
 *   each tier counted all 50,000.
 * - a mirror maker that drops one message in 1,000 (`--drop-one-in`): the report names the exact
 *   topics and windows and how many messages each lacks, as found by reading both clusters;
 *   `--check` fails; the `--html` page of that report opens in headless Chromium without errors,
 *   with the short windows highlighted, and its screenshot is saved
 *   (apps/audit/test-output/audit-report-end-to-end.png).
 * - a mirror maker killed before it committed and started again: the copies it makes twice
 *   are reported as over, not as loss, and `--check` passes.
 */
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { ZkProducer, windowStartOf, type ZkProducerRecord } from '@klog/client';
import { ClusterReader, MirrorProcess, cleanup, mirrorArgs, startCluster, waitFor, type Read } from '@klog/mirror-maker/testing';
import type { AuditReport } from '../src/reconcile.js';
import { openInChromium } from './chromium.js';
import { auditReport, runAudit, runKlog, tierTotal } from './run-audit.js';

const outputDir = join(dirname(fileURLToPath(import.meta.url)), '../test-output');

afterAll(cleanup);

const windowMs = 2000;
const tiers = ['online/producer', 'online/consumer', 'analytics/mirror', 'analytics/consumer'];

/** An audited producer of the online cluster. */
function auditedProducer(zookeeper: string, host: string, compression: 'none' | 'gzip' = 'none'): ZkProducer {
  return new ZkProducer({ zookeeper, acks: 1, batchSize: 500, lingerMs: 2, compression, metadataHost: host, audit: { windowMs, publishIntervalMs: 500 } });
}

/** Sends `n` records whose creation times spread over the last `spanMs`, in chunks. */
async function sendSpread(producer: ZkProducer, topic: string, n: number, spanMs: number, keyed = false): Promise<void> {
  const start = Date.now() - spanMs;
  for (let i = 0; i < n; i += 1000) {
    const records: ZkProducerRecord[] = [];
    for (let j = i; j < Math.min(n, i + 1000); j++) {
      records.push({ value: `${topic}-${j}`, timestamp: start + Math.floor((j * spanMs) / n), ...(keyed && { key: `k${j % 17}` }) });
    }
    await producer.send(topic, records);
  }
}

/** Messages per `topic\0windowStart` of what a cluster holds. */
function perWindow(read: readonly Read[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const m of read) {
    const k = `${m.topic}\0${windowStartOf(m.timestamp!, windowMs)}`;
    out.set(k, (out.get(k) ?? 0) + 1);
  }
  return out;
}

function auditArgs(online: string, analytics: string, group: string): string[] {
  return ['--zookeeper', `online=${online}`, '--zookeeper', `analytics=${analytics}`, '--window-ms', String(windowMs), '--grace-ms', '1000', '--group', group];
}

/** Runs the audit until `done` holds for its report (each run counts what arrived since the last). */
async function auditUntil(
  args: string[],
  what: string,
  done: (r: AuditReport) => boolean,
  timeoutMs = 90_000,
): Promise<AuditReport & { warnings: string[]; exitCode: number | null }> {
  let last: (AuditReport & { warnings: string[]; exitCode: number | null }) | undefined;
  await waitFor(
    `${what} (last report: ${last ? JSON.stringify(last.summary) : 'none'})`,
    async () => {
      last = await auditReport(args);
      return done(last);
    },
    timeoutMs,
  );
  return last!;
}

const allClosed = (r: AuditReport): boolean => r.windows.length > 0 && r.summary.open === 0;

describe('klog-audit end to end', () => {
  it('finds every closed window complete for every tier after 50,000 messages through a mirror', async () => {
    const [online, analytics] = await Promise.all([startCluster('audit-online', 2), startCluster('audit-analytics', 1)]);
    const web1 = auditedProducer(online.zookeeper, 'web-1');
    const web2 = auditedProducer(online.zookeeper, 'web-2', 'gzip');
    await Promise.all([sendSpread(web1, 'clicks', 25_000, 12_000), sendSpread(web2, 'orders', 15_000, 12_000, true)]);
    await Promise.all([web1.close(), web2.close()]);
    // The command-line producer: 10,000 lines, created now.
    const lines = Array.from({ length: 10_000 }, (_, i) => `log line ${i}`).join('\n') + '\n';
    const cli = await runKlog(['produce', '--zookeeper', online.zookeeper, '--topic', 'logs', '--audit', '--audit-window-ms', String(windowMs)], lines);
    expect(cli.code, cli.stderr).toBe(0);
    const mirror = new MirrorProcess(mirrorArgs([online.zookeeper], analytics.zookeeper, 'mirror', ['--whitelist', '.*', '--audit-window-ms', String(windowMs)]));
    await mirror.mirroring(1);

    const args = auditArgs(online.zookeeper, analytics.zookeeper, 'audit-e2e');
    const report = await auditUntil(args, 'every window closed and complete', (r) => allClosed(r) && r.summary.complete === r.summary.windows && tierTotal(r, 'analytics/consumer') === 50_000);
    expect(report.tiers.map((t) => t.id)).toEqual(tiers);
    for (const tier of tiers) expect(tierTotal(report, tier), tier).toBe(50_000);
    expect(tierTotal(report, 'online/producer', 'clicks')).toBe(25_000);
    expect(tierTotal(report, 'online/producer', 'orders')).toBe(15_000);
    expect(tierTotal(report, 'online/producer', 'logs')).toBe(10_000);
    // Windows of 2 s over 12 s of creation times: several windows per topic.
    expect(report.windows.filter((w) => w.topic === 'clicks').length).toBeGreaterThanOrEqual(6);
    expect(report.discrepancies).toEqual([]);
    expect(report.windows.map((w) => w.topic)).not.toContain('__audit');

    // The table and --check agree (no counting this time: nothing new arrived).
    const table = await runAudit([...args, '--check']);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(/online\/producer\s+online\/consumer\s+analytics\/mirror\s+analytics\/consumer\s+status/);
    expect(table.stdout).toContain(`${report.windows.length} windows: ${report.windows.length} complete, 0 short`);
    await mirror.stop();
  });

  it('names the topics, windows and counts a mirror dropping one message in 1,000 lost, and --check fails', async () => {
    const [online, analytics] = await Promise.all([startCluster('audit-loss-online', 1), startCluster('audit-loss-analytics', 1)]);
    const producer = auditedProducer(online.zookeeper, 'web-1');
    await sendSpread(producer, 'clicks', 12_000, 8000);
    await sendSpread(producer, 'views', 8000, 8000);
    await producer.close();
    const mirror = new MirrorProcess(mirrorArgs([online.zookeeper], analytics.zookeeper, 'mirror', ['--whitelist', '.*', '--audit-window-ms', String(windowMs), '--drop-one-in', '1000']));
    await mirror.mirroring(1);

    const args = auditArgs(online.zookeeper, analytics.zookeeper, 'audit-loss');
    const report = await auditUntil(args, 'the mirror to have copied all but the dropped 20', (r) =>
      allClosed(r) && tierTotal(r, 'online/consumer') === 20_000 && tierTotal(r, 'analytics/mirror') === 19_980 && tierTotal(r, 'analytics/consumer') === 19_980,
    );

    // What was lost, found independently: read both clusters and compare per window.
    const onlineReader = new ClusterReader(online.zookeeper);
    const analyticsReader = new ClusterReader(analytics.zookeeper);
    const before = perWindow(await onlineReader.poll(['clicks', 'views']));
    const after = perWindow(await analyticsReader.poll(['clicks', 'views']));
    await Promise.all([onlineReader.close(), analyticsReader.close()]);
    const lost = [...before].map(([k, n]) => [k, n - (after.get(k) ?? 0)] as const).filter(([, n]) => n > 0);
    expect(lost.reduce((s, [, n]) => s + n, 0)).toBe(20);

    expect(report.summary.short).toBe(lost.length);
    expect(report.summary.missing).toBe(20);
    expect(report.discrepancies.map((d) => [`${d.topic}\0${d.windowStart}`, d.tier, d.kind, d.messages]).sort()).toEqual(lost.map(([k, n]) => [k, 'analytics/mirror', 'short', n]).sort());
    // The analytics cluster holds what the mirror copied: no second discrepancy downstream.
    expect(report.discrepancies.every((d) => d.against === 'online/consumer')).toBe(true);

    mkdirSync(outputDir, { recursive: true });
    const html = join(outputDir, 'audit-report-end-to-end.html');
    const check = await runAudit([...args, '--check', '--html', html]);
    expect(check.code).toBe(1);
    const page = await openInChromium(html, { screenshot: join(outputDir, 'audit-report-end-to-end.png') });
    expect([...page.consoleErrors, ...page.pageErrors, ...page.failedRequests, ...page.externalRequests]).toEqual([]);
    expect(page.chartsDrawn).toBe(4); // clicks and views: counts and differences
    expect(page.highlightedRows.filter((r) => r.status === 'short')).toHaveLength(report.summary.short * 2); // each in the windows table and the discrepancy list
    expect(check.stderr).toContain(`check failed: ${report.summary.windows} windows`);
    for (const d of report.discrepancies) {
      expect(check.stdout).toContain(`short: topic ${d.topic}, window ${new Date(d.windowStart).toISOString().slice(0, 19).replace('T', ' ')} UTC +2s: analytics/mirror counted ${d.count} of ${d.expected} (online/consumer): ${d.messages} missing`);
    }
    await mirror.stop();
  });

  it('reports the copies of a mirror restarted without committing as over, not as loss', async () => {
    const [online, analytics] = await Promise.all([startCluster('audit-dup-online', 1), startCluster('audit-dup-analytics', 1)]);
    // Commits only every 10 minutes: the first mirror dies before its first commit.
    const producer = auditedProducer(online.zookeeper, 'web-1');
    await sendSpread(producer, 'clicks', 10_000, 6000);
    await producer.close();
    const first = new MirrorProcess(mirrorArgs([online.zookeeper], analytics.zookeeper, 'mirror', ['--whitelist', '.*', '--audit-window-ms', String(windowMs), '--commit-interval-ms', '600000']));
    await first.mirroring(1);
    const reader = new ClusterReader(analytics.zookeeper);
    await waitFor('the first mirror to copy everything', async () => (await reader.poll(['clicks'])).length >= 10_000);
    await first.kill9();

    const second = new MirrorProcess(mirrorArgs([online.zookeeper], analytics.zookeeper, 'mirror', ['--whitelist', '.*', '--audit-window-ms', String(windowMs)]));
    await second.mirroring(1);
    await waitFor('the second mirror to copy everything again', async () => (await reader.poll(['clicks'])).length >= 20_000, 90_000);
    await reader.close();

    const args = auditArgs(online.zookeeper, analytics.zookeeper, 'audit-dup');
    const report = await auditUntil(args, 'the analytics cluster counted twice', (r) => allClosed(r) && r.summary.short === 0 && tierTotal(r, 'analytics/consumer') === 20_000);
    expect(tierTotal(report, 'online/producer')).toBe(10_000);
    expect(tierTotal(report, 'online/consumer')).toBe(10_000);
    expect(report.summary.short).toBe(0);
    expect(report.summary.over).toBe(report.summary.windows);
    expect(report.summary.extra).toBe(10_000);
    expect(report.discrepancies.every((d) => d.kind === 'over')).toBe(true);
    const check = await runAudit([...args, '--check']);
    expect(check.code, check.stderr).toBe(0);
    await second.stop();
  });
});
