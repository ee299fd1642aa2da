/**
 * `klog perf latency`: a fixed-rate producer and a long-polling consumer against a real broker
 * (default settings: group commit), and the percentiles it prints. How low they are is for
 * the broker's tests (apps/broker/test/group-commit.test.ts) and docs/benchmarks.md.
 */
import { createHook } from 'node:async_hooks';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startBroker, type Broker } from '@klog/broker';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GCProfiler } from 'node:v8';
import { paced, stampAgeMs, stampedPayload, summarizeLatencies } from '../src/commands/perf-latency.js';

const main = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');

function klog(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [main, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('klog perf latency', () => {
  let work: string;
  let broker: Broker;
  let address: string;
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'klog-perf-latency-test-'));
    broker = await startBroker({ logDir: join(work, 'logs'), port: 0 }, pino({ level: 'silent' }));
    address = `127.0.0.1:${broker.port}`;
  });
  afterAll(async () => {
    await broker.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('sends at the rate asked, receives every message and prints ordered percentiles as JSON', async () => {
    for (const acks of ['0', '2']) {
      const r = await klog(['perf', 'latency', '--broker', address, '--topic', `lat${acks}`, '--rate', '200', '--seconds', '1', '--warmup-seconds', '1', '--acks', acks, '--json']);
      expect(r.code, r.stderr).toBe(0);
      const j = JSON.parse(r.stdout) as Record<string, number>;
      expect(j).toMatchObject({ test: 'latency', rate: 200, seconds: 1, size: 200, acks: Number(acks), sent: 400, received: 400, lost: 0, count: 200 });
      expect(j.p50Ms).toBeGreaterThan(0);
      expect(j.p50Ms).toBeLessThanOrEqual(j.p95Ms!);
      expect(j.p95Ms).toBeLessThanOrEqual(j.p99Ms!);
      expect(j.p99Ms).toBeLessThanOrEqual(j.p999Ms!);
      expect(j.p999Ms).toBeLessThanOrEqual(j.maxMs!);
    }
  });

  it('prints one line without --json, and one line of error for a bad rate', async () => {
    const r = await klog(['perf', 'latency', '--broker', address, '--topic', 'latline', '--rate', '100', '--seconds', '1', '--warmup-seconds', '0']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^perf latency: 100 messages of 200 B at 100 msg\/s \(acks 0\), send→consume ms: p50 [\d.]+, p95 [\d.]+, p99 [\d.]+, p99\.9 [\d.]+, max [\d.]+/);
    const bad = await klog(['perf', 'latency', '--broker', address, '--topic', 'latline', '--rate', '0']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr.trimEnd().split('\n')).toHaveLength(1);
  });

  it('paces by sleeping until the next message is due: at 100 msg/s one or two timers per message, none early', async () => {
    let timers = 0;
    const hook = createHook({
      init(_id, type) {
        if (type === 'Timeout') timers++;
      },
    }).enable();
    const sentAt: number[] = [];
    const began = performance.now();
    let pacing;
    try {
      pacing = await paced(100, 20, (count) => {
        for (let i = 0; i < count; i++) sentAt.push(performance.now() - began);
      });
    } finally {
      hook.disable();
    }
    expect(pacing.sent).toBe(20);
    expect(sentAt).toHaveLength(20);
    // Message i is due i × 10 ms after the start and never goes before (a 1 ms tick arms over a hundred timers).
    sentAt.forEach((at, i) => expect(at).toBeGreaterThanOrEqual(i * 10 - 0.5));
    expect(timers).toBeLessThanOrEqual(60);
  });

  it('reads a send stamp back without allocating per message: the young generation is swept a fraction as often as for a Buffer view each', () => {
    const payload = stampedPayload(Buffer.alloc(200, 0x61));
    // As the consumer has it: a Uint8Array view, not a Buffer.
    const message = new Uint8Array(payload.buffer, payload.byteOffset, payload.length);
    const sweeps = (read: (p: Uint8Array) => number): number => {
      const gc = new GCProfiler();
      gc.start();
      let sum = 0;
      // 3,000,000 reads: enough sweeps of a Buffer view each (about 20) for the ratio to mean something.
      for (let i = 0; i < 3_000_000; i++) sum += read(message);
      expect(sum).toBeGreaterThan(0);
      return gc.stop().statistics.length;
    };
    const now = performance.now() + 1;
    // stampAgeMs first: the young generation only grows, so a later loop is swept less often per byte.
    const stamp = sweeps((p) => stampAgeMs(p, now));
    const view = sweeps((p) => now - Buffer.from(p.buffer, p.byteOffset, p.byteLength).readDoubleLE(0));
    expect(stampAgeMs(message, now)).toBeCloseTo(now - payload.readDoubleLE(0), 9);
    expect(view).toBeGreaterThanOrEqual(8);
    expect(stamp * 3).toBeLessThan(view);
  });

  it('takes nearest-rank percentiles', () => {
    const s = summarizeLatencies(Float64Array.from({ length: 1000 }, (_, i) => 1000 - i));
    expect(s).toMatchObject({ count: 1000, p50Ms: 500, p95Ms: 950, p99Ms: 990, p999Ms: 999, maxMs: 1000, meanMs: 500.5 });
    expect(Number.isNaN(summarizeLatencies(new Float64Array(0)).p99Ms)).toBe(true);
  });
});
