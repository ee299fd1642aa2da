/**
 * `klog produce --acks all` and `klog perf produce --acks all` as a user types them
 * (docs/replication.md §11, §13.2): to a paper topic it is acks 2; to a replicated topic whose
 * first broker answers NotLeaderForPartition, the lines reach the leader it names, in order, with
 * one warn line for the leader change and the retries counted in the summary.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ErrorCode } from '@klog/protocol';
import { runKlog, storedPayloads } from './cli-run.js';
import { formerLeader as formerLeaderBroker, type RealBroker, startRealBroker } from './replicated-brokers.js';

let cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

async function broker(): Promise<RealBroker> {
  const b = await startRealBroker();
  cleanups.push(() => b.stop());
  return b;
}

/** Broker 1: leads partition 0 of `events` in its first TOPIC_METADATA answer, then names broker 2 (`real`); answers every produce NotLeaderForPartition. */
async function formerLeader(real: RealBroker): Promise<number> {
  let asked = 0;
  const s = await formerLeaderBroker((own) => {
    const leader = asked++ === 0 ? 1 : 2;
    return {
      errorCode: ErrorCode.None,
      brokers: [
        { brokerId: 1, host: '127.0.0.1', port: own },
        { brokerId: 2, host: real.host, port: real.port },
      ],
      topics: [{ topic: 'events', errorCode: ErrorCode.None, partitions: [{ partition: 0, errorCode: ErrorCode.None, leader, leaderEpoch: leader, replicas: [1, 2], isr: [1, 2] }] }],
    };
  });
  cleanups.push(() => s.stop());
  return s.port;
}

describe('--acks all', () => {
  it('klog produce stores a paper topic\'s lines flushed', async () => {
    const b = await broker();
    const r = await runKlog(['produce', '--broker-list', b.address, '--topic', 'paper', '--acks', 'all'], 'a\nb\n');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/2 acknowledged, 0 failed\n$/);
    expect(await storedPayloads(b.host, b.port, 'paper')).toEqual(['a', 'b']);
  });

  it('klog produce rides through a leader change: one warn line, the retries in the summary', async () => {
    const real = await broker();
    const port = await formerLeader(real);
    const lines = Array.from({ length: 50 }, (_x, i) => `line-${i}`);
    const r = await runKlog(['produce', '--broker-list', `127.0.0.1:${port}`, '--topic', 'events', '--acks', 'all', '--linger-ms', '0'], lines.join('\n') + '\n');
    expect(r.code, r.stderr).toBe(0);
    const stderr = r.stderr.trimEnd().split('\n');
    expect(stderr.filter((l) => l.includes('leader 1 → 2'))).toHaveLength(1);
    expect(stderr.at(-1)).toMatch(/50 acknowledged, 0 failed, (\d+) retr(y|ies) \(\1 NotLeaderForPartition\)$/);
    expect(await storedPayloads(real.host, real.port, 'events')).toEqual(lines);
  });

  it('klog perf produce counts the retries', async () => {
    const real = await broker();
    const port = await formerLeader(real);
    const r = await runKlog(['perf', 'produce', '--broker-list', `127.0.0.1:${port}`, '--topic', 'events', '--acks', 'all', '--messages', '200', '--size', '10', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const summary = JSON.parse(r.stdout) as { acks: string; messages: number; failed: number; leaderRetries: number; stored: number | null };
    // A replicated topic's leaders may move during the run: no one broker's log ends to check.
    expect(summary).toMatchObject({ acks: 'all', messages: 200, failed: 0, stored: null });
    expect(await storedPayloads(real.host, real.port, 'events')).toHaveLength(200);
    expect(summary.leaderRetries).toBeGreaterThanOrEqual(1);
  });
});
