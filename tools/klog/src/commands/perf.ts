/**
 * `klog perf produce` and `klog perf consume`: a first form of the throughput tests of the
 * paper (SPEC §7). Each runs, then prints one summary line on stderr, or with --json one JSON
 * object on stdout with messages, bytes (payload bytes), seconds, msgsPerSec and mbPerSec
 * (MB = 2^20 bytes).
 *
 * While running, each draws a live status line on stderr when stderr is a terminal and --json
 * is not given (see ../progress.ts): a bar of the progress, messages and bytes so far, and the
 * rate over the last second in msg/s and MB/s. The bar is cleared before the summary line.
 */
import { randomBytes } from 'node:crypto';
import { Command } from 'commander';
import { type BrokerAddress, Producer, type ProducerRecord, type RecordMetadata, SimpleConsumer } from '@klog/client';
import { createLogger } from '../logger.js';
import { intParser, parseAcks, parseBroker, parseBrokerListOption, parseCompression, parseStartOffset, parseTopic, type StartOffset } from '../options.js';
import { printLine } from '../output.js';
import { createProgress, formatBytes, formatCount, type Progress, RecentRate } from '../progress.js';
import { rate } from '../rate.js';
import { startOffset } from './consume.js';
import { registerPerfLatency } from './perf-latency.js';

interface PerfProduceOptions {
  brokerList: string;
  topic: string;
  messages: number;
  size: number;
  batchSize: number;
  lingerMs: number;
  partitions?: number;
  acks: 0 | 1 | 2;
  compression: 'none' | 'gzip';
  json?: boolean;
}

interface PerfConsumeOptions {
  broker: BrokerAddress;
  topic: string;
  partition: number;
  offset: StartOffset;
  fetchBytes: number;
  maxWaitMs: number;
  messages?: number;
  idleTimeoutMs: number;
  json?: boolean;
}

/** Records per Producer.send call. */
const recordsPerSend = 1000;
/** send() calls awaited at most at once. */
const sendWindow = 8;

/** Adds `klog perf produce` and `klog perf consume` to `program`. */
export function registerPerf(program: Command): void {
  const perf = program.command('perf').description('measure produce and consume throughput against a broker');
  perf
    .command('produce')
    .description('send --messages messages of --size bytes, then print the throughput')
    .requiredOption('--broker-list <host:port,...>', 'brokers to send to', parseBrokerListOption)
    .requiredOption('--topic <topic>', 'topic to send to', parseTopic)
    .option('--messages <n>', 'messages to send', intParser(1), 100_000)
    .option('--size <bytes>', 'payload bytes per message', intParser(0, 2 ** 30, true), 200)
    .option('--batch-size <n>', 'messages per request', intParser(1), 200)
    .option('--linger-ms <ms>', 'most ms a message waits for its batch to fill', intParser(0), 5)
    .option('--partitions <n>', 'spread messages round-robin over partitions 0..n-1 (default: random over all)', intParser(1))
    .option('--acks <0|1|2>', '0: fire-and-forget, 1: appended, 2: flushed', parseAcks, 0)
    .option('--compression <none|gzip>', 'send each batch as one gzip-compressed message set (the payloads are random bytes: no gain in size)', parseCompression, 'none')
    .option('--json', 'print one JSON object on stdout instead of a line on stderr')
    .action(async (opts: PerfProduceOptions) => perfProduce(opts));
  perf
    .command('consume')
    .description('read a partition from --offset until --messages messages (or idle), then print the throughput')
    .requiredOption('--broker <host:port>', 'broker holding the partition', parseBroker)
    .requiredOption('--topic <topic>', 'topic to read', parseTopic)
    .option('--partition <n>', 'partition to read', intParser(0), 0)
    .option('--offset <earliest|latest|N>', 'where to start', parseStartOffset, 'earliest')
    .option('--fetch-bytes <bytes>', 'bytes per fetch', intParser(1, 2 ** 31 - 1, true), 1024 * 1024)
    .option('--max-wait-ms <ms>', 'long-poll wait per fetch at the log end', intParser(0, 2 ** 31 - 1), 200)
    .option('--messages <n>', 'stop after this many messages (default: at the log end)', intParser(1))
    .option('--idle-timeout-ms <ms>', 'stop once no new message came for this long', intParser(1), 2000)
    .option('--json', 'print one JSON object on stdout instead of a line on stderr')
    .action(async (opts: PerfConsumeOptions) => perfConsume(opts));
  registerPerfLatency(perf);
}

async function perfProduce(opts: PerfProduceOptions): Promise<void> {
  const producer = new Producer({
    brokerList: opts.brokerList,
    batchSize: opts.batchSize,
    lingerMs: opts.lingerMs,
    acks: opts.acks,
    compression: opts.compression,
    logger: createLogger('klog-perf'),
  });
  const payload = randomBytes(opts.size);
  let progress: Progress | undefined;
  try {
    // Learn the partitions before the clock starts.
    const partitionCount = await producer.partitionCount(opts.topic);
    if (opts.partitions !== undefined && opts.partitions > partitionCount) {
      throw new Error(`--partitions ${opts.partitions} is more than the ${partitionCount} partitions of topic ${opts.topic}`);
    }
    /** Messages whose send() resolved: written to the socket (acks 0) or acknowledged (acks 1, 2). */
    let done = 0;
    const recent = new RecentRate();
    progress = createProgress({
      total: opts.messages,
      enabled: opts.json !== true,
      status: () => liveStatus(recent, done, opts.messages, done * opts.size),
    });
    const bar = progress;
    const started = process.hrtime.bigint();
    const window: { sent: Promise<RecordMetadata[]>; n: number }[] = [];
    const settle = async (w: { sent: Promise<RecordMetadata[]>; n: number }): Promise<void> => {
      await w.sent;
      done += w.n;
      bar.update(done);
    };
    for (let sent = 0; sent < opts.messages; ) {
      const n = Math.min(recordsPerSend, opts.messages - sent);
      const records: ProducerRecord[] = new Array<ProducerRecord>(n);
      for (let i = 0; i < n; i++) {
        records[i] = opts.partitions === undefined ? { value: payload } : { value: payload, partition: (sent + i) % opts.partitions };
      }
      sent += n;
      const p = producer.send(opts.topic, records);
      p.catch(() => {});
      window.push({ sent: p, n });
      if (window.length >= sendWindow) await settle(window.shift()!);
    }
    for (const w of window.splice(0)) await settle(w);
    await producer.flush();
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    progress.stop();
    report('produce', opts.messages, opts.messages * opts.size, seconds, opts.json, {
      size: opts.size,
      batchSize: opts.batchSize,
      acks: opts.acks,
      compression: opts.compression,
      partitions: opts.partitions ?? partitionCount,
    });
  } finally {
    progress?.stop();
    await producer.close().catch(() => {});
  }
}

async function perfConsume(opts: PerfConsumeOptions): Promise<void> {
  const consumer = new SimpleConsumer(opts.broker);
  const stop = new AbortController();
  let idleTimer: NodeJS.Timeout | undefined;
  const armIdle = (): void => {
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => stop.abort(), opts.idleTimeoutMs);
  };
  let progress: Progress | undefined;
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
    if (messages === opts.messages) lastAt = process.hrtime.bigint();
    progress.stop();
    // Time until the last message, not the idle wait after it.
    const seconds = Number(lastAt - started) / 1e9;
    report('consume', messages, bytes, seconds, opts.json, { fetchBytes: opts.fetchBytes, startOffset: offset });
  } finally {
    progress?.stop();
    clearTimeout(idleTimer);
    await consumer.close();
  }
}

/** The live status after the bar: `1,200/10,000 msg  229.0 KiB  61,020 msg/s  11.6 MB/s` (rates over the last second, MB = 2^20 bytes). */
function liveStatus(recent: RecentRate, messages: number, totalMessages: number | undefined, bytes: number): string {
  const r = recent.sample(messages, bytes);
  const count = totalMessages === undefined ? formatCount(messages) : `${formatCount(messages)}/${formatCount(totalMessages)}`;
  return `${count} msg  ${formatBytes(bytes)}  ${formatCount(r.msgsPerSec)} msg/s  ${r.mbPerSec.toFixed(1)} MB/s`;
}

function report(what: string, messages: number, bytes: number, seconds: number, json: boolean | undefined, extra: Record<string, unknown>): void {
  const r = rate(messages, bytes, seconds);
  if (json) {
    process.stdout.write(`${JSON.stringify({ test: what, messages, bytes, seconds, msgsPerSec: r.msgsPerSec, mbPerSec: r.mbPerSec, ...extra })}\n`);
    return;
  }
  const details = Object.entries(extra)
    .map(([k, v]) => `${k} ${String(v)}`)
    .join(', ');
  printLine(
    `perf ${what}: ${messages} messages, ${bytes} bytes in ${seconds.toFixed(3)} s: ` +
      `${r.msgsPerSec.toFixed(0)} msg/s, ${r.mbPerSec.toFixed(2)} MB/s (${details})`,
  );
}
