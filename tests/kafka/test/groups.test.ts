/**
 * Consumer groups through the Kafka listener's coordinator, with the real clients as processes:
 * three kafkajs members read every message exactly once; a fourth joins and one is killed with
 * SIGKILL: every message is still delivered, and the only duplicates are what the killed member
 * read after its last commit. Two `kcat -G` members share the partitions and resume from the
 * committed offsets after a restart. A member whose assignor no other member has is refused
 * (INCONSISTENT_GROUP_PROTOCOL) at once, not left hanging. And the member process itself: a
 * message it consumed (and may have committed) has been reported before it is killed, so "every
 * message delivered" is counted from what the members really read.
 */
import type { ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { ApiKey } from '@klog/kafka-protocol';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Broker, fixtures, lines, run, sleep, spawnChild, waitFor } from './harness.js';
import { KafkaWire } from './wire.js';

let broker: Broker;
let kafka: Kafka;
beforeAll(async () => {
  process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
  broker = await Broker.start();
  kafka = new Kafka({ brokers: [broker.kafka], clientId: 'groups-test', logLevel: logLevel.NOTHING });
});
afterAll(async () => {
  await broker?.remove();
});

/** A kafkajs member process (fixtures/member.mjs) and what it printed. */
class Member {
  readonly received: [number, number, string][] = [];
  /** The partitions of its latest assignment. */
  assigned: number[] | undefined;
  /** Its last commit per partition: the next offset to read. */
  readonly commits = new Map<number, number>();
  crash: string | undefined;
  readonly proc: ChildProcess;
  /** Resolves when the process has exited and every line it wrote has been read. */
  private readonly closed: Promise<void>;
  constructor(group: string, topic: string, assignor?: string) {
    this.proc = spawnChild(process.execPath, [join(fixtures, 'member.mjs'), broker.kafka, group, topic, ...(assignor ? [assignor] : [])]);
    this.closed = new Promise((resolve) => this.proc.once('close', () => resolve()));
    createInterface({ input: this.proc.stdout! }).on('line', (line) => {
      const e = JSON.parse(line) as { m?: [number, number, string]; joined?: number[]; commit?: [number, number][]; crash?: string };
      if (e.m) this.received.push(e.m);
      if (e.joined) this.assigned = e.joined;
      if (e.commit) for (const [p, o] of e.commit) this.commits.set(p, o);
      if (e.crash) this.crash = e.crash;
    });
  }
  /** Stops reading its reports: once the pipe is full, the member waits in eachMessage. */
  pauseReports(): void {
    this.proc.stdout!.pause();
  }
  /** Kills it with `signal`; resolves when it is gone and what it wrote before has been read. */
  async kill(signal: NodeJS.Signals): Promise<void> {
    this.proc.stdout!.resume();
    if (this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill(signal);
    await this.closed;
  }
}

async function produce(topic: string, from: number, count: number): Promise<void> {
  const producer = kafka.producer();
  await producer.connect();
  for (let i = from; i < from + count; i += 1000) {
    await producer.send({ topic, acks: -1, messages: Array.from({ length: Math.min(1000, from + count - i) }, (_, j) => ({ value: `m${i + j}` })) });
  }
  await producer.disconnect();
}

/** True when the members' latest assignments split `partitions` between them, each partition once. */
function balanced(members: readonly Member[], partitions: number): boolean {
  const all = members.flatMap((m) => m.assigned ?? []).sort((a, b) => a - b);
  return members.every((m) => (m.assigned?.length ?? 0) > 0) && all.join() === Array.from({ length: partitions }, (_, i) => i).join();
}

describe('kafkajs consumer group', () => {
  it('three members read each message once; a fourth joins, one is killed: all delivered, duplicates only after its last commit', { timeout: 300_000 }, async () => {
    const topic = 'group-six';
    const group = 'g-kafkajs';
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 6 }] });
    await admin.disconnect();
    const members = [new Member(group, topic), new Member(group, topic), new Member(group, topic)];
    try {
      await waitFor('three members sharing six partitions', () => balanced(members, 6), 60_000);
      const n1 = 30_000;
      await produce(topic, 0, n1);
      const values = (ms: readonly Member[]) => ms.flatMap((m) => m.received.map((r) => r[2]));
      await waitFor('the first 30,000 messages', () => values(members).length >= n1, 60_000);
      await sleep(500);
      const first = values(members);
      expect(first).toHaveLength(n1);
      expect(new Set(first).size).toBe(n1);
      for (const m of members) expect(m.received.length).toBeGreaterThan(0);
      await waitFor('commits of everything read', () => members.every((m) => m.assigned!.every((p) => m.commits.has(p))), 20_000);

      members.push(new Member(group, topic));
      await waitFor('four members sharing six partitions', () => balanced(members, 6), 60_000);
      const victim = members[0]!;
      const n2 = 30_000;
      const producing = produce(topic, n1, n2);
      await waitFor('the victim reading the second batch', () => victim.received.filter((r) => Number(r[2].slice(1)) >= n1).length >= 200, 60_000);
      await victim.kill('SIGKILL');
      const killedAt = new Map(victim.commits);
      const victimRead = victim.received.slice();
      await producing;
      const survivors = members.slice(1);
      await waitFor('every message of both batches', () => new Set([...values(members)]).size >= n1 + n2, 90_000);
      const all = values(members);
      expect(new Set(all).size).toBe(n1 + n2);
      // Duplicates: only messages the killed member read at or after its last commit of their partition.
      const seen = new Map<string, number>();
      for (const v of all) seen.set(v, (seen.get(v) ?? 0) + 1);
      const allowed = new Set(victimRead.filter(([p, o]) => o >= (killedAt.get(p) ?? 0)).map((r) => r[2]));
      const duplicates = [...seen].filter(([, n]) => n > 1).map(([v]) => v);
      for (const v of duplicates) expect(allowed.has(v), `duplicate ${v}`).toBe(true);
      for (const [, n] of seen) expect(n).toBeLessThanOrEqual(2);
      expect(balanced(survivors, 6)).toBe(true);
    } finally {
      for (const m of members) await m.kill('SIGKILL');
    }
  });

  it('a member whose assignor the group does not share is refused at once', async () => {
    const topic = 'group-mixed';
    await produce(topic, 0, 10);
    const a = new Member('g-mixed', topic);
    try {
      await waitFor('the first member', () => a.assigned !== undefined, 30_000);
      const b = new Member('g-mixed', topic, 'other');
      try {
        await waitFor('the refusal', () => b.crash !== undefined, 30_000);
        expect(b.crash).toBe('INCONSISTENT_GROUP_PROTOCOL');
        expect(broker.logs.some((l) => l.msg === 'Kafka JoinGroup refused: no protocol (assignor) in common with the group')).toBe(true);
      } finally {
        await b.kill('SIGKILL');
      }
      // kcat's assignors (range, roundrobin) are refused the same way.
      const k = await run('kcat', ['-b', broker.kafka, '-G', 'g-mixed', topic, '-e', '-X', 'session.timeout.ms=6000'], { timeoutMs: 8000 });
      expect(k.stderr).toMatch(/Inconsistent group protocol/i);
    } finally {
      await a.kill('SIGKILL');
    }
  }, 120_000);
});

describe('a kafkajs member process', () => {
  it('has reported every message below its committed offset when it is killed with SIGKILL', async () => {
    const topic = 'reported-before-kill';
    const group = 'g-reported';
    await produce(topic, 0, 2000);
    const m = new Member(group, topic);
    const wire = await KafkaWire.open(broker.kafka);
    const committed = async (): Promise<number> => {
      const r = await wire.call(ApiKey.OffsetFetch, 1, (w) => w.string(group).array([topic], (w, t) => w.string(t).array([0], (w, p) => w.int32(p))));
      // OffsetFetch v1: [topic [partition offset metadata error]]
      const topics = r.array((r) => (r.string(), r.array((r) => [r.int32(), r.int64(), r.nullableString(), r.int16()] as const)));
      return topics[0]![0]![1];
    };
    try {
      await waitFor('the first 2,000 messages read and committed', () => m.received.length >= 2000 && m.commits.has(0), 30_000);
      // The test reads no more of its reports while 20,000 more messages come: the member's pipe fills.
      m.pauseReports();
      await produce(topic, 2000, 20_000);
      let last = await committed();
      for (let still = 0; still < 8; ) {
        await sleep(250);
        const now = await committed();
        still = now === last ? still + 1 : 0;
        last = now;
      }
      await m.kill('SIGKILL');
      const at = await committed();
      // Every message the group has committed past was reported by the member that read it.
      const dump = await run('kcat', ['-b', broker.kafka, '-C', '-t', topic, '-e', '-o', 'beginning', '-f', '%o %s\n']);
      const below = lines(dump.stdout).map((l) => l.split(' ')).filter(([o]) => Number(o) < at).map(([, v]) => v);
      expect(below.length).toBeGreaterThanOrEqual(2000);
      const reported = new Set(m.received.map((r) => r[2]));
      expect(below.filter((v) => !reported.has(v!))).toEqual([]);
    } finally {
      wire.close();
      await m.kill('SIGKILL');
    }
  }, 120_000);
});

describe('kcat -G', () => {
  const kcatMember = (group: string, topic: string): { proc: ChildProcess; out: string[]; err: string[] } => {
    const proc = spawnChild('kcat', ['-b', broker.kafka, '-u', '-G', group, topic, '-f', '%p %o %s\\n', '-X', 'auto.offset.reset=earliest', '-X', 'session.timeout.ms=6000', '-X', 'heartbeat.interval.ms=500', '-X', 'auto.commit.interval.ms=200']);
    const out: string[] = [];
    const err: string[] = [];
    createInterface({ input: proc.stdout! }).on('line', (l) => out.push(l));
    createInterface({ input: proc.stderr! }).on('line', (l) => err.push(l));
    return { proc, out, err };
  };
  const stop = (proc: ChildProcess): Promise<void> =>
    new Promise((resolve) => {
      if (proc.exitCode !== null) return resolve();
      proc.once('exit', () => resolve());
      proc.kill('SIGTERM');
    });

  it('two members share the partitions and resume from the committed offsets after a restart', async () => {
    const topic = 'kcat-group';
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 4 }] });
    await admin.disconnect();
    const a = kcatMember('g-kcat', topic);
    await waitFor('the first kcat member to be assigned', () => a.err.some((l) => l.includes('assigned')), 30_000);
    const b = kcatMember('g-kcat', topic);
    await waitFor('both kcat members assigned', () => b.err.some((l) => l.includes('assigned')) && a.err.filter((l) => l.includes('assigned')).length >= 2, 30_000);
    await produce(topic, 0, 400);
    await waitFor('400 messages', () => a.out.length + b.out.length >= 400, 30_000);
    await sleep(1000);
    const partitionsOf = (out: string[]) => new Set(out.map((l) => l.split(' ')[0]));
    expect(a.out.length + b.out.length).toBe(400);
    expect(partitionsOf(a.out).size).toBeGreaterThan(0);
    expect(partitionsOf(b.out).size).toBeGreaterThan(0);
    for (const p of partitionsOf(a.out)) expect(partitionsOf(b.out).has(p)).toBe(false);
    expect(new Set([...a.out, ...b.out].map((l) => l.split(' ')[2])).size).toBe(400);
    await Promise.all([stop(a.proc), stop(b.proc)]);

    await produce(topic, 400, 100);
    const c = kcatMember('g-kcat', topic);
    try {
      await waitFor('the 100 new messages', () => c.out.length >= 100, 30_000);
      await sleep(1000);
      expect(c.out.map((l) => Number(l.split(' ')[2]!.slice(1))).sort((x, y) => x - y)).toEqual(Array.from({ length: 100 }, (_, i) => 400 + i));
    } finally {
      await stop(c.proc);
    }
  }, 180_000);
});
