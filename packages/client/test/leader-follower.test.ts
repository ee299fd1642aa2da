/**
 * The retry and ordering decisions of a producer on a replicated partition
 * (docs/replication.md §13.2), over a scripted host: which records are sent again, in which
 * order, to which leader, and when they give up.
 */
import { describe, expect, it, vi } from 'vitest';
import { ErrorCode } from '@klog/protocol';
import { silentLogger } from '@klog/logger';
import { KlogBrokerError, KlogConnectionError } from '../src/errors.js';
import { LeaderRetriesExhaustedError } from '../src/leader-retry.js';
import { PartitionLeaderFollower, type LeaderFollowerHost } from '../src/producer/leader-follower.js';
import type { PartitionMeta, PartitionTarget } from '../src/producer/types.js';

type Meta = PartitionMeta & { leader: number };

/** A host whose pool answers each record by a script keyed on the leader it went to. */
function host(script: (leader: number, value: string) => 'ok' | Error, leaders: number[]) {
  let leader = leaders.shift()!;
  const sent: Array<{ leader: number; values: string[] }> = [];
  let retries = 0;
  const pending: Array<() => void> = [];
  const h: LeaderFollowerHost<Meta> & { sent: typeof sent; retries: () => number; answer: () => void; setLeader: (l: number) => void } = {
    logger: silentLogger,
    sent,
    retries: () => retries,
    retried: () => retries++,
    setLeader: (l) => (leader = l),
    route: () => ({
      leader,
      target: leader < 0 ? undefined : ({ broker: { address: `b${leader}` }, brokerPartition: 0, meta: { topic: 't', partition: 0, leader } } as unknown as PartitionTarget<Meta>),
    }),
    refresh: async () => {
      if (leaders.length > 0) leader = leaders.shift()!;
    },
    send: (targets, payloads) => {
      const l = targets[0]!.meta.leader;
      const values = payloads.map((p) => p.toString());
      sent.push({ leader: l, values });
      return new Promise((resolve) => {
        pending.push(() => resolve(values.map((v) => { const r = script(l, v); return r === 'ok' ? ({ topic: 't', partition: 0, leader: l }) : r; })));
      });
    },
    // Answers every request sent so far, oldest first.
    answer: () => { for (const p of pending.splice(0)) p(); },
  };
  return h;
}

const notLeader = (): Error => new KlogBrokerError(ErrorCode.NotLeaderForPartition, { topic: 't', partition: 0 });
const buf = (s: string): Buffer => Buffer.from(s);

async function until(cond: () => boolean, h: { answer: () => void }): Promise<void> {
  for (let i = 0; i < 400 && !cond(); i++) {
    h.answer();
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('PartitionLeaderFollower', () => {
  it('sends every failed record again to the new leader, in order, before records sent meanwhile', async () => {
    const h = host((leader) => (leader === 1 ? notLeader() : 'ok'), [1, 2]);
    const f = new PartitionLeaderFollower<Meta>('t', 0, h, {});
    const a = f.send([buf('a1'), buf('a2')], [{}, {}]);
    const b = f.send([buf('b1')], [{}]);
    h.answer(); // both fail on leader 1: the partition is held
    await new Promise((r) => setTimeout(r, 0));
    const c = f.send([buf('c1')], [{}]); // sent while held
    await until(() => h.sent.length >= 3, h);
    h.answer();
    const results = await Promise.all([a, b, c]);
    expect(results.flat().every((r) => !(r instanceof Error) && (r as Meta).leader === 2)).toBe(true);
    expect(h.sent.map((s) => `${s.leader}:${s.values.join(',')}`)).toEqual(['1:a1,a2', '1:b1', '2:a1,a2,b1,c1']);
    expect(h.retries()).toBe(1);
  });

  it('retries a lost connection and a partition with no leader', async () => {
    let lost = true;
    const h = host((leader) => {
      if (leader === 3 && lost) { lost = false; return new KlogConnectionError('b3', 'connection closed'); }
      return 'ok';
    }, [3, -1, 3]);
    const f = new PartitionLeaderFollower<Meta>('t', 0, h, {});
    const p = f.send([buf('x')], [{}]);
    await until(() => h.sent.length >= 2, h);
    h.answer();
    const [r] = await p;
    expect(r).not.toBeInstanceOf(Error);
    expect(h.retries()).toBe(2); // the lost connection, then no leader
  });

  it('does not retry other errors', async () => {
    const tooLarge = new KlogBrokerError(ErrorCode.MessageSizeTooLarge, { topic: 't', partition: 0 });
    const h = host(() => tooLarge, [1]);
    const f = new PartitionLeaderFollower<Meta>('t', 0, h, {});
    const p = f.send([buf('x')], [{}]);
    h.answer();
    expect((await p)[0]).toBe(tooLarge);
    expect(h.retries()).toBe(0);
  });

  it('gives up on NotEnoughReplicas once notEnoughReplicasTimeoutMs has passed, however many retries are left', async () => {
    const short = (): Error => new KlogBrokerError(ErrorCode.NotEnoughReplicas, { topic: 't', partition: 0 });
    const h = host(() => short(), [1]);
    const codes: number[] = [];
    h.retried = (code) => codes.push(code);
    const f = new PartitionLeaderFollower<Meta>('t', 0, h, { maxRetries: 1000, retryTimeoutMs: 60_000, notEnoughReplicasTimeoutMs: 400 });
    const started = Date.now();
    const p = f.send([buf('x')], [{}]);
    let r: unknown;
    void p.then(([x]) => (r = x));
    await until(() => r !== undefined, h);
    expect(r).toBeInstanceOf(LeaderRetriesExhaustedError);
    expect((r as LeaderRetriesExhaustedError).code).toBe(ErrorCode.NotEnoughReplicas);
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
    expect(codes.length).toBeGreaterThan(0);
    expect(codes.length).toBeLessThan(10); // 100, 200, 400 ms of back-off, not 1000 retries
    expect(new Set(codes)).toEqual(new Set([ErrorCode.NotEnoughReplicas]));
  });

  it('gives up after maxRetries, naming the partition, the last leader and the code', async () => {
    const h = host(() => notLeader(), [1, 1, 1, 1, 1, 1]);
    const f = new PartitionLeaderFollower<Meta>('t', 0, h, { maxRetries: 2 });
    const p = f.send([buf('x')], [{}]);
    await until(() => h.sent.length >= 3, h);
    h.answer();
    await new Promise((r) => setTimeout(r, 20));
    const [r] = await p;
    expect(r).toBeInstanceOf(LeaderRetriesExhaustedError);
    expect((r as Error).message).toMatch(/topic t partition 0: gave up after 2 retries .*last leader 1, last error NotLeaderForPartition/);
    expect(h.sent).toHaveLength(3);
  });

  it('resends as soon as the view names a new leader, not at its next back-off step, and backs off from 100 ms again there', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      let readyAt2 = false;
      const h = host((leader) => (leader === 2 && readyAt2 ? 'ok' : notLeader()), [1]);
      const listeners = new Set<() => void>();
      const f = new PartitionLeaderFollower<Meta>('t', 0, { ...h, onViewChange: (l) => (listeners.add(l), () => listeners.delete(l)) }, {});
      const a = f.send([buf('a1')], [{}]);
      // Three rounds fail on leader 1: the back-off grows to 400 ms (320 to 400 with the jitter).
      for (let round = 1; round <= 3; round++) {
        h.answer();
        await vi.advanceTimersByTimeAsync(round < 3 ? 1000 : 0);
      }
      expect(h.sent.map((s) => s.leader)).toEqual([1, 1, 1]);
      // The controller elects broker 2 and the view hears of it: the resend goes at once, no timer run.
      h.setLeader(2);
      for (const l of [...listeners]) l();
      await vi.advanceTimersByTimeAsync(0);
      expect(h.sent.map((s) => s.leader)).toEqual([1, 1, 1, 2]);
      expect(listeners.size).toBe(0);
      // Broker 2 does not lead yet (LEADER_AND_ISR still on its way): the next try comes 100 ms later, not 800.
      h.answer();
      await vi.advanceTimersByTimeAsync(0);
      readyAt2 = true;
      await vi.advanceTimersByTimeAsync(100);
      expect(h.sent.map((s) => s.leader)).toEqual([1, 1, 1, 2, 2]);
      h.answer();
      const [r] = await a;
      expect((r as Meta).leader).toBe(2);
    } finally {
      vi.useRealTimers();
    }
  });
});
