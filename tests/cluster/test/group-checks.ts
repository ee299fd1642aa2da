/**
 * Checks of a consumer group's and a mirror's progress on a replicated topic for the system
 * tests of docs/replication.md §14: the committed offsets of `<topic>/<partition>` sampled from
 * ZooKeeper while a test runs (they must only move forward), and the deliveries of the group
 * held against its commits (at-least-once: a message is delivered again only at or past the
 * last offset committed for its partition before the redelivery).
 */
import type { Member, Received, ZkClient } from './harness.js';
import { sleep } from './harness.js';

/** One sample of a committed offset. */
export interface CommitSample {
  /** When it was read, ms since the epoch. */
  readonly t: number;
  readonly offset: number;
}

/**
 * Reads `/consumers/<group>/offsets/<topic>/<partition>` of partitions `0..partitions-1` every
 * `intervalMs` until stopped, keeping every value read; also notes any child of
 * `/consumers/<group>/offsets/<topic>` that is not a partition number (a paper name would be
 * `<brokerId>-<partition>`, docs/replication.md §14).
 */
export class CommitSampler {
  /** The samples of each partition, in the order read. */
  readonly samples: CommitSample[][];
  /** Names under the topic's offsets node that are not `<partition>`. */
  readonly strayNames = new Set<string>();
  private stopped = false;
  private readonly running: Promise<void>;

  constructor(
    private readonly zk: ZkClient,
    readonly group: string,
    readonly topic: string,
    readonly partitions: number,
    intervalMs = 200,
  ) {
    this.samples = Array.from({ length: partitions }, () => []);
    this.running = this.loop(intervalMs);
  }

  private async loop(intervalMs: number): Promise<void> {
    const base = `/consumers/${this.group}/offsets/${this.topic}`;
    while (!this.stopped) {
      try {
        for (const name of await this.zk.getChildren(base)) {
          if (!/^(0|[1-9]\d*)$/.test(name)) this.strayNames.add(name);
        }
        for (let p = 0; p < this.partitions; p++) {
          const node = await this.zk.getData(`${base}/${p}`);
          if (node !== undefined) this.samples[p]!.push({ t: Date.now(), offset: Number(node.data.toString()) });
        }
      } catch {
        // the test's session is busy or reconnecting: sample again next time
      }
      await sleep(intervalMs);
    }
  }

  /** The last value read of each partition (undefined: none yet). */
  last(): Array<number | undefined> {
    return this.samples.map((s) => s.at(-1)?.offset);
  }

  /** Partitions whose committed offset was ever read lower than a value read before it. */
  backwards(): string[] {
    const out: string[] = [];
    this.samples.forEach((s, p) => {
      for (let i = 1; i < s.length; i++) if (s[i]!.offset < s[i - 1]!.offset) out.push(`${this.topic}/${p}: ${s[i - 1]!.offset} then ${s[i]!.offset}`);
    });
    return out;
  }

  /** The highest value read of `partition` at or before `t` (undefined: none). */
  at(partition: number, t: number): number | undefined {
    let v: number | undefined;
    for (const s of this.samples[partition]!) if (s.t <= t) v = s.offset;
    return v;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }
}

/** A commit a member logged ("offsets committed"): when, which partition, which offset. */
interface LoggedCommit {
  readonly t: number;
  readonly partition: number;
  readonly offset: number;
}

/** Every commit of a replicated `topic` (`brokerId` −1) the members logged, by time. */
function loggedCommits(members: readonly Member[], topic: string): LoggedCommit[] {
  const out: LoggedCommit[] = [];
  for (const m of members) {
    for (const l of m.logs) {
      if (l.msg !== 'offsets committed') continue;
      for (const c of l['offsets'] as Array<{ topic: string; brokerId: number; partition: number; offset: number }>) {
        if (c.topic === topic && c.brokerId === -1) out.push({ t: l.t, partition: c.partition, offset: c.offset });
      }
    }
  }
  return out.sort((a, b) => a.t - b.t);
}

/** What the deliveries of a group came to. */
export interface DeliveryCheck {
  /** Deliveries of a message already delivered before (each one past the first). */
  readonly duplicates: number;
  /** Duplicates at offsets below the last commit of their partition: each one is a defect. */
  readonly belowCommit: string[];
  /** Deliveries of a replicated partition named with a broker id (`b` ≠ −1). */
  readonly paperNamed: number;
}

/**
 * Holds the deliveries of the members against their logged commits: a message delivered
 * again must lie at or past the last offset committed for its partition (by any member)
 * before it was delivered again, since a commit says every message before it was consumed.
 */
export function checkDeliveries(members: readonly Member[], received: readonly Received[], topic: string): DeliveryCheck {
  const commits = loggedCommits(members, topic);
  const seen = new Set<string>();
  let duplicates = 0;
  let paperNamed = 0;
  const belowCommit: string[] = [];
  for (const r of [...received].sort((a, b) => a.t - b.t)) {
    if (r.b !== -1) paperNamed++;
    const k = `${r.p}@${r.o}`;
    if (!seen.has(k)) {
      seen.add(k);
      continue;
    }
    duplicates++;
    let committed = -1;
    for (const c of commits) {
      if (c.t >= r.t) break;
      if (c.partition === r.p) committed = Math.max(committed, c.offset);
    }
    if (r.o < committed) belowCommit.push(`${topic}/${r.p} offset ${r.o} (${r.v}) delivered again by ${r.member} at ${r.t}, after offset ${committed} was committed`);
  }
  return { duplicates, belowCommit, paperNamed };
}
