/**
 * docs/replication.md §17.8, a leader's ZooKeeper session expires (SIGSTOP): a leader frozen
 * longer than its session timeout is replaced (epoch + 1, out of the ISR) while an `acks all`
 * load goes on against the new leaders. When it resumes it still believes it leads, and a
 * producer that kept its connection to it sends `acks all` produces: some were sent while it was
 * frozen (they wait in its socket), more right after SIGCONT, before it notices. It appends
 * them but acknowledges none: its high watermark waits for the flushed end of every member of
 * its ISR, which holds the new leader, and that one fetches from it no more (§9.4, §9.5). Its
 * session's expiry fences it (§9.1), the controller makes it a follower, it truncates what it
 * appended while stale (§10) and catches up: every acknowledged message is read back, no stale
 * one, and the replicas' files are byte-identical.
 *
 * Run with `min.insync.replicas` 2 and 1: with 1, nothing but the high watermark's ISR stops the
 * stale leader from acknowledging alone once it decides to shrink its ISR to itself.
 */
import { Connection } from '@klog/client';
import { AckLevel, ErrorCode, decodeProduceAckResponse, encodeMessageSet, encodeProduceAckRequest, errorCodeName } from '@klog/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { sleep, waitFor } from './harness.js';
import { type Acked, AckedLoad, ReplicatedCluster, checkAcked } from './replication-cluster.js';

const SESSION_MS = 6000;
/** Shorter than the freeze: once resumed, the stale leader finds its followers lagging and proposes to shrink its ISR. */
const LAG_MS = 2000;
const PARTITIONS = 4;
/** Connections kept to the stale leader. */
const STICKY_CONNECTIONS = 4;

/** What the stale leader answered one `acks all` produce of one message. */
interface StaleAnswer {
  readonly partition: number;
  readonly value: string;
  /** Sent while the leader was frozen, or after SIGCONT. */
  readonly sent: 'frozen' | 'resumed';
  /** The error code's name, `None` when acknowledged, or the connection's error. */
  readonly outcome: string;
  readonly offset: number;
}

/** A producer that keeps one connection to one broker, whoever leads: the client a stale leader may still hear from. */
class StickyProducer {
  readonly answers: Promise<StaleAnswer>[] = [];
  readonly #connection: Connection;
  #n = 0;

  constructor(
    port: number,
    readonly topic: string,
    /** Tells its values from other producers'. */
    readonly id: number,
  ) {
    this.#connection = new Connection({ host: '127.0.0.1', port, requestTimeoutMs: 4 * SESSION_MS });
  }

  /** Sends one message to `partition` with `acks all`; its answer joins {@link answers}. */
  send(partition: number, sent: StaleAnswer['sent']): Promise<StaleAnswer> {
    const value = `stale-${this.id}-${partition}-${this.#n++}`;
    const messages = encodeMessageSet([Buffer.from(value)]);
    const frame = encodeProduceAckRequest({ acks: AckLevel.All, partitions: [{ topic: this.topic, partition, messages }] });
    const answer = this.#connection.request(frame).then(
      (r) => {
        if (r.errorCode !== ErrorCode.None) return { partition, value, sent, outcome: errorCodeName(r.errorCode), offset: -1 };
        const result = decodeProduceAckResponse(r.body)[0]!;
        return { partition, value, sent, outcome: errorCodeName(result.errorCode), offset: result.offset };
      },
      (err: Error) => ({ partition, value, sent, outcome: `connection: ${err.message}`, offset: -1 }),
    );
    this.answers.push(answer);
    return answer;
  }

  async close(): Promise<void> {
    await this.#connection.close();
  }
}

describe('replication: a stale leader after its session expired (docs/replication.md §17.8)', () => {
  let cluster: ReplicatedCluster | undefined;

  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  for (const minIsr of [2, 1]) {
    it(`min.insync.replicas ${minIsr}: it steps down and truncates, and nothing it accepted while stale is acknowledged`, async () => {
      cluster = await new ReplicatedCluster({
        brokers: 3,
        sessionTimeoutMs: SESSION_MS,
        properties: { 'replica.lag.time.max.ms': LAG_MS, 'replica.fetch.wait.max.ms': 100, 'replica.fetch.backoff.ms': 200 },
      }).start();
      const c = cluster;
      const topic = `stale${minIsr}`;
      await c.admin.createTopic(topic, { partitions: PARTITIONS, replicationFactor: 3, minInsyncReplicas: minIsr });
      await c.waitForIsr(topic, PARTITIONS, 3);
      // The stale leader is not the controller: §17.7 is the controller's own failover.
      const controller = await c.controller();
      const leaders = await c.leaders(topic, PARTITIONS);
      const L = leaders.find((l) => l !== controller)!;
      const staleParts = leaders.flatMap((l, p) => (l === L ? [p] : []));
      const stale = c.brokers[L]!;

      const load = new AckedLoad(c.connect, topic, PARTITIONS).start();
      await waitFor('200 messages acknowledged', () => load.count >= 200, 60_000);
      // Producers that keep their connections to L, whoever leads: what they send while L is
      // frozen waits in its sockets and reaches it the moment it resumes, before it notices.
      const sticky = Array.from({ length: STICKY_CONNECTIONS }, (_, i) => new StickyProducer(stale.port, topic, i));
      const warm = await Promise.all(sticky.flatMap((s) => staleParts.map((p) => s.send(p, 'resumed'))));
      expect(warm.map((a) => a.outcome)).toEqual(warm.map(() => 'None'));
      for (const s of sticky) s.answers.length = 0;
      const ackedBefore: Acked[] = warm.map((a) => ({ partition: a.partition, offset: a.offset, value: a.value })).sort((a, b) => a.offset - b.offset);

      // Frozen past its session: another ISR member leads each of its partitions, without it in the ISR.
      stale.pause();
      const replaced = async (): Promise<boolean> =>
        (await Promise.all(staleParts.map((p) => c.state(topic, p)))).every((x) => x !== undefined && x.leader >= 0 && x.leader !== L && !x.isr.includes(L));
      await waitFor(`a new leader for partitions ${staleParts.join(',')} without ${L} in the ISR`, replaced, 4 * SESSION_MS + 10_000);
      const newLeaders = await Promise.all(staleParts.map(async (p) => (await c.state(topic, p))!.leader));
      const resumedAt = stale.lines.length;
      for (const s of sticky) for (let i = 0; i < 3; i++) for (const p of staleParts) void s.send(p, 'frozen');
      stale.resume();
      // More while it has not noticed yet: until its first answer comes back.
      let answered = false;
      void Promise.race(sticky.flatMap((s) => s.answers)).then(() => (answered = true));
      for (let i = 0; i < 200 && !answered; i++) {
        for (const s of sticky) for (const p of staleParts) void s.send(p, 'resumed');
        await sleep(10);
      }
      const answers = await Promise.all(sticky.flatMap((s) => s.answers));
      await Promise.all(sticky.map((s) => s.close()));
      const acknowledged = answers.filter((a) => a.outcome === 'None');
      const outcomes = new Map<string, number>();
      for (const a of answers) outcomes.set(`${a.sent} ${a.outcome}`, (outcomes.get(`${a.sent} ${a.outcome}`) ?? 0) + 1);
      expect(acknowledged, `the stale leader acknowledged ${JSON.stringify(acknowledged.slice(0, 5))}`).toEqual([]);
      expect([...outcomes.keys()].every((k) => k.endsWith(' NotLeaderForPartition')), JSON.stringify([...outcomes])).toBe(true);

      // It comes back as a follower: it truncates what it appended while stale, catches up and rejoins every ISR.
      await c.waitForIsr(topic, PARTITIONS, 3, 60_000);
      const truncations = stale.logged((l) => l['msg'] === 'replica log truncated against the leader' && staleParts.includes(l['partition'] as number), resumedAt);
      expect(truncations.length, `${L} truncated what it appended while stale`).toBeGreaterThan(0);
      const more = load.count + 100;
      await waitFor('100 more acknowledged', () => load.count >= more, 60_000);
      await load.stop();

      await c.waitForIdenticalReplicas(topic, PARTITIONS, 30_000);
      const read = await c.readAll(topic, PARTITIONS, L);
      expect(checkAcked(load.acked, read)).toEqual([]);
      expect(checkAcked(ackedBefore, read)).toEqual([]);
      const staleValues = new Set(answers.map((a) => a.value));
      expect(read.flat().filter((m) => staleValues.has(m.value)).map((m) => m.value)).toEqual([]);
      console.log(
        `min.insync.replicas ${minIsr}: ${L} led ${staleParts.length} partition(s), replaced by ${newLeaders.join(',')}; ${answers.length} produces sent to it while stale (${JSON.stringify([...outcomes])}), none acknowledged; ` +
          `${truncations.length} truncation(s) of ${truncations.map((t) => t['bytes']).join(',')} bytes; ${load.count} acknowledged by the load, all read back`,
      );
    });
  }
});
