/**
 * Reconciliation (docs/audit.md): from the audit events read out of each cluster's audit
 * topic, the count of every tier for every (topic, window), each set against the count the
 * tier before it passed on, and a verdict per window. Pure: no I/O.
 *
 * Clusters are given in the order messages flow (the online cluster, then the analytics
 * cluster it is mirrored into, …). The events a cluster's audit topic holds are about that
 * cluster: `producer` (accepted from producers), `mirror` (copied in by mirror makers),
 * `consumer` (read out of it by the audit consumer of `group`). The tiers, in flow order, are
 * for each cluster its producer tier, its mirror tier, then its consumer tier, and:
 * - a consumer tier is expected to count what the cluster's producer and mirror tiers put in
 *   (where none counts the topic, what the cluster before it holds: a mirror without audit);
 * - a mirror tier is expected to count what the cluster before it holds: that cluster's
 *   consumer tier (or, where nothing counts it, what its producer and mirror tiers put in);
 * - a producer tier, and a mirror tier of the first cluster, are origins: nothing to compare.
 *
 * A topic follows the tiers that ever counted it (a topic not mirrored has no mirror tier),
 * except the consumer tier of a cluster: once it counts anything in that cluster, it counts
 * every topic the cluster's producer or mirror tiers put in, so a topic it saw none of is a
 * loss, not an absence.
 *
 * A window is open until `graceMs` after its end; once closed it is `incomplete` when some of
 * its counts are known to be partial (see {@link IncompleteTier}), else `complete` when every
 * tier matches what it is compared with, `short` when some tier has fewer (messages lost
 * between the two), `over` when none has fewer and some has more (duplicates).
 */
import type { AuditEvent, AuditTier } from '@klog/client';
import { windowStartOf } from '@klog/client';

/** The audit events read from one cluster's audit topic, undecodable ones apart. */
export interface ClusterEvents {
  /** The cluster's name in the report. */
  readonly name: string;
  readonly events: readonly AuditEvent[];
  /** Messages of the audit topic that are not audit events (counted, not used). */
  readonly undecodable?: number;
  /** What is known to be missing from this cluster's counts (partitions not read). */
  readonly incomplete?: readonly IncompleteTier[];
}

/**
 * Counts known to be partial: a topic's partitions the audit consumer could not read (`topic`
 * set, tier `consumer`), a partition of the audit topic that could not be read (no topic: every
 * tier of the cluster), or a tier whose events have windows that do not divide the report's.
 * The windows they touch are not judged.
 */
export interface IncompleteTier {
  readonly cluster: string;
  /** Undefined: every tier of the cluster. */
  readonly tier?: AuditTier;
  /** Undefined: every topic. */
  readonly topic?: string;
  readonly reason: string;
}

/** What to reconcile. */
export interface ReconcileOptions {
  /** Report window length, ms. Events of shorter windows that divide it are summed into it. */
  readonly windowMs: number;
  /** How long after its end a window stays open, ms. */
  readonly graceMs: number;
  /** The time the report is made, ms since the epoch. */
  readonly now: number;
  /** The consumer group whose `consumer` events count a cluster's contents. */
  readonly group: string;
}

/** One tier: a kind of counter in one cluster. */
export interface Tier {
  /** `<cluster>/<kind>`, e.g. `online/producer`. */
  readonly id: string;
  readonly cluster: string;
  readonly kind: AuditTier;
}

/** One tier's count in one window. */
export interface TierCount {
  /** {@link Tier.id}. */
  readonly tier: string;
  readonly count: number;
  /** What the tier before it passed on; absent for an origin. */
  readonly expected?: number;
  /** `count - expected` when it is not 0: negative is loss, positive duplicates. */
  readonly diff?: number;
}

/** Verdict of a window: see the file comment. */
export type WindowStatus = 'open' | 'incomplete' | 'complete' | 'short' | 'over';

/** One (topic, window). */
export interface WindowRow {
  readonly topic: string;
  /** ms since the epoch. */
  readonly windowStart: number;
  /** `windowStart + windowMs`, ms since the epoch. */
  readonly windowEnd: number;
  readonly status: WindowStatus;
  /** One per tier of the topic, in flow order. */
  readonly counts: readonly TierCount[];
}

/** A tier of a closed window that does not match what it is compared with. */
export interface Discrepancy {
  readonly topic: string;
  readonly windowStart: number;
  readonly tier: string;
  /** The tier it is compared with. */
  readonly against: string;
  readonly kind: 'short' | 'over';
  readonly expected: number;
  readonly count: number;
  /** Messages missing (short) or extra (over), > 0. */
  readonly messages: number;
}

/** The whole reconciliation. */
export interface AuditReport {
  /** ms since the epoch. */
  readonly generatedAt: number;
  readonly windowMs: number;
  readonly graceMs: number;
  readonly clusters: readonly string[];
  /** Every tier seen, in flow order. */
  readonly tiers: readonly Tier[];
  /** Sorted by topic, then window start. */
  readonly windows: readonly WindowRow[];
  /** Closed windows' mismatches, in the order of `windows` (none for incomplete windows). */
  readonly discrepancies: readonly Discrepancy[];
  /** Counts known to be partial, and why (see {@link IncompleteTier}). */
  readonly incomplete: readonly IncompleteTier[];
  readonly summary: {
    readonly windows: number;
    readonly open: number;
    /** Closed windows not judged because some of their counts are partial. */
    readonly incomplete: number;
    readonly complete: number;
    readonly short: number;
    readonly over: number;
    /** Messages missing over closed windows. */
    readonly missing: number;
    /** Extra messages (duplicates) over closed windows. */
    readonly extra: number;
  };
  /** Events not used, and why. */
  readonly ignored: {
    /** Events seen twice (same emitter and number). */
    readonly duplicateEvents: number;
    /** Consumer events of other groups. */
    readonly otherGroups: number;
    /** Events whose window does not divide the report's. */
    readonly unalignedWindows: number;
    /** Audit topic messages that are not audit events. */
    readonly undecodable: number;
  };
}

const kindOrder: readonly AuditTier[] = ['producer', 'mirror', 'consumer'];

/**
 * Reconciles the events of every cluster (see the file comment).
 * @param clusters in the order messages flow through them
 * @throws RangeError for a window under 1 ms, a negative grace or two clusters of one name
 */
export function reconcile(clusters: readonly ClusterEvents[], options: ReconcileOptions): AuditReport {
  const { windowMs, graceMs, now, group } = options;
  if (!(windowMs >= 1)) throw new RangeError(`window ${windowMs} ms must be ≥ 1`);
  if (!(graceMs >= 0)) throw new RangeError(`grace ${graceMs} ms must be ≥ 0`);
  const names = clusters.map((c) => c.name);
  if (new Set(names).size !== names.length) throw new RangeError(`cluster names must differ: ${names.join(', ')}`);

  const ignored = { duplicateEvents: 0, otherGroups: 0, unalignedWindows: 0, undecodable: 0 };
  const incomplete: IncompleteTier[] = clusters.flatMap((c) => c.incomplete ?? []);
  const unaligned = new Map<string, IncompleteTier>();
  /** tier id → topic → window start → count */
  const counts = new Map<string, Map<string, Map<number, number>>>();
  /** Clusters whose consumer tier counted anything. */
  const consumerCounted = new Set<string>();
  for (const c of clusters) {
    ignored.undecodable += c.undecodable ?? 0;
    const seen = new Set<string>();
    for (const e of c.events) {
      const key = `${e.instance}\0${e.seq}`;
      if (seen.has(key)) {
        ignored.duplicateEvents++;
        continue;
      }
      seen.add(key);
      if (e.tier === 'consumer' && e.group !== group) {
        ignored.otherGroups++;
        continue;
      }
      if (windowMs % e.windowMs !== 0) {
        ignored.unalignedWindows++;
        const k = `${c.name}\0${e.tier}\0${e.topic}\0${e.windowMs}`;
        if (!unaligned.has(k)) {
          unaligned.set(k, { cluster: c.name, tier: e.tier, topic: e.topic, reason: `${e.tier} events of windows of ${e.windowMs} ms do not divide the report's ${windowMs} ms (give every tier the same window, or a report window that is a multiple of theirs)` });
        }
        continue;
      }
      if (e.tier === 'consumer') consumerCounted.add(c.name);
      const id = tierId(c.name, e.tier);
      let byTopic = counts.get(id);
      if (!byTopic) counts.set(id, (byTopic = new Map<string, Map<number, number>>()));
      let byWindow = byTopic.get(e.topic);
      if (!byWindow) byTopic.set(e.topic, (byWindow = new Map<number, number>()));
      const w = windowStartOf(e.windowStart, windowMs);
      byWindow.set(w, (byWindow.get(w) ?? 0) + e.count);
    }
  }

  incomplete.push(...unaligned.values());
  const partial = (t: Tier, topic: string): boolean =>
    incomplete.some((i) => i.cluster === t.cluster && (i.tier === undefined || i.tier === t.kind) && (i.topic === undefined || i.topic === topic));
  const tiers: Tier[] = [];
  for (const cluster of names) for (const kind of kindOrder) if (counts.has(tierId(cluster, kind))) tiers.push({ id: tierId(cluster, kind), cluster, kind });

  const topics = [...new Set([...counts.values()].flatMap((byTopic) => [...byTopic.keys()]))].sort();
  const windows: WindowRow[] = [];
  const discrepancies: Discrepancy[] = [];
  for (const topic of topics) {
    // The topic's tiers, in flow order (see the file comment for the consumer tier).
    const present = tiers.filter((t) => counts.get(t.id)!.has(topic) || (t.kind === 'consumer' && consumerCounted.has(t.cluster) && clusterHas(counts, t.cluster, topic)));
    const starts = new Set<number>();
    for (const t of present) for (const w of counts.get(t.id)!.get(topic)?.keys() ?? []) starts.add(w);
    // Partial for every window of the topic; a tier left out entirely (unaligned windows) counts too.
    const topicPartial = present.some((t) => partial(t, topic)) || [...unaligned.values()].some((u) => u.topic === topic);
    for (const windowStart of [...starts].sort((a, b) => a - b)) {
      const countOf = (id: string): number => counts.get(id)?.get(topic)?.get(windowStart) ?? 0;
      const windowEnd = windowStart + windowMs;
      const open = now < windowEnd + graceMs;
      const judged = !open && !topicPartial;
      const row: TierCount[] = [];
      let short = false;
      let over = false;
      for (const t of present) {
        const count = countOf(t.id);
        const against = comparedWith(t, present, names);
        if (against.length === 0) {
          row.push({ tier: t.id, count });
          continue;
        }
        const expected = against.reduce((n, a) => n + countOf(a.id), 0);
        const diff = count - expected;
        row.push(diff === 0 ? { tier: t.id, count, expected } : { tier: t.id, count, expected, diff });
        if (diff !== 0 && judged) {
          if (diff < 0) short = true;
          else over = true;
          discrepancies.push({
            topic,
            windowStart,
            tier: t.id,
            against: against.map((a) => a.id).join(' + '),
            kind: diff < 0 ? 'short' : 'over',
            expected,
            count,
            messages: Math.abs(diff),
          });
        }
      }
      const status: WindowStatus = open ? 'open' : !judged ? 'incomplete' : short ? 'short' : over ? 'over' : 'complete';
      windows.push({ topic, windowStart, windowEnd, status, counts: row });
    }
  }

  const closedDiscrepancies = (kind: 'short' | 'over') => discrepancies.filter((d) => d.kind === kind).reduce((n, d) => n + d.messages, 0);
  return {
    generatedAt: now,
    windowMs,
    graceMs,
    clusters: names,
    tiers,
    windows,
    discrepancies,
    incomplete,
    summary: {
      windows: windows.length,
      open: windows.filter((w) => w.status === 'open').length,
      incomplete: windows.filter((w) => w.status === 'incomplete').length,
      complete: windows.filter((w) => w.status === 'complete').length,
      short: windows.filter((w) => w.status === 'short').length,
      over: windows.filter((w) => w.status === 'over').length,
      missing: closedDiscrepancies('short'),
      extra: closedDiscrepancies('over'),
    },
    ignored,
  };
}

function tierId(cluster: string, kind: AuditTier): string {
  return `${cluster}/${kind}`;
}

/** True when some producer or mirror tier of `cluster` counted `topic`. */
function clusterHas(counts: ReadonlyMap<string, ReadonlyMap<string, unknown>>, cluster: string, topic: string): boolean {
  return ['producer', 'mirror'].some((k) => counts.get(tierId(cluster, k as AuditTier))?.has(topic) === true);
}

/** The tiers whose summed count `t` is expected to match (empty for an origin); see the file comment. */
function comparedWith(t: Tier, present: readonly Tier[], clusters: readonly string[]): Tier[] {
  const inbound = (cluster: string) => present.filter((p) => p.cluster === cluster && p.kind !== 'consumer');
  if (t.kind === 'producer') return [];
  if (t.kind === 'consumer' && inbound(t.cluster).length > 0) return inbound(t.cluster);
  // A mirror tier, or a consumer tier nothing put in (a mirror without audit): what the cluster before holds.
  const previous = clusters[clusters.indexOf(t.cluster) - 1];
  if (previous === undefined) return [];
  const stored = present.find((p) => p.cluster === previous && p.kind === 'consumer');
  return stored ? [stored] : inbound(previous);
}
