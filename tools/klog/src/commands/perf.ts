/**
 * `klog perf produce` and `klog perf consume`: the throughput tests of the paper (docs/design.md
 * §7), with what kafka-producer-perf-test reports. Each runs, then prints its summary on stderr,
 * or with --json one JSON object on stdout with messages, bytes (payload bytes), seconds,
 * msgsPerSec and mbPerSec (MB = 2^20 bytes), its settings, and for produce the latency
 * (`latencyMs`: avg, max, p50, p95, p99, p999; null with acks 0), what the broker stored
 * (`stored`, `storedBytes`), `failed` and `interrupted`.
 *
 * While running, each draws a live status line on stderr when stderr is a terminal (see
 * ../progress.ts): a bar of the progress, messages and bytes so far, the rate over the last
 * second, and for produce with acks 1 or 2 the latency; the bar is cleared before the summary.
 * When stderr is not a terminal, a plain line every --reporting-interval-ms instead. --json
 * draws and prints nothing live. SIGINT and SIGTERM stop the test and print its summary.
 * `klog perf produce` is in perf-produce.ts.
 */
import type { Command } from 'commander';
import { type BrokerAddress, SimpleConsumer } from '@klog/client';
import {
  addBrokerOption,
  addPartitionOptions,
  intParser,
  parseAcks,
  parseCompression,
  parseKeylessPartitioning,
  parseStartOffset,
  parseTopic,
  type StartOffset,
} from '../options.js';
import { printLine } from '../output.js';
import { every, intervalLine, type LatencyRecorder } from '../perf-stats.js';
import { createProgress, formatBytes, formatCount, type Progress, RecentRate } from '../progress.js';
import { rate } from '../rate.js';
import { startOffset } from './consume.js';
import { registerPerfLatency } from './perf-latency.js';
import { perfProduce, type PerfProduceOptions } from './perf-produce.js';

interface PerfConsumeOptions {
  broker: BrokerAddress;
  topic: string;
  partition: number;
  offset: StartOffset;
  fetchBytes: number;
  maxWaitMs: number;
  messages?: number;
  idleTimeoutMs: number;
  reportingIntervalMs: number;
  json?: boolean;
}

/** Adds `klog perf produce` and `klog perf consume` to `program`. */
export function registerPerf(program: Command): void {
  const perf = program
    .command('perf')
    .description('measure produce and consume throughput (and produce latency) against a broker')
    .addHelpText('after', '\nExamples:\n  klog perf produce --broker-list 127.0.0.1:9092 --topic perf --acks 1 --throughput 10000\n  klog perf consume --broker 127.0.0.1:9092 --topic perf');
  addBrokerOption(
    perf.command('produce').description('send --messages messages of --size bytes, then print the throughput, the latency of acknowledged sends and what the broker stored'),
    'brokerList',
    'brokers to send to (required; --broker is the same option)',
    true,
  )
    .requiredOption('--topic <topic>', 'topic to send to', parseTopic)
    .option('--messages <n>', 'messages to send', intParser(1), 100_000)
    .option('--size <bytes>', 'payload bytes per message', intParser(0, 2 ** 30, true), 200)
    .option('--batch-size <n>', 'messages per request', intParser(1), 200)
    .option('--linger-ms <ms>', 'most ms a message waits for its batch to fill (0: until the end of the event-loop turn)', intParser(0), 5)
    .option('--partitions <n>', 'spread messages round-robin over partitions 0..n-1 (default: keyless, see --keyless)', intParser(1))
    .option('--keyless <sticky|random>', 'without --partitions: sticky sends a batch of messages to one partition, then the next batch to another; random picks a partition per message, as in the paper', parseKeylessPartitioning, 'sticky')
    .option('--acks <0|1|2|all>', '0: fire-and-forget (no latency; the log ends tell what was stored), 1: appended, 2: flushed, all: flushed on every in-sync replica', parseAcks, 0)
    .option('--throughput <msg/s>', 'hold this rate, in messages per second (default: as fast as possible)', intParser(1))
    .option('--compression <none|gzip>', 'send each batch as one gzip-compressed message set (the payloads are random bytes: no gain in size)', parseCompression, 'none')
    .option('--reporting-interval-ms <ms>', 'when stderr is not a terminal: print a line of rate and latency this often', intParser(100), 5000)
    .option('--json', 'print one JSON object on stdout instead of lines on stderr')
    .addHelpText(
      'after',
      `
Examples:
  klog perf produce --broker-list 127.0.0.1:9092 --topic perf --messages 1000000
  klog perf produce --broker-list 127.0.0.1:9092 --topic perf --acks 1 --throughput 10000 --messages 300000
  klog perf produce --broker-list 127.0.0.1:9092 --topic perf --json`,
    )
    .action(async (opts: PerfProduceOptions) => perfProduce(opts));
  addPartitionOptions(perf.command('consume').description('read a partition from --offset until --messages messages (or idle), then print the throughput'))
    .option('--offset <earliest|latest|N>', 'where to start', parseStartOffset, 'earliest')
    .option('--fetch-bytes <bytes>', 'bytes per fetch', intParser(1, 2 ** 31 - 1, true), 1024 * 1024)
    .option('--max-wait-ms <ms>', 'long-poll wait per fetch at the log end', intParser(0, 2 ** 31 - 1), 200)
    .option('--messages <n>', 'stop after this many messages (default: at the log end)', intParser(1))
    .option('--idle-timeout-ms <ms>', 'stop once no new message came for this long', intParser(1), 2000)
    .option('--reporting-interval-ms <ms>', 'when stderr is not a terminal: print a line of the rate this often', intParser(100), 5000)
    .option('--json', 'print one JSON object on stdout instead of lines on stderr')
    .addHelpText(
      'after',
      `
Examples:
  klog perf consume --broker 127.0.0.1:9092 --topic perf --messages 1000000
  klog perf consume --broker 127.0.0.1:9092 --topic perf --offset earliest --json`,
    )
    .action(async (opts: PerfConsumeOptions) => perfConsume(opts));
  registerPerfLatency(perf);
}

async function perfConsume(opts: PerfConsumeOptions): Promise<void> {
  const consumer = new SimpleConsumer(opts.broker);
  const stop = new AbortController();
  let idleTimer: NodeJS.Timeout | undefined;
  const armIdle = (): void => {
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => stop.abort(), opts.idleTimeoutMs);
  };
  let interrupted = false;
  const onSignal = (): void => {
    interrupted = true;
    stop.abort();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let progress: Progress | undefined;
  let ticker: { stop(): void } | undefined;
  try {
    const { topic, partition } = opts;
    const offset = await startOffset(consumer, topic, partition, opts.offset);
    const live = opts.json !== true && process.stderr.isTTY === true;
    // The bar: of --messages when given, else of the log bytes up to the log end at the start
    // (asked only when a bar is drawn; moved on when the log grows past it).
    let logEnd = opts.messages === undefined && live ? await consumer.latestOffset(topic, partition) : 0;
    let messages = 0;
    let bytes = 0;
    const recent = new RecentRate();
    progress = createProgress({
      total: opts.messages ?? logEnd - offset,
      enabled: live,
      status: () => liveStatus(recent, messages, opts.messages, bytes),
    });
    if (!live && opts.json !== true) {
      let reported = { messages: 0, bytes: 0 };
      ticker = every(opts.reportingIntervalMs, (seconds) => {
        printLine(intervalLine('consume', 'read', messages - reported.messages, bytes - reported.bytes, seconds, undefined));
        reported = { messages, bytes };
      });
    }
    let lastAt = process.hrtime.bigint();
    const started = lastAt;
    armIdle();
    const batches = consumer.messageBatches({ topic, partition, offset, fetchBytes: opts.fetchBytes, maxWaitMs: opts.maxWaitMs, signal: stop.signal });
    outer: for await (const batch of batches) {
      armIdle();
      for (const m of batch) {
        messages++;
        bytes += m.payload.length;
        if (messages === opts.messages) break outer;
      }
      lastAt = process.hrtime.bigint();
      if (opts.messages !== undefined) {
        progress.update(messages);
      } else {
        const next = batch[batch.length - 1]!.nextOffset;
        if (next > logEnd) progress.setTotal((logEnd = next) - offset);
        progress.update(next - offset);
      }
    }
    if (messages === opts.messages || interrupted) lastAt = process.hrtime.bigint();
    ticker?.stop();
    progress.stop();
    // Time until the last message, not the idle wait after it.
    const seconds = Number(lastAt - started) / 1e9;
    report('consume', messages, bytes, seconds, opts.json, { fetchBytes: opts.fetchBytes, startOffset: offset }, { interrupted });
    if (interrupted && opts.json !== true) printLine(`perf consume: interrupted after ${messages} messages`);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    ticker?.stop();
    progress?.stop();
    clearTimeout(idleTimer);
    await consumer.close();
  }
}

/**
 * The live status after the bar, as fields in order of importance (see createProgress):
 * `1,200/10,000 msg`, `229.0 KiB`, `61,020 msg/s`, `11.6 MB/s` (rates over the last second, MB =
 * 2^20 bytes), and with `latency` the mean latency of the sends acknowledged since the last redraw.
 */
export function liveStatus(recent: RecentRate, messages: number, totalMessages: number | undefined, bytes: number, latency?: LatencyRecorder): string[] {
  const r = recent.sample(messages, bytes);
  const count = totalMessages === undefined ? formatCount(messages) : `${formatCount(messages)}/${formatCount(totalMessages)}`;
  const fields = [`${count} msg`, `${formatCount(r.msgsPerSec)} msg/s`, `${r.mbPerSec.toFixed(1)} MB/s`];
  const l = latency?.takeInterval();
  if (l !== undefined) fields.push(`${l.avg.toFixed(1)} ms avg`, `${l.max.toFixed(1)} ms max`);
  fields.push(formatBytes(bytes));
  return fields;
}

/**
 * Prints the summary of a run: one line on stderr (`settings` in parentheses), or with `json`
 * one JSON object on stdout with the rates, `settings` and `results`.
 */
export function report(
  what: string,
  messages: number,
  bytes: number,
  seconds: number,
  json: boolean | undefined,
  settings: Record<string, unknown>,
  results: Record<string, unknown> = {},
): void {
  const r = rate(messages, bytes, seconds);
  if (json) {
    process.stdout.write(`${JSON.stringify({ test: what, messages, bytes, seconds, msgsPerSec: r.msgsPerSec, mbPerSec: r.mbPerSec, ...settings, ...results })}\n`);
    return;
  }
  const details = Object.entries(settings)
    .map(([k, v]) => `${k} ${String(v)}`)
    .join(', ');
  printLine(
    `perf ${what}: ${messages} messages, ${bytes} bytes in ${seconds.toFixed(3)} s: ` +
      `${r.msgsPerSec.toFixed(0)} msg/s, ${r.mbPerSec.toFixed(2)} MB/s (${details})`,
  );
}
