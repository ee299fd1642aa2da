/**
 * The figures `klog perf` reports while it runs and at its end: messages and bytes so far, the
 * latency of acknowledged sends (a histogram over the whole run for the percentiles, and one per
 * reporting interval for the live lines), and the plain live line printed every
 * `--reporting-interval-ms` when stderr is not a terminal (kafka-producer-perf-test's form).
 */
import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';
import { formatCount } from './progress.js';
import { rate } from './rate.js';

/** Latency figures in ms: mean, max and the percentiles p50, p95, p99, p99.9. */
export interface LatencySummary {
  readonly avg: number;
  readonly max: number;
  readonly p50: number;
  readonly p95: number;
  readonly p99: number;
  readonly p999: number;
}

/** Latency of acknowledged sends, recorded in µs (the histogram's unit), reported in ms. */
export class LatencyRecorder {
  private readonly total: RecordableHistogram = createHistogram();
  private readonly interval: RecordableHistogram = createHistogram();

  /** Records `count` messages acknowledged `ms` after they were sent. */
  record(ms: number, count: number): void {
    const us = Math.max(1, Math.round(ms * 1000));
    for (let i = 0; i < count; i++) {
      this.total.record(us);
      this.interval.record(us);
    }
  }

  /** Messages recorded over the run. */
  get count(): number {
    return this.total.count;
  }

  /** Mean and max since the last call (ms), and starts a new interval; undefined when nothing was recorded. */
  takeInterval(): { avg: number; max: number } | undefined {
    const h = this.interval;
    if (h.count === 0) return undefined;
    const r = { avg: h.mean / 1000, max: h.max / 1000 };
    h.reset();
    return r;
  }

  /** The whole run's figures; undefined when nothing was recorded. */
  summary(): LatencySummary | undefined {
    const h = this.total;
    if (h.count === 0) return undefined;
    const ms = (us: number): number => us / 1000;
    return { avg: ms(h.mean), max: ms(h.max), p50: ms(h.percentile(50)), p95: ms(h.percentile(95)), p99: ms(h.percentile(99)), p999: ms(h.percentile(99.9)) };
  }
}

/** `avg 1.20 ms, max 15.30 ms, p50 ..., p99.9 ... ms` for a summary. */
export function formatLatency(l: LatencySummary): string {
  const f = (v: number): string => v.toFixed(2);
  return `avg ${f(l.avg)}, max ${f(l.max)}, p50 ${f(l.p50)}, p95 ${f(l.p95)}, p99 ${f(l.p99)}, p99.9 ${f(l.p999)} ms`;
}

/**
 * The plain live line of one interval: `12,345 messages sent, 2,469.0 msg/s (0.47 MB/s), 3.2 ms
 * avg latency, 40.1 ms max latency` (MB = 2^20 bytes); the latency part only when sends were
 * acknowledged in the interval.
 */
export function intervalLine(
  what: string,
  verb: string,
  messages: number,
  bytes: number,
  seconds: number,
  latency: { avg: number; max: number } | undefined,
): string {
  const r = rate(messages, bytes, seconds);
  const lat = latency === undefined ? '' : `, ${latency.avg.toFixed(1)} ms avg latency, ${latency.max.toFixed(1)} ms max latency`;
  return `perf ${what}: ${formatCount(messages)} messages ${verb}, ${r.msgsPerSec.toFixed(1)} msg/s (${r.mbPerSec.toFixed(2)} MB/s)${lat}`;
}

/**
 * Calls `tick` every `intervalMs` with the seconds since the previous call, until `stop`. The
 * timer does not keep the process alive.
 */
export function every(intervalMs: number, tick: (seconds: number) => void): { stop(): void } {
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    tick((now - last) / 1000);
    last = now;
  }, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
