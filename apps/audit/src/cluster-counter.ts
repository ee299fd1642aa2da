/**
 * The audit consumer (docs/audit.md, tier `consumer`): counts what a cluster holds. It reads
 * every audited topic of the cluster (all but the audit topic) from the offsets its consumer
 * group committed up to each partition's end, counts the messages per topic and window of
 * their creation time, publishes the counts to the cluster's audit topic, and only then
 * commits the offsets it read to.
 *
 * A count that stops between publishing and committing (a crash, Ctrl-C, a ZooKeeper failure)
 * must not count its messages twice: before anything is published, the offset range of each
 * partition is stored (`/consumers/<group>/audit/ranges`, see AuditRangeRegistry), and every
 * event names its range (`instance` = `<group>/<topic>/<brokerId>-<partition>/<from>-<to>`, a
 * replicated topic's partition named `<partition>` there as in ZooKeeper, docs/replication.md §14,
 * `seq` = the window's place among the range's windows). The next count finds the stored range
 * starting at the committed offset, counts exactly that range again into the same events (the
 * reconciler counts each `(instance, seq)` once), commits, and goes on from there.
 *
 * The group counts in one window length for good, stored at its first count: a report may use
 * that window or any multiple of it (the reconciler sums finer windows into coarser ones).
 *
 * It claims each partition in the group's ownership registry (docs/design.md §4) while it reads it, so
 * two auditors running at once never count one partition twice; a partition another member
 * owns is skipped and reported. A partition read for the first time starts at its earliest
 * offset; a committed offset retention has deleted meanwhile resumes at the earliest one kept,
 * and the messages in between are reported as never counted (they show as short). A partition
 * the group counted before whose broker is not registered now (down), and a replicated partition
 * without a live leader, are reported as not counted, so the report does not judge its topic's
 * windows. A replicated topic's partitions are read from their leaders, claimed, committed and
 * ranged as `<topic>/<partition>`.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { type AuditEvent, auditEventVersion, encodeAuditEvent, groupPartition, maxAuditTime, OffsetOutOfRangeError, replicatedBrokerId, windowStartOf, ZkProducer } from '@klog/client';
import type { Logger } from '@klog/logger';
import { AuditRangeRegistry, OffsetRegistry, OwnershipRegistry } from '@klog/zk-registry';
import { type Cluster, partitionLabel, scanPartition, type TopicPartition } from './cluster.js';

/** Settings of a count. */
export interface CountOptions {
  /** The consumer group the audit consumer commits as. */
  readonly group: string;
  /** Window of the report, ms: the group's count window must divide it (the first count sets it to this). */
  readonly windowMs: number;
  readonly auditTopic: string;
  readonly logger: Logger;
}

/** A partition not counted, and why. */
export type SkippedPartition = TopicPartition & { readonly reason: string };

/** What one count did. */
export interface CountResult {
  /** The window the group counts in, ms. */
  readonly countWindowMs: number;
  /** Partitions read. */
  readonly partitions: number;
  /** Messages counted. */
  readonly counted: number;
  /** Messages without a creation time (plain messages) or with one no window holds: read, not counted. */
  readonly untimed: number;
  /** Partitions not read (their counts are partial until a later count reads them). */
  readonly skipped: SkippedPartition[];
  /** Byte ranges retention deleted before they were counted. */
  readonly lost: Array<TopicPartition & { readonly from: number; readonly to: number }>;
}

/** A range of a partition to count. */
interface Range {
  readonly p: TopicPartition;
  readonly from: number;
  readonly to: number;
}

/**
 * Counts what `cluster` holds since the group's last count (see the file comment).
 * @throws Error when the group counts in a window that does not divide `windowMs`; what
 *   publishing the counts throws (nothing is committed then); ZkError when ZooKeeper fails
 */
export async function countCluster(cluster: Cluster, options: CountOptions): Promise<CountResult> {
  const { group, logger } = options;
  const owners = new OwnershipRegistry(cluster.zk);
  const offsets = new OffsetRegistry(cluster.zk);
  const ranges = new AuditRangeRegistry(cluster.zk);
  let countWindowMs = await ranges.countWindowMs(group);
  if (countWindowMs === undefined) {
    countWindowMs = options.windowMs;
    await ranges.setCountWindowMs(group, countWindowMs);
  } else if (options.windowMs % countWindowMs !== 0) {
    throw new Error(`audit group ${group} of cluster ${cluster.name} counts in windows of ${countWindowMs} ms: use a --window-ms that is a multiple of it, or another --group`);
  }
  const consumerId = `${group}_${hostname()}-${Date.now()}-${randomBytes(4).toString('hex')}`;
  const host = hostname();
  const claimed: TopicPartition[] = [];
  const skipped: SkippedPartition[] = [];
  const lost: Array<TopicPartition & { from: number; to: number }> = [];
  let untimed = 0;
  let counted = 0;
  const read = new Set<string>();
  const producer = new ZkProducer({ zookeeper: cluster.spec.connect, acks: 2, logger });

  /** Counts the ranges, publishes their events, then commits their ends; returns the ranges read (the others are added to `skipped`). */
  const countRanges = async (list: readonly Range[]): Promise<Range[]> => {
    const events: AuditEvent[] = [];
    const done: Range[] = [];
    for (const r of list) {
      const byWindow = new Map<number, number>();
      try {
        const consumer = await cluster.consumer(r.p);
        await scanPartition(consumer, r.p, r.from, r.to, (messages) => {
          for (const m of messages) {
            if (m.offset >= r.to) return; // appended after the range was fixed: the next count's
            if (m.timestamp === undefined || !(m.timestamp >= 0 && m.timestamp < maxAuditTime)) untimed++;
            else {
              const w = windowStartOf(m.timestamp, countWindowMs);
              byWindow.set(w, (byWindow.get(w) ?? 0) + 1);
            }
          }
        });
      } catch (err) {
        skipped.push({ ...r.p, reason: err instanceof OffsetOutOfRangeError ? `retention deleted data while it was read: ${err.message}` : (err as Error).message });
        continue;
      }
      read.add(key(r.p));
      done.push(r);
      const instance = `${group}/${r.p.topic}/${partitionLabel(r.p)}/${r.from}-${r.to}`;
      [...byWindow.entries()]
        .sort(([a], [b]) => a - b)
        .forEach(([windowStart, count], seq) => {
          counted += count;
          events.push({ v: auditEventVersion, tier: 'consumer', host, instance, seq, topic: r.p.topic, windowStart, windowMs: countWindowMs, count, group });
        });
    }
    // Counts first: a committed offset never passes a message whose count was not published.
    if (events.length > 0) await producer.send(options.auditTopic, events.map((e) => ({ key: e.topic, value: encodeAuditEvent(e) })));
    for (const r of done) await offsets.commit(group, r.p.topic, groupPartition(r.p), r.to);
    return done;
  };

  try {
    const registered = await cluster.partitions(options.auditTopic);
    const known = new Set(registered.map(key));
    for (const topic of await offsets.listTopics(group)) {
      if (topic === options.auditTopic) continue;
      for (const o of await offsets.list(group, topic)) {
        if (!known.has(key({ topic, ...o }))) skipped.push({ topic, brokerId: o.brokerId, partition: o.partition, reason: 'counted before, not registered now (its broker is down)' });
      }
      for (const o of await offsets.listReplicated(group, topic)) {
        const p = { topic, brokerId: replicatedBrokerId, partition: o.partition };
        if (!known.has(key(p))) skipped.push({ ...p, reason: 'counted before, not a partition of a replicated topic now (the topic was deleted)' });
      }
    }
    const replays: Range[] = [];
    const fresh: Range[] = [];
    for (const p of registered) {
      if (!(await owners.claim(group, p.topic, groupPartition(p), consumerId))) {
        skipped.push({ ...p, reason: 'owned by another member of the group (another klog-audit is counting it)' });
        continue;
      }
      claimed.push(p);
      try {
        const consumer = await cluster.consumer(p);
        const earliest = await consumer.earliestOffset(p.topic, p.partition);
        const end = await consumer.latestOffset(p.topic, p.partition);
        const committed = await offsets.read(group, p.topic, groupPartition(p));
        const stored = await ranges.range(group, p.topic, groupPartition(p));
        let from = committed ?? earliest;
        if (stored !== undefined && stored.from === committed && stored.from >= earliest && stored.to <= end) {
          replays.push({ p, from: stored.from, to: stored.to });
          from = stored.to;
        } else if (from < earliest || from > end) {
          if (from < earliest) lost.push({ ...p, from, to: earliest });
          logger.warn({ cluster: cluster.name, ...p, committed, earliest, end }, 'committed offset out of range; counting from the earliest offset');
          from = earliest;
        }
        if (from < end) fresh.push({ p, from, to: end });
      } catch (err) {
        skipped.push({ ...p, reason: (err as Error).message });
      }
    }
    // An interrupted count's ranges first, into the same events as before.
    const replayed = new Set((await countRanges(replays)).map((r) => key(r.p)));
    const next = fresh.filter((r) => replays.every((x) => key(x.p) !== key(r.p)) || replayed.has(key(r.p)));
    for (const r of next) await ranges.setRange(group, r.p.topic, groupPartition(r.p), { from: r.from, to: r.to });
    await countRanges(next);
  } finally {
    for (const p of claimed) await owners.release(group, p.topic, groupPartition(p)).catch(() => {});
    await producer.close().catch((err: unknown) => logger.warn({ err }, 'closing the audit producer failed'));
  }
  return { countWindowMs, partitions: read.size, counted, untimed, skipped, lost };
}

function key(p: TopicPartition): string {
  return `${p.topic}\0${p.brokerId}\0${p.partition}`;
}
