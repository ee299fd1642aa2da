/**
 * Shared by the client scripts: arguments, the payload, timing and the one JSON line each
 * run prints on stdout (the fields of `klog perf --json`: messages, bytes, seconds,
 * msgsPerSec, mbPerSec with MB = 2^20 bytes, plus extras).
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';

/**
 * `node clients/X.mjs <setup|produce|consume|latency> --port P --dest D [--messages N] [--size S]
 * [--batch B] [--max-in-flight M] [--timeout-s T] [--rate R --seconds S --warmup-seconds W]
 * [--replicas R] [--acks]`; `--replicas` (setup) and `--acks` (produce: publish with the broker's
 * acknowledgement) are for the peers that replicate (NATS JetStream).
 */
export function args() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      port: { type: 'string' },
      dest: { type: 'string', default: 'bench' },
      messages: { type: 'string', default: '100000' },
      size: { type: 'string', default: '200' },
      batch: { type: 'string', default: '1' },
      'max-in-flight': { type: 'string', default: '10000' },
      'timeout-s': { type: 'string', default: '300' },
      rate: { type: 'string', default: '1000' },
      seconds: { type: 'string', default: '10' },
      'warmup-seconds': { type: 'string', default: '1' },
      replicas: { type: 'string', default: '1' },
      acks: { type: 'boolean', default: false },
    },
  });
  const mode = positionals[0];
  if (!['setup', 'produce', 'consume', 'latency'].includes(mode)) throw new Error(`mode must be setup, produce, consume or latency, not ${mode}`);
  const port = Number(values.port);
  if (!(port > 0)) throw new Error('--port is required');
  return {
    mode,
    port,
    dest: values.dest,
    messages: Number(values.messages),
    size: Number(values.size),
    batch: Number(values.batch),
    maxInFlight: Number(values['max-in-flight']),
    timeoutMs: Number(values['timeout-s']) * 1000,
    rate: Number(values.rate),
    seconds: Number(values.seconds),
    warmupSeconds: Number(values['warmup-seconds']),
    replicas: Number(values.replicas),
    acks: values.acks,
  };
}

/** The payload every message carries: `size` random bytes. */
export const payloadOf = (size) => randomBytes(size);

export const now = () => process.hrtime.bigint();
export const secondsSince = (t0) => Number(process.hrtime.bigint() - t0) / 1e9;

/** Yields to the event loop (one macrotask turn). */
export const tick = () => new Promise((r) => setImmediate(r));
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Prints the one JSON result line and exits. */
export function report(test, messages, bytes, seconds, extra = {}) {
  const msgsPerSec = seconds > 0 ? messages / seconds : 0;
  const mbPerSec = seconds > 0 ? bytes / 2 ** 20 / seconds : 0;
  process.stdout.write(`${JSON.stringify({ test, messages, bytes, seconds, msgsPerSec, mbPerSec, ...extra })}\n`);
}

/** Runs main(), printing an error as a JSON line with `error`, and exits (0 on success). */
export function run(main) {
  main().then(
    () => process.exit(0),
    (err) => {
      process.stdout.write(`${JSON.stringify({ error: String(err?.stack ?? err) })}\n`);
      process.exit(1);
    },
  );
}

/** Rejects after ms with a message naming what timed out (the timer does not hold the process). */
export function deadline(ms, what) {
  return new Promise((_, reject) => {
    const t = setTimeout(() => reject(new Error(`${what}: timed out after ${ms / 1000} s`)), ms);
    t.unref();
  });
}

const klogLatency = await import(new URL('../../../tools/klog/dist/commands/perf-latency.js', import.meta.url).href);

/**
 * The fixed-rate probe of `klog perf latency`, for a peer: `subscribe(onMessage)` starts the
 * peer's consumer (resolving once it is ready), which calls `onMessage(payload)` for each
 * message as it arrives; `send(payloads)` publishes the stamped payloads (one call per 1 ms
 * tick, the messages due). Resolves with the same JSON fields as
 * `klog perf latency --json` once every message came back (or rejects after 10 s without).
 * Pacing, stamps and percentiles are klog's own (tools/klog/src/commands/perf-latency.ts).
 */
export async function latencyProbe(a, subscribe, send) {
  const warmup = a.rate * a.warmupSeconds;
  const total = warmup + a.rate * a.seconds;
  const latencies = new Float64Array(total - warmup);
  let received = 0;
  let measured = 0;
  let allIn;
  const done = new Promise((r) => (allIn = r));
  const onMessage = (payload) => {
    const now = performance.now();
    if (received++ >= warmup && measured < latencies.length) latencies[measured++] = klogLatency.stampAgeMs(payload, now);
    if (received >= total) allIn();
  };
  await subscribe(onMessage);
  const template = Buffer.alloc(a.size, 0x61);
  const pacing = await klogLatency.paced(a.rate, total, (count) => send(Array.from({ length: count }, () => klogLatency.stampedPayload(template))));
  const timer = setTimeout(() => allIn(), 10_000);
  await done;
  clearTimeout(timer);
  if (received < total) throw new Error(`the consumer received ${received} of ${total} messages within 10 s of the last send`);
  const summary = klogLatency.summarizeLatencies(latencies.subarray(0, measured));
  return { test: 'latency', rate: a.rate, seconds: a.seconds, warmupSeconds: a.warmupSeconds, size: a.size, sent: pacing.sent, received, sendRate: pacing.sent / pacing.seconds, maxScheduleLagMs: pacing.maxLagMs, ...summary };
}
