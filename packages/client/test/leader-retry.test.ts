/**
 * The retry bounds and the retry counts of docs/replication.md §13.2: `NotEnoughReplicas` is
 * retried for `notEnoughReplicasTimeoutMs` from the first of an unbroken run of it, and a
 * summary names the codes it retried.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCode } from '@klog/protocol';
import { KlogBrokerError, KlogConnectionError } from '../src/errors.js';
import { describeRetries, LeaderRetriesExhaustedError, RetryTally, ShortIsrWindow, withLeaderRetry } from '../src/leader-retry.js';

const refused = (code: number): Error => new KlogBrokerError(code, { topic: 't', partition: 0 });

describe('ShortIsrWindow', () => {
  it('runs out timeoutMs after the first of an unbroken run of NotEnoughReplicas', () => {
    const w = new ShortIsrWindow(1000);
    expect(w.exhausted(refused(ErrorCode.NotEnoughReplicas), 5000)).toBe(false);
    expect(w.exhausted(refused(ErrorCode.NotEnoughReplicasAfterAppend), 5999)).toBe(false);
    expect(w.exhausted(refused(ErrorCode.NotEnoughReplicas), 6000)).toBe(true);
  });

  it('starts again after another failure or a success', () => {
    const w = new ShortIsrWindow(1000);
    w.exhausted(refused(ErrorCode.NotEnoughReplicas), 0);
    expect(w.exhausted(refused(ErrorCode.NotLeaderForPartition), 900)).toBe(false);
    expect(w.exhausted(refused(ErrorCode.NotEnoughReplicas), 1500)).toBe(false);
    expect(w.exhausted(refused(ErrorCode.NotEnoughReplicas), 2499)).toBe(false);
    w.reset();
    expect(w.exhausted(refused(ErrorCode.NotEnoughReplicas), 3000)).toBe(false);
    expect(w.exhausted(new KlogConnectionError('b', 'closed'), 5000)).toBe(false);
  });
});

describe('withLeaderRetry', () => {
  it('gives up on NotEnoughReplicas after notEnoughReplicasTimeoutMs, with retries and time left', async () => {
    const codes: number[] = [];
    const started = Date.now();
    const err = await withLeaderRetry(
      { topic: 't', partition: 0 },
      () => Promise.reject(refused(ErrorCode.NotEnoughReplicas)),
      {
        leader: () => 1,
        refresh: async () => {},
        onRetry: (e) => codes.push(e.code),
        maxRetries: 1000,
        retryTimeoutMs: 60_000,
        notEnoughReplicasTimeoutMs: 300,
      },
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LeaderRetriesExhaustedError);
    expect((err as Error).message).toMatch(/^topic t partition 0: gave up after \d+ retries \(last leader 1, last error NotEnoughReplicas\)/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(codes.length).toBeLessThan(10);
  });
});

describe('describeRetries', () => {
  it('names each code with its count, the most frequent first', () => {
    const t = new RetryTally();
    t.record(ErrorCode.NotLeaderForPartition);
    t.record(-1);
    t.record(ErrorCode.NotLeaderForPartition);
    expect(t.total).toBe(3);
    expect(describeRetries(t.byCode)).toBe('3 retries (2 NotLeaderForPartition, 1 connection lost)');
    const one = new RetryTally();
    one.record(ErrorCode.NotEnoughReplicas);
    expect(describeRetries(one.byCode)).toBe('1 retry (1 NotEnoughReplicas)');
    expect(describeRetries(new RetryTally().byCode)).toBe('');
  });
});
