/**
 * The Kafka listener's long-poll wait (apps/broker/src/kafka/fetch.ts): it ends after its
 * max wait even when a garbage collection runs meanwhile. (An AbortSignal.timeout inside
 * AbortSignal.any is collected unfired by a GC during the wait, which left a Fetch, and the
 * Kafka connection behind it, waiting forever: kcat -C -e's last fetch then timed out after 60 s.)
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import type { KafkaContext } from '../src/kafka/context.js';
import { waitForFlush } from '../src/kafka/fetch.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

describe('a Kafka long-poll fetch', () => {
  it('ends after its max wait although a garbage collection runs during it', async () => {
    const closing = new AbortController();
    // The wait reads nothing of the context but the closing signal.
    const k = { broker: { closing: closing.signal } } as unknown as KafkaContext;
    const started = Date.now();
    const waited = waitForFlush(k, [], 300).then(() => 'ended');
    setTimeout(() => gc(), 50);
    setTimeout(() => gc(), 150);
    const r = await Promise.race([waited, new Promise((resolve) => setTimeout(() => resolve('still waiting after 3 s'), 3000))]);
    expect(r).toBe('ended');
    expect(Date.now() - started).toBeGreaterThanOrEqual(280);
  });

  it('ends at once when the connection closes', async () => {
    const closing = new AbortController();
    const k = { broker: { closing: closing.signal } } as unknown as KafkaContext;
    const waited = waitForFlush(k, [], 30_000);
    setTimeout(() => closing.abort(), 20);
    const started = Date.now();
    await waited;
    expect(Date.now() - started).toBeLessThan(5000);
  });
});
