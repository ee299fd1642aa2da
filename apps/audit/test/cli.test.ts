/**
 * `klog-audit` on bad input: bad arguments and an unreachable cluster exit 2 with one line on
 * stderr; garbage in the audit topic and plain (untimed) messages are reported, not fatal. A
 * count interrupted after publishing and before committing is not counted twice; the group's
 * count window cannot be made finer.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { cleanup, startCluster } from '@klog/mirror-maker/testing';
import { AuditRangeRegistry, OffsetRegistry, ZkClient } from '@klog/zk-registry';
import { removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { auditReport, runAudit, runKlog } from './run-audit.js';

afterAll(cleanup);

describe('klog-audit arguments', () => {
  it.each([
    [['--window-ms', '1000'], /--zookeeper/],
    [['--zookeeper', '127.0.0.1:2181', '--window-ms', '999'], /--window-ms: "999" is not an integer ≥ 1000/],
    [['--zookeeper', 'a=127.0.0.1:2181', '--zookeeper', 'a=127.0.0.1:2182'], /two clusters are named a/],
    [['--zookeeper', 'bad name=127.0.0.1:2181'], /a cluster name is/],
    [['--zookeeper', '127.0.0.1:2181', '--audit-topic', 'a/b'], /topic/],
    [['--zookeeper', '127.0.0.1:2181', '--grace-ms', '-1'], /--grace-ms/],
  ])('%j exits 2 with one line', async (args, message) => {
    const r = await runAudit(args);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(message);
    expect(r.stdout).toBe('');
  });

  it('exits 1 naming a cluster whose ZooKeeper cannot be reached', async () => {
    const r = await runAudit(['--zookeeper', 'online=127.0.0.1:1', '--window-ms', '1000']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^klog-audit: cannot reach cluster online \(127\.0\.0\.1:1\)/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  }, 30_000);
});

describe('klog-audit --check with nothing to judge', () => {
  it('exits 1 with one line when there are no audit events, or every window is still open', async () => {
    const cluster = await startCluster('audit-empty', 1);
    const none = await runAudit(['--zookeeper', `c=${cluster.zookeeper}`, '--window-ms', '1000', '--group', 'audit-empty', '--check']);
    expect(none.code, none.stderr).toBe(1);
    expect(none.stdout).toMatch(/no audit events yet/);
    expect(none.stderr.trim().split('\n')).toEqual(['klog-audit: check failed: nothing to judge: no audit events in c (audit topic __audit)']);
    const produced = await runKlog(['produce', '--zookeeper', cluster.zookeeper, '--topic', 'fresh', '--audit', '--audit-window-ms', '60000'], 'x\ny\n');
    expect(produced.code, produced.stderr).toBe(0);
    const open = await runAudit(['--zookeeper', `c=${cluster.zookeeper}`, '--window-ms', '60000', '--group', 'audit-empty', '--check']);
    expect(open.code, open.stderr).toBe(1);
    expect(open.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^klog-audit: check failed: nothing to judge: no window has closed yet: \d+ open \(grace 60000 ms\)$/)]);
    // Without --check the same report exits 0.
    expect((await runAudit(['--zookeeper', `c=${cluster.zookeeper}`, '--window-ms', '60000', '--group', 'audit-empty'])).code).toBe(0);
  });
});

describe('klog-audit on odd data', () => {
  it('reports garbage in the audit topic and plain messages without failing', async () => {
    const cluster = await startCluster('audit-cli', 1);
    const garbage = await runKlog(['produce', '--zookeeper', cluster.zookeeper, '--topic', '__audit'], 'not json\n{"v":1}\n');
    expect(garbage.code, garbage.stderr).toBe(0);
    const plain = await runKlog(['produce', '--zookeeper', cluster.zookeeper, '--topic', 'plain'], 'a\nb\nc\n');
    expect(plain.code, plain.stderr).toBe(0);
    const audited = await runKlog(['produce', '--zookeeper', cluster.zookeeper, '--topic', 'audited', '--audit', '--audit-window-ms', '1000'], 'x\ny\n');
    expect(audited.code, audited.stderr).toBe(0);
    const report = await auditReport(['--zookeeper', `only=${cluster.zookeeper}`, '--window-ms', '1000', '--grace-ms', '0', '--group', 'audit-cli']);
    expect(report.ignored.undecodable).toBe(2);
    expect(report.warnings).toContain('only: 3 messages without a creation time (or with one no window holds) were not counted');
    expect(report.windows.map((w) => w.topic)).toEqual(expect.arrayContaining(['audited']));
    expect(report.windows.filter((w) => w.topic === 'audited').reduce((n, w) => n + w.counts.find((c) => c.tier === 'only/consumer')!.count, 0)).toBe(2);
    const flags = await runKlog(['produce', '--zookeeper', cluster.zookeeper, '--topic', 't', '--audit-window-ms', '1000'], 'x\n');
    expect(flags.code).not.toBe(0);
    expect(flags.stderr).toMatch(/--audit-window-ms and --audit-topic apply with --audit/);
  });
});

describe('klog-audit counting again', () => {
  it('does not count twice a range whose counts were published and not committed, and refuses a finer window', async () => {
    const cluster = await startCluster('audit-replay', 1);
    const lines = Array.from({ length: 3000 }, (_, i) => `m${i}`).join('\n') + '\n';
    const produced = await runKlog(['produce', '--zookeeper', cluster.zookeeper, '--topic', 'replayed', '--audit', '--audit-window-ms', '1000'], lines);
    expect(produced.code, produced.stderr).toBe(0);
    const args = ['--zookeeper', `c=${cluster.zookeeper}`, '--window-ms', '2000', '--grace-ms', '0', '--group', 'replay'];
    const first = await auditReport(args);
    const total = (r: typeof first) => r.windows.reduce((n, w) => n + (w.counts.find((c) => c.tier === 'c/consumer')?.count ?? 0), 0);
    expect(total(first)).toBe(3000);

    // The state a crash between publishing and committing leaves: ranges stored, counts
    // published, offsets where they were before the count.
    const zk = await ZkClient.connect(cluster.zookeeper);
    try {
      const ranges = new AuditRangeRegistry(zk);
      const offsets = new OffsetRegistry(zk);
      for (const o of await offsets.list('replay', 'replayed')) {
        const range = await ranges.range('replay', 'replayed', o);
        expect(range?.to).toBe(o.offset);
        await offsets.commit('replay', 'replayed', o, range!.from);
      }
    } finally {
      await zk.close();
    }
    const again = await auditReport(args);
    expect(total(again)).toBe(3000);
    expect(again.ignored.duplicateEvents).toBeGreaterThan(0);
    expect(again.summary.over).toBe(0);

    const finer = await runAudit([...args.slice(0, 2), '--window-ms', '1000', '--group', 'replay']);
    expect(finer.code).toBe(1);
    expect(finer.stderr).toMatch(/counts in windows of 2000 ms: use a --window-ms that is a multiple of it/);
  });

  it('exits 1 for a cluster with no broker (a mistyped chroot)', async () => {
    // A chroot nothing registered under, on the tests' ZooKeeper (KLOG_ZK_CONNECT), not a fixed port.
    const empty = testConnectString('klog-audit-no-such-cluster');
    try {
      const r = await runAudit(['--zookeeper', empty, '--window-ms', '1000']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/no broker is registered in cluster cluster1/);
    } finally {
      await removeChroot(empty).catch(() => {});
    }
  });
});
