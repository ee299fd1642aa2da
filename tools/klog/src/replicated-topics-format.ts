/**
 * The text and JSON `klog topics` prints for replicated topics (docs/replication.md §15.1):
 * pure functions over what {@link Admin} returns, so the exact layout is pinned by unit tests.
 */
import type { CreatedTopic, DeletedTopic, PartitionDescription, PreferredLeaderElection, ReplicatedTopicDescription } from '@klog/client';
import { table } from './cluster.js';

const ids = (list: readonly number[]): string => (list.length === 0 ? '-' : list.join(','));

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

/** `4 partitions, replication factor 3, min.insync.replicas 2` (the last part only when the topic sets it). */
function settings(t: { readonly partitions: readonly unknown[]; readonly replicationFactor: number; readonly minInsyncReplicas: number | undefined }): string {
  const m = t.minInsyncReplicas === undefined ? '' : `, min.insync.replicas ${t.minInsyncReplicas}`;
  return `${plural(t.partitions.length, 'partition')}, replication factor ${t.replicationFactor}${m}`;
}

/** What `--create` prints: the summary line, then each partition's leader, replicas and ISR. */
export function formatCreated(c: CreatedTopic): string {
  return (
    `created topic ${c.topic}: ${settings(c)}\n` +
    table([
      ['PARTITION', 'LEADER', 'REPLICAS', 'ISR'],
      ...c.partitions.map((p) => [String(p.partition), p.leader === null ? 'none' : String(p.leader), ids(p.replicas), ids(p.isr)]),
    ])
  );
}

/** Which partitions `--describe` keeps: all, those with an ISR smaller than their replicas, or those without a live leader. */
export type DescribeFilter = 'all' | 'under-replicated' | 'unavailable';

/** Whether `p` passes `filter`. */
export function keepPartition(p: PartitionDescription, filter: DescribeFilter): boolean {
  if (filter === 'under-replicated') return p.isr.length < p.replicas.length;
  if (filter === 'unavailable') return p.status === 'offline';
  return true;
}

const describeHead = ['PARTITION', 'LEADER', 'EPOCH', 'REPLICAS', 'ISR', 'HIGH-WATERMARK', 'STATUS'];

function describeRow(p: PartitionDescription): string[] {
  return [
    String(p.partition),
    p.leader === null ? 'none' : String(p.leader),
    String(p.leaderEpoch),
    ids(p.replicas),
    ids(p.isr),
    p.highWatermark === null ? '-' : String(p.highWatermark),
    p.status,
  ];
}

/** One replicated topic as `--describe T` prints it: the header line, then the partitions `filter` keeps. */
export function formatDescribed(t: ReplicatedTopicDescription, filter: DescribeFilter = 'all'): string {
  return `topic ${t.topic}: ${settings(t)}, id ${t.id}\n` + table([describeHead, ...t.partitions.filter((p) => keepPartition(p, filter)).map(describeRow)]);
}

/** The partitions `filter` keeps over several replicated topics, in one table with a TOPIC column (`--describe` without a topic). */
export function formatFilteredAll(topics: readonly ReplicatedTopicDescription[], filter: DescribeFilter): string {
  const rows = topics.flatMap((t) => t.partitions.filter((p) => keepPartition(p, filter)).map((p) => [t.topic, ...describeRow(p)]));
  return table([['TOPIC', ...describeHead], ...rows]);
}

/** `--describe --json` of one replicated topic: one line (`leader` and `highWatermark` null when unknown). */
export function describedJson(t: ReplicatedTopicDescription, filter: DescribeFilter = 'all'): string {
  return JSON.stringify({
    topic: t.topic,
    id: t.id,
    replicationFactor: t.replicationFactor,
    minInsyncReplicas: t.minInsyncReplicas ?? null,
    partitions: t.partitions
      .filter((p) => keepPartition(p, filter))
      .map((p) => ({
        partition: p.partition,
        leader: p.leader,
        leaderEpoch: p.leaderEpoch,
        replicas: p.replicas,
        isr: p.isr,
        highWatermark: p.highWatermark,
        status: p.status,
      })),
  });
}

/** What `--delete` prints. */
export function formatDeleted(d: DeletedTopic): string {
  return `deleted topic ${d.topic} (${plural(d.partitions, 'partition')}, ${plural(d.replicas, 'replica')})\n`;
}

/** What `--elect-preferred-leaders` prints: the moves (the first 10 named), then the counts of the others. */
export function formatElection(e: PreferredLeaderElection): string {
  const named = e.moved.slice(0, 10).map((m) => `${m.topic}/${m.partition}: ${m.from < 0 ? 'none' : m.from} → ${m.to}`);
  if (e.moved.length > named.length) named.push('…');
  const moved = `${plural(e.moved.length, 'partition')} moved${named.length > 0 ? ` (${named.join(', ')})` : ''}`;
  return `preferred leaders: ${moved}, ${e.alreadyPreferred} already led by their preferred leader, ${e.notPossible} not possible (preferred replica not in the ISR or not live)\n`;
}
