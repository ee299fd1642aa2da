/**
 * `klog-audit` on a replicated topic (docs/replication.md §14, docs/audit.md): the audit consumer
 * counts its partitions `0..N-1`, read from their leaders, and keeps their offsets and ranges as
 * `<topic>/<partition>` (`/consumers/<group>/offsets/<topic>/<partition>`,
 * `/consumers/<group>/audit/ranges/<topic>/<partition>`); a count interrupted between publishing
 * and committing is counted once; after a leader moves, the next count reads on from the new
 * leader. Two brokers as child processes in cluster mode (their controller), the real ZooKeeper,
 * `klog produce --audit --acks all` and `klog-audit` as users run them.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Admin } from '@klog/client';
import { cleanup, startCluster, waitFor } from '@klog/mirror-maker/testing';
import { AuditRangeRegistry, OffsetRegistry, ReplicatedTopicRegistry, ZkClient } from '@klog/zk-registry';
import type { AuditReport } from '../src/reconcile.js';
import { auditReport, runKlog, tierTotal } from './run-audit.js';

afterAll(cleanup);

const windowMs = 1000;

describe('klog-audit on a replicated topic', () => {
  it('counts every partition as <topic>/<partition>, once across a replayed count, and on from a new leader', async () => {
    const cluster = await startCluster('audit-replicated', 2);
    const zk = await ZkClient.connect(cluster.zookeeper);
    try {
      const admin = new Admin({ zookeeper: cluster.zookeeper });
      await admin.createTopic('events', { partitions: 2, replicationFactor: 2, minInsyncReplicas: 1 });
      // The audit topic replicated too, so that the producer tier's counts outlive a broker.
      await admin.createTopic('__audit', { partitions: 2, replicationFactor: 2, minInsyncReplicas: 1 });
      await admin.close();
      const produce = async (topic: string, from: number, n: number, acks: string): Promise<void> => {
        const lines = Array.from({ length: n }, (_, i) => `${topic}-${from + i}`).join('\n') + '\n';
        const r = await runKlog(['produce', '--zookeeper', cluster.zookeeper, '--topic', topic, '--acks', acks, '--audit', '--audit-window-ms', String(windowMs)], lines);
        expect(r.code, r.stderr).toBe(0);
      };
      await produce('events', 0, 3000, 'all');
      await produce('clicks', 0, 500, '2');

      const args = ['--zookeeper', `c=${cluster.zookeeper}`, '--window-ms', String(windowMs), '--grace-ms', '0', '--group', 'audit-repl'];
      const countedAll = async (events: number): Promise<AuditReport & { warnings: string[] }> => {
        let last: (AuditReport & { warnings: string[] }) | undefined;
        const done = (r: AuditReport): boolean => r.summary.open === 0 && tierTotal(r, 'c/producer', 'events') === events && tierTotal(r, 'c/consumer', 'events') === events;
        await waitFor(`every window closed with ${events} events counted`, async () => done((last = await auditReport(args)))).catch((err: unknown) => {
          const seen = last && { producer: tierTotal(last, 'c/producer', 'events'), consumer: tierTotal(last, 'c/consumer', 'events'), summary: last.summary, warnings: last.warnings };
          throw new Error(`${(err as Error).message}; last report ${JSON.stringify(seen)}`);
        });
        return last!;
      };
      const first = await countedAll(3000);
      expect(tierTotal(first, 'c/consumer', 'clicks')).toBe(500);
      expect(first.windows.filter((w) => w.topic === 'events').every((w) => w.status === 'complete')).toBe(true);
      expect(first.warnings).toEqual([]);

      // The audit consumer's names of the replicated partitions: <partition>, never <brokerId>-<partition>.
      expect(await zk.getChildren('/consumers/audit-repl/offsets/events')).toEqual(['0', '1']);
      expect(await zk.getChildren('/consumers/audit-repl/audit/ranges/events')).toEqual(['0', '1']);
      expect(await zk.getChildren('/consumers/audit-repl/offsets/__audit')).toEqual(['0', '1']); // the audit topic's ends, read by the report
      const offsets = new OffsetRegistry(zk);
      const ranges = new AuditRangeRegistry(zk);
      const committed = await offsets.listReplicated('audit-repl', 'events');
      expect(committed.map((o) => o.partition)).toEqual([0, 1]);

      // A count interrupted after publishing and before committing: the next one counts the same ranges into the same events.
      for (const o of committed) {
        const range = await ranges.range('audit-repl', 'events', { replicated: true, partition: o.partition });
        expect(range?.to).toBe(o.offset);
        await offsets.commit('audit-repl', 'events', { replicated: true, partition: o.partition }, range!.from);
      }
      const again = await auditReport(args);
      expect(tierTotal(again, 'c/consumer', 'events')).toBe(3000);
      expect(again.ignored.duplicateEvents).toBeGreaterThan(0);
      expect(again.summary.over).toBe(0);

      // A leader leaves (controlled shutdown): the next count reads on from the other replica.
      const states = new ReplicatedTopicRegistry(zk);
      await waitFor('both replicas in every ISR', async () => [...(await states.readPartitionStates('events')).values()].every((n) => n.state.isr.length === 2));
      const leader = (await states.readPartitionState('events', 0))!.state.leader;
      expect(await cluster.brokers[leader]!.stop()).toBe(0);
      await waitFor('every partition led by the broker left', async () => [...(await states.readPartitionStates('events')).values()].every((n) => n.state.leader === 1 - leader));
      await produce('events', 3000, 1000, 'all');
      const moved = await countedAll(4000);
      expect(moved.windows.filter((w) => w.topic === 'events').every((w) => w.status === 'complete')).toBe(true);
      expect(moved.warnings.filter((w) => w.includes('events'))).toEqual([]);
    } finally {
      await zk.close();
    }
  });
});
