/** The reconciler (pure): tiers, comparisons and verdicts from synthetic audit events. */
import { describe, expect, it } from 'vitest';
import type { AuditEvent, AuditTier } from '@klog/client';
import { reconcile, type ClusterEvents } from '../src/reconcile.js';

let seq = 0;
function ev(tier: AuditTier, topic: string, windowStart: number, count: number, extra: Partial<AuditEvent> = {}): AuditEvent {
  return { v: 1, tier, host: 'h', instance: `i-${tier}`, seq: seq++, topic, windowStart, windowMs: 1000, count, ...(tier === 'consumer' && { group: 'klog-audit' }), ...extra };
}
const options = { windowMs: 1000, graceMs: 500, now: 10_000, group: 'klog-audit' };

function chain(producer: number, online: number, mirror: number, analytics: number, windowStart = 0, topic = 't'): ClusterEvents[] {
  const nonzero = (e: AuditEvent) => e.count > 0;
  return [
    { name: 'online', events: [ev('producer', topic, windowStart, producer), ev('consumer', topic, windowStart, online)].filter(nonzero) },
    { name: 'analytics', events: [ev('mirror', topic, windowStart, mirror), ev('consumer', topic, windowStart, analytics)].filter(nonzero) },
  ];
}

describe('reconcile', () => {
  it('orders tiers by flow and finds a window complete when every tier matches', () => {
    const r = reconcile(chain(100, 100, 100, 100), options);
    expect(r.tiers.map((t) => t.id)).toEqual(['online/producer', 'online/consumer', 'analytics/mirror', 'analytics/consumer']);
    expect(r.windows).toEqual([
      {
        topic: 't',
        windowStart: 0,
        windowEnd: 1000,
        status: 'complete',
        counts: [
          { tier: 'online/producer', count: 100 },
          { tier: 'online/consumer', count: 100, expected: 100 },
          { tier: 'analytics/mirror', count: 100, expected: 100 },
          { tier: 'analytics/consumer', count: 100, expected: 100 },
        ],
      },
    ]);
    expect(r.summary).toMatchObject({ windows: 1, complete: 1, short: 0, over: 0, missing: 0, extra: 0 });
  });

  it('names the tier that lost messages and how many', () => {
    const r = reconcile(chain(100, 100, 97, 97), options);
    expect(r.windows[0]!.status).toBe('short');
    expect(r.discrepancies).toEqual([{ topic: 't', windowStart: 0, tier: 'analytics/mirror', against: 'online/consumer', kind: 'short', expected: 100, count: 97, messages: 3 }]);
    expect(r.summary.missing).toBe(3);
  });

  it('reports duplicates as over, not as loss', () => {
    const r = reconcile(chain(100, 100, 100, 150), options);
    expect(r.windows[0]!.status).toBe('over');
    expect(r.discrepancies).toEqual([expect.objectContaining({ tier: 'analytics/consumer', kind: 'over', messages: 50 })]);
    expect(r.summary).toMatchObject({ short: 0, over: 1, extra: 50 });
  });

  it('keeps a window open until its grace has passed', () => {
    expect(reconcile(chain(100, 90, 90, 90, 9000), options).windows[0]!.status).toBe('open');
    expect(reconcile(chain(100, 90, 90, 90, 9000), { ...options, now: 10_500 }).windows[0]!.status).toBe('short');
    expect(reconcile(chain(100, 90, 90, 90, 9000), options).discrepancies).toEqual([]);
  });

  it('counts a topic the consumer tier saw none of as lost, once it counts the cluster', () => {
    const clusters: ClusterEvents[] = [{ name: 'online', events: [ev('producer', 'a', 0, 5), ev('producer', 'b', 0, 7), ev('consumer', 'a', 0, 5)] }];
    const r = reconcile(clusters, options);
    expect(r.windows.find((w) => w.topic === 'b')!.counts).toEqual([{ tier: 'online/producer', count: 7 }, { tier: 'online/consumer', count: 0, expected: 7, diff: -7 }]);
    expect(r.windows.find((w) => w.topic === 'b')!.status).toBe('short');
  });

  it('leaves out tiers that never counted a topic (a topic not mirrored)', () => {
    const clusters: ClusterEvents[] = [
      { name: 'online', events: [ev('producer', 'local', 0, 5), ev('consumer', 'local', 0, 5)] },
      { name: 'analytics', events: [ev('mirror', 'other', 0, 1), ev('consumer', 'other', 0, 1)] },
    ];
    const r = reconcile(clusters, options);
    expect(r.windows.find((w) => w.topic === 'local')!).toMatchObject({ status: 'complete', counts: [{ tier: 'online/producer' }, { tier: 'online/consumer' }] });
  });

  it('sums producer and mirror tiers into a cluster, and compares a mirror with the inbound tiers when nothing counts the cluster before it', () => {
    const clusters: ClusterEvents[] = [
      { name: 'online', events: [ev('producer', 't', 0, 10)] },
      { name: 'analytics', events: [ev('mirror', 't', 0, 10), ev('producer', 't', 0, 4), ev('consumer', 't', 0, 14)] },
    ];
    const r = reconcile(clusters, options);
    expect(r.windows[0]!.counts).toEqual([
      { tier: 'online/producer', count: 10 },
      { tier: 'analytics/producer', count: 4 },
      { tier: 'analytics/mirror', count: 10, expected: 10 },
      { tier: 'analytics/consumer', count: 14, expected: 14 },
    ]);
  });

  it('sums events across emitters and finer windows, and ignores duplicates, other groups and windows that do not divide', () => {
    const p1 = ev('producer', 't', 0, 3, { instance: 'p1', windowMs: 500 });
    const p2 = ev('producer', 't', 500, 4, { instance: 'p2', windowMs: 500 });
    const r = reconcile(
      [
        {
          name: 'online',
          events: [p1, p1, p2, ev('consumer', 't', 0, 7), ev('consumer', 't', 0, 99, { group: 'someone-else' }), ev('producer', 't', 0, 5, { windowMs: 300 })],
          undecodable: 2,
        },
      ],
      options,
    );
    expect(r.windows[0]!.counts).toEqual([{ tier: 'online/producer', count: 7 }, { tier: 'online/consumer', count: 7, expected: 7 }]);
    expect(r.ignored).toEqual({ duplicateEvents: 1, otherGroups: 1, unalignedWindows: 1, undecodable: 2 });
  });

  it('does not judge windows whose counts are known to be partial, and says why', () => {
    const clusters = chain(100, 60, 60, 60);
    const partial: ClusterEvents[] = [{ ...clusters[0]!, incomplete: [{ cluster: 'online', tier: 'consumer', topic: 't', reason: 'partitions 1-0 not counted: broker down' }] }, clusters[1]!];
    const r = reconcile(partial, options);
    expect(r.windows[0]!.status).toBe('incomplete');
    expect(r.discrepancies).toEqual([]);
    expect(r.summary).toMatchObject({ incomplete: 1, short: 0 });
    expect(r.incomplete).toEqual([{ cluster: 'online', tier: 'consumer', topic: 't', reason: 'partitions 1-0 not counted: broker down' }]);
    // The whole audit log of a cluster unread: every topic of that cluster.
    const unread = reconcile([clusters[0]!, { ...clusters[1]!, incomplete: [{ cluster: 'analytics', reason: 'audit topic partition 0-1 down' }] }], options);
    expect(unread.windows[0]!.status).toBe('incomplete');
  });

  it('does not judge a topic one of whose tiers counts in windows that do not divide the report\'s', () => {
    const clusters: ClusterEvents[] = [
      { name: 'online', events: [ev('producer', 't', 0, 100), ev('consumer', 't', 0, 100)] },
      { name: 'analytics', events: [ev('mirror', 't', 0, 90, { windowMs: 600_000 }), ev('consumer', 't', 0, 90)] },
    ];
    const r = reconcile(clusters, options);
    expect(r.windows[0]!.status).toBe('incomplete');
    expect(r.incomplete).toEqual([expect.objectContaining({ cluster: 'analytics', tier: 'mirror', topic: 't', reason: expect.stringMatching(/600000 ms do not divide the report's 1000 ms/) as unknown })]);
  });

  it('compares a cluster nothing audited into (a mirror without audit) with the cluster before it', () => {
    const clusters: ClusterEvents[] = [
      { name: 'online', events: [ev('producer', 't', 0, 100), ev('consumer', 't', 0, 100)] },
      { name: 'analytics', events: [ev('consumer', 't', 0, 95)] },
    ];
    const r = reconcile(clusters, options);
    expect(r.discrepancies).toEqual([expect.objectContaining({ tier: 'analytics/consumer', against: 'online/consumer', kind: 'short', messages: 5 })]);
  });

  it('refuses clusters of one name', () => {
    expect(() => reconcile([{ name: 'a', events: [] }, { name: 'a', events: [] }], options)).toThrow(RangeError);
  });
});
