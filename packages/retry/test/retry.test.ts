import { describe, expect, it } from 'vitest';
import { Backoff, backoffDelayMs, isRetriable, retry, sleep, waitFor } from '../src/index.js';

const flaky = (failures: number, error: unknown) => {
  let calls = 0;
  return async (): Promise<string> => {
    if (calls++ < failures) throw error;
    return 'ok';
  };
};
const retriableError = Object.assign(new Error('connection lost'), { retriable: true });

describe('backoffDelayMs', () => {
  it('grows exponentially up to the maximum, without jitter exactly', () => {
    const o = { initialMs: 100, maxMs: 1000, jitter: 0 };
    expect([0, 1, 2, 3, 4, 10, 1000].map((n) => backoffDelayMs(n, o))).toEqual([100, 200, 400, 800, 1000, 1000, 1000]);
    expect(backoffDelayMs(2, { initialMs: 10, maxMs: 1000, factor: 3, jitter: 0 })).toBe(90);
  });

  it('draws the jittered part at random within [d × (1 − jitter), d]', () => {
    const o = { initialMs: 100, maxMs: 1000, jitter: 0.5 };
    expect(backoffDelayMs(1, o, () => 0)).toBe(200);
    expect(backoffDelayMs(1, o, () => 0.999999)).toBe(100);
    for (let i = 0; i < 200; i++) {
      const d = backoffDelayMs(3, o);
      expect(d).toBeGreaterThanOrEqual(400);
      expect(d).toBeLessThanOrEqual(800);
    }
  });

  it('refuses options out of range', () => {
    expect(() => backoffDelayMs(0, { initialMs: 10, maxMs: 5 })).toThrow(RangeError);
    expect(() => backoffDelayMs(0, { initialMs: 10, maxMs: 50, jitter: 2 })).toThrow(RangeError);
    expect(() => new Backoff({ initialMs: 10, maxMs: 50, factor: 0.5 })).toThrow(RangeError);
  });
});

describe('Backoff', () => {
  it('grows with each failure and starts over after a reset', () => {
    const b = new Backoff({ initialMs: 10, maxMs: 1000, jitter: 0 });
    expect([b.next(), b.next(), b.next()]).toEqual([10, 20, 40]);
    expect(b.attempts).toBe(3);
    b.reset();
    expect(b.next()).toBe(10);
  });
});

describe('retry', () => {
  it('retries retriable failures and returns the first success', async () => {
    const seen: number[] = [];
    const result = await retry(flaky(3, retriableError), { initialMs: 1, maxMs: 4, onRetry: ({ attempt }) => void seen.push(attempt) });
    expect(result).toBe('ok');
    expect(seen).toEqual([0, 1, 2]);
  });

  it('throws a failure that is not retriable at once', async () => {
    const fatal = new Error('bad request');
    let calls = 0;
    await expect(retry(async () => { calls++; throw fatal; }, { initialMs: 1, maxMs: 4 })).rejects.toBe(fatal);
    expect(calls).toBe(1);
    expect(isRetriable(fatal)).toBe(false);
    expect(isRetriable(retriableError)).toBe(true);
  });

  it('stops after `retries` retries, with the last error', async () => {
    let calls = 0;
    await expect(retry(async () => { calls++; throw retriableError; }, { initialMs: 1, maxMs: 1, retries: 2 })).rejects.toBe(retriableError);
    expect(calls).toBe(3);
  });

  it('stops at the deadline, and a custom predicate decides what is retriable', async () => {
    const started = Date.now();
    await expect(retry(async () => { throw new Error('x'); }, { initialMs: 20, maxMs: 20, deadlineMs: 150, retriable: () => true })).rejects.toThrow('x');
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(140);
    expect(took).toBeLessThan(1000);
  });

  it('an aborted signal ends the wait with the last error', async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 30);
    const started = Date.now();
    await expect(retry(async () => { throw retriableError; }, { initialMs: 10_000, maxMs: 10_000, signal: ac.signal })).rejects.toBe(retriableError);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('sleep resolves true after the wait and false when aborted', async () => {
    expect(await sleep(1)).toBe(true);
    const ac = new AbortController();
    ac.abort();
    expect(await sleep(10_000, ac.signal)).toBe(false);
  });
});

describe('waitFor', () => {
  it('resolves once the condition holds, polling at the interval', async () => {
    let calls = 0;
    await waitFor('three calls', () => ++calls >= 3, 5000, 10);
    expect(calls).toBe(3);
  });

  it('awaits an async condition', async () => {
    let calls = 0;
    await waitFor('two calls', async () => (await sleep(1)) && ++calls >= 2, 5000, 1);
    expect(calls).toBe(2);
  });

  it('throws naming the condition and the timeout when it never holds', async () => {
    const started = Date.now();
    await expect(waitFor('the moon', () => false, 100, 10)).rejects.toThrow('timed out after 100 ms waiting for the moon');
    expect(Date.now() - started).toBeGreaterThanOrEqual(100);
  });
});
