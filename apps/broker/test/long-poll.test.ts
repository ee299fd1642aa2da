/**
 * The broker's one long-poll wait (apps/broker/src/long-poll.ts), used by FETCH, REPLICA_FETCH
 * and the Kafka listener's Fetch. It ends after its max wait even when a garbage collection runs
 * meanwhile: an AbortSignal.timeout inside AbortSignal.any is collected unfired by a GC during
 * the wait, which left a Kafka Fetch (kcat -C -e's last one) and the connection behind it
 * waiting for ever.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { longPoll } from '../src/long-poll.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** 'ended' when `wait` settles within `ms`, else 'still waiting'. */
function within(wait: Promise<void>, ms: number): Promise<string> {
  return Promise.race([wait.then(() => 'ended'), new Promise<string>((resolve) => setTimeout(() => resolve('still waiting'), ms))]);
}

describe('a long poll', () => {
  it('ends after its max wait although a garbage collection runs during it', async () => {
    const closing = new AbortController();
    const started = Date.now();
    const waited = longPoll(closing.signal, 300, () => []);
    setTimeout(() => gc(), 50);
    setTimeout(() => gc(), 150);
    expect(await within(waited, 3000)).toBe('ended');
    expect(Date.now() - started).toBeGreaterThanOrEqual(280);
  });

  it('ends at once when the connection closes, and when woken; then removes every subscription', async () => {
    const closing = new AbortController();
    let removed = 0;
    const closed = longPoll(closing.signal, 30_000, () => [() => removed++, () => removed++]);
    setTimeout(() => closing.abort(), 20);
    expect(await within(closed, 5000)).toBe('ended');
    expect(removed).toBe(2);

    let wake = (): void => {};
    const woken = longPoll(new AbortController().signal, 30_000, (w) => {
      wake = w;
      return [() => removed++];
    });
    setTimeout(() => wake(), 20);
    expect(await within(woken, 5000)).toBe('ended');
    expect(removed).toBe(3);
  });

  it('ends at once when subscribe finds the data there already, or the signal had aborted', async () => {
    expect(await within(longPoll(new AbortController().signal, 30_000, (wake) => (wake(), [])), 1000)).toBe('ended');
    const aborted = new AbortController();
    aborted.abort();
    let subscribed = false;
    expect(await within(longPoll(aborted.signal, 30_000, () => ((subscribed = true), [])), 1000)).toBe('ended');
    expect(subscribed).toBe(false);
  });
});
