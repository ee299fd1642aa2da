/**
 * `klog perf latency`: end-to-end latency (docs/design.md §10). A producer sends --size-byte
 * messages at a fixed --rate for --seconds while a consumer in the same process long-polls the
 * partition from its log end; each payload carries the `performance.now()` of its send, and
 * each message's latency is the time from that stamp to the moment the consumer has it: send,
 * broker append, flush (klog shows only flushed messages), the long poll's answer, decode.
 *
 * Prints p50, p95, p99, p99.9 and max in ms on stderr, or with --json one JSON object on
 * stdout. Messages sent during the first --warmup-seconds count toward nothing. The producer's
 * sends are paced by a timer that sleeps until the next message is due (at least 1 ms, so at
 * 1,000 msg/s and more every ms): `maxScheduleLagMs` says how far it fell behind the rate at
 * worst (a busy machine shows here first), `sendRate` the rate it kept.
 */
import { Command } from 'commander';
import { Producer, SimpleConsumer, type ProducerRecord } from '@klog/client';
import { createLogger } from '../logger.js';
import { type AcksValue, intParser, parseAcks, parseBroker, parseTopic } from '../options.js';
import { printLine } from '../output.js';

interface PerfLatencyOptions {
  broker: { host: string; port: number };
  topic: string;
  partition: number;
  rate: number;
  seconds: number;
  warmupSeconds: number;
  size: number;
  acks: AcksValue;
  batchSize: number;
  json?: boolean;
}

/** Bytes of the send stamp at the start of each payload (a float64 of ms). */
const stampBytes = 8;
/** Shortest pacing timer in ms (Node runs no timer sooner). */
const tickMs = 1;

/** Percentiles of a latency sample in ms (sorted in place). */
export interface LatencySummary {
  readonly count: number;
  readonly p50Ms: number;
  readonly p95Ms: number;
  readonly p99Ms: number;
  readonly p999Ms: number;
  readonly maxMs: number;
  readonly meanMs: number;
}

/**
 * Nearest-rank percentiles of `latencies` (ms), which it sorts in place.
 * @returns all NaN for an empty sample
 */
export function summarizeLatencies(latencies: Float64Array): LatencySummary {
  latencies.sort();
  const n = latencies.length;
  const at = (q: number): number => (n === 0 ? Number.NaN : latencies[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))]!);
  let sum = 0;
  for (let i = 0; i < n; i++) sum += latencies[i]!;
  const maxMs = n === 0 ? Number.NaN : latencies[n - 1]!;
  return { count: n, p50Ms: at(0.5), p95Ms: at(0.95), p99Ms: at(0.99), p999Ms: at(0.999), maxMs, meanMs: n === 0 ? Number.NaN : sum / n };
}

/** A copy of `template` with the `performance.now()` of this call in its first 8 bytes (float64 LE). */
export function stampedPayload(template: Buffer): Buffer {
  const value = Buffer.from(template);
  value.writeDoubleLE(performance.now(), 0);
  return value;
}

/** The 8 bytes of a send stamp, copied out of a payload to be read as a float64 (LE). */
const stampScratch = new DataView(new ArrayBuffer(stampBytes));

/**
 * ms from a payload's send stamp (see {@link stampedPayload}) to `now`. Reads the stamp through
 * one scratch buffer: a Buffer view per message, at 100,000 msg/s, is 100,000 short-lived
 * objects a second for the young generation to sweep.
 */
export function stampAgeMs(payload: Uint8Array, now: number): number {
  for (let i = 0; i < stampBytes; i++) stampScratch.setUint8(i, payload[i]!);
  return now - stampScratch.getFloat64(0, true);
}

/** What {@link paced} did. */
export interface Pacing {
  /** Messages handed to `send`. */
  readonly sent: number;
  /** From the first send to the last, in s. */
  readonly seconds: number;
  /** Longest a message waited past its time in the schedule, in ms (how far the sender fell behind). */
  readonly maxLagMs: number;
}

/**
 * Hands `total` messages to `send` at `rate` messages per second: the messages whose time has
 * come (message i is due at i / rate s after the start), in one call, then sleeps until the next
 * one is due (at least {@link tickMs} ms): at 100 msg/s one timer per message, not ten.
 * @param send sends `count` messages; a rejection of what it returns ends the pacing with it
 */
export function paced(rate: number, total: number, send: (count: number) => Promise<unknown> | void): Promise<Pacing> {
  return new Promise<Pacing>((resolve, reject) => {
    let sent = 0;
    let maxLagMs = 0;
    const began = performance.now();
    const tick = (): void => {
      const now = performance.now();
      const due = Math.min(total, Math.floor(((now - began) / 1000) * rate) + 1);
      if (due > sent) {
        maxLagMs = Math.max(maxLagMs, now - began - (sent / rate) * 1000);
        const r = send(due - sent);
        if (r) r.catch(reject);
        sent = due;
      }
      if (sent >= total) resolve({ sent, seconds: (performance.now() - began) / 1000, maxLagMs });
      else setTimeout(tick, Math.max(tickMs, Math.ceil(began + (sent / rate) * 1000 - performance.now())));
    };
    tick();
  });
}

/** Adds `klog perf latency` under `perf`. */
export function registerPerfLatency(perf: Command): void {
  perf
    .command('latency')
    .description('send at a fixed --rate, consume at the log end, print send→consume latency percentiles')
    .requiredOption('--broker <host:port>', 'broker holding the partition', parseBroker)
    .requiredOption('--topic <topic>', 'topic to send to and read', parseTopic)
    .option('--partition <n>', 'partition to send to and read', intParser(0), 0)
    .option('--rate <msg/s>', 'messages per second', intParser(1, 10_000_000), 1000)
    .option('--seconds <s>', 'seconds to send for (after the warm-up)', intParser(1, 86_400), 10)
    .option('--warmup-seconds <s>', 'seconds sent first and not counted', intParser(0, 3_600), 1)
    .option('--size <bytes>', `payload bytes per message (at least ${stampBytes}, for the stamp)`, intParser(stampBytes, 1_000_000), 200)
    .option('--acks <0|1|2|all>', '0: fire-and-forget, 1: appended, 2: flushed, all: flushed on every in-sync replica', parseAcks, 0)
    .option('--batch-size <n>', 'most messages per request (messages due in the same ms go together)', intParser(1), 200)
    .option('--json', 'print one JSON object on stdout instead of a line on stderr')
    .action(async (opts: PerfLatencyOptions) => perfLatency(opts));
}

async function perfLatency(opts: PerfLatencyOptions): Promise<void> {
  const address = `${opts.broker.host}:${opts.broker.port}`;
  const producer = new Producer({ brokerList: address, batchSize: opts.batchSize, lingerMs: 0, acks: opts.acks, logger: createLogger('klog-perf') });
  const consumer = new SimpleConsumer(opts.broker);
  const stop = new AbortController();
  const { topic, partition } = opts;
  const warmupCount = opts.rate * opts.warmupSeconds;
  const total = warmupCount + opts.rate * opts.seconds;
  const latencies = new Float64Array(total - warmupCount);
  let received = 0;
  let measured = 0;
  try {
    // The topic exists (and the producer knows its partitions) before the clock starts.
    await producer.partitionCount(topic);
    const start = await consumer.latestOffset(topic, partition);
    let last = performance.now();
    const consuming = (async () => {
      for await (const batch of consumer.messageBatches({ topic, partition, offset: start, maxWaitMs: 1000, prefetch: 0, signal: stop.signal })) {
        const now = performance.now();
        for (const m of batch) {
          if (m.payload.length < stampBytes) continue;
          const seq = received++;
          if (seq >= warmupCount && measured < latencies.length) latencies[measured++] = stampAgeMs(m.payload, now);
        }
        last = now;
        if (received >= total) return;
      }
    })();
    const template = Buffer.alloc(opts.size, 0x61);
    const sends: Promise<unknown>[] = [];
    const began = performance.now();
    const pacing = await paced(opts.rate, total, (count) => {
      const records: ProducerRecord[] = new Array<ProducerRecord>(count);
      for (let i = 0; i < count; i++) records[i] = { value: stampedPayload(template), partition };
      const p = producer.send(topic, records);
      if (opts.acks !== 0) sends.push(p);
      return p;
    });
    const { sent, maxLagMs } = pacing;
    const sendSeconds = pacing.seconds;
    await Promise.all(sends);
    await producer.flush();
    const deadline = setTimeout(() => stop.abort(), 10_000);
    await consuming;
    clearTimeout(deadline);
    const summary = summarizeLatencies(latencies.subarray(0, measured));
    const result = {
      test: 'latency',
      rate: opts.rate,
      seconds: opts.seconds,
      warmupSeconds: opts.warmupSeconds,
      size: opts.size,
      acks: opts.acks,
      sent,
      received,
      lost: sent - received,
      sendRate: sent / sendSeconds,
      maxScheduleLagMs: maxLagMs,
      consumeSeconds: (last - began) / 1000,
      ...summary,
    };
    if (received < sent) throw new Error(`consumer received ${received} of ${sent} messages within 10 s of the last send`);
    if (opts.json) {
      process.stdout.write(`${JSON.stringify(result)}\n`);
      return;
    }
    const f = (x: number): string => x.toFixed(2);
    printLine(
      `perf latency: ${summary.count} messages of ${opts.size} B at ${opts.rate} msg/s (acks ${opts.acks}), send→consume ms: ` +
        `p50 ${f(summary.p50Ms)}, p95 ${f(summary.p95Ms)}, p99 ${f(summary.p99Ms)}, p99.9 ${f(summary.p999Ms)}, max ${f(summary.maxMs)}` +
        ` (sent at ${result.sendRate.toFixed(0)} msg/s, at worst ${f(maxLagMs)} ms behind the rate)`,
    );
  } finally {
    stop.abort();
    await producer.close().catch(() => {});
    await consumer.close();
  }
}
