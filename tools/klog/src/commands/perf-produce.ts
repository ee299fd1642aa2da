/**
 * `klog perf produce`: sends `--messages` messages of `--size` random bytes as fast as the
 * producer goes, or at `--throughput` messages per second, then prints the throughput, the
 * latency of acknowledged sends (acks 1 and 2: avg, max, p50, p95, p99, p99.9) and what the
 * broker stored, read from the partitions' log ends before and after (see ../stored-check.ts):
 * a difference from what was sent (a rejected fire-and-forget send, acks 0) is said loudly and
 * the exit code is 1. While it runs: a bar on a terminal, else a plain line every
 * `--reporting-interval-ms`; nothing live with `--json`. SIGINT or SIGTERM stops sending, waits
 * for what is in flight (at most `drainTimeoutMs`) and prints the summary of what was done.
 */
import { randomBytes } from 'node:crypto';
import { describeRetries, KlogError, parseBrokerAddress, Producer, type ProducerRecord } from '@klog/client';
import { createLogger } from '../logger.js';
import type { AcksValue } from '../options.js';
import { printLine } from '../output.js';
import { formatLatency, intervalLine, LatencyRecorder, every } from '../perf-stats.js';
import { createProgress, type Progress, RecentRate } from '../progress.js';
import { StoredCheck, storedMismatch, type Stored } from '../stored-check.js';
import { liveStatus, report } from './perf.js';

/** Settings of `klog perf produce` (see its options in perf.ts). */
export interface PerfProduceOptions {
  brokerList: string;
  topic: string;
  messages: number;
  size: number;
  batchSize: number;
  lingerMs: number;
  partitions?: number;
  /** Where messages go without `partitions` (ProducerOptions.keylessPartitioning). */
  keyless: 'sticky' | 'random';
  acks: AcksValue;
  compression: 'none' | 'gzip';
  throughput?: number;
  reportingIntervalMs: number;
  json?: boolean;
}

/** Records per Producer.send call with acks 0 (the call resolves once they are batched). */
const recordsPerFireAndForgetSend = 1000;
/** Records handed to the producer and not yet settled, at most. */
const maxRecordsInFlight = 8000;
/** On SIGINT or SIGTERM: most ms to wait for the sends in flight. */
const drainTimeoutMs = 5000;
/** The log ends count as settled after this many ms without growth (above the default flush.ms of 1000). */
const storedSettleMs = 2500;

/** Runs `klog perf produce` (see the file comment). */
export async function perfProduce(opts: PerfProduceOptions): Promise<void> {
  const producer = new Producer({
    brokerList: opts.brokerList,
    batchSize: opts.batchSize,
    lingerMs: opts.lingerMs,
    keylessPartitioning: opts.keyless,
    acks: opts.acks,
    compression: opts.compression,
    logger: createLogger('klog-perf'),
  });
  const payload = randomBytes(opts.size);
  let progress: Progress | undefined;
  let check: StoredCheck | undefined;
  let ticker: { stop(): void } | undefined;
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    // Learn the partitions and their log ends before the clock starts.
    const partitions = await producer.partitionBrokers(opts.topic);
    if (opts.partitions !== undefined && opts.partitions > partitions.length) {
      throw new KlogError(`--partitions ${opts.partitions} is more than the ${partitions.length} partitions of topic ${opts.topic}`);
    }
    // A replicated topic's partitions may change leaders during the run: what was stored is
    // what the leaders acknowledged (no log ends of one broker to compare).
    const replicated = await producer.isReplicated(opts.topic);
    if (!replicated) {
      check = await StoredCheck.start(
        opts.topic,
        partitions.map((p) => ({ broker: parseBrokerAddress(p.broker), brokerPartition: p.brokerPartition, name: String(p.partition) })),
      );
    }
    const latency = new LatencyRecorder();
    const acked = opts.acks !== 0;
    /** Records handed to send(). */
    let sent = 0;
    /** Records whose send() resolved: batched (acks 0) or acknowledged (acks 1, 2). */
    let done = 0;
    let failed = 0;
    let firstError: Error | undefined;
    let inFlight = 0;
    let wake: (() => void) | undefined;
    const recent = new RecentRate();
    progress = createProgress({
      total: opts.messages,
      enabled: opts.json !== true,
      status: () => liveStatus(recent, done, opts.messages, done * opts.size, latency),
    });
    const bar = progress;
    let reported = 0;
    if (!bar.drawing && opts.json !== true) {
      ticker = every(opts.reportingIntervalMs, (seconds) => {
        printLine(intervalLine('produce', acked ? 'acknowledged' : 'sent', done - reported, (done - reported) * opts.size, seconds, latency.takeInterval()));
        reported = done;
      });
    }
    const groupSize = acked ? opts.batchSize : recordsPerFireAndForgetSend;
    const started = performance.now();
    const settle = (n: number, at: number, err?: unknown): void => {
      inFlight -= n;
      if (err === undefined) {
        done += n;
        if (acked) latency.record(performance.now() - at, n);
      } else {
        failed += n;
        firstError ??= err as Error;
      }
      bar.update(done + failed);
      wake?.();
    };
    while (sent < opts.messages && !stop.signal.aborted) {
      let n = Math.min(groupSize, opts.messages - sent, maxRecordsInFlight - inFlight);
      if (opts.throughput !== undefined) {
        const due = Math.floor(((performance.now() - started) * opts.throughput) / 1000) + 1;
        if (due <= sent) {
          await sleepUntil(started + ((sent + 1) * 1000) / opts.throughput, stop.signal);
          continue;
        }
        n = Math.min(n, due - sent);
      }
      if (n <= 0) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        continue;
      }
      const records = new Array<ProducerRecord>(n);
      for (let i = 0; i < n; i++) {
        records[i] = opts.partitions === undefined ? { value: payload } : { value: payload, partition: (sent + i) % opts.partitions };
      }
      sent += n;
      inFlight += n;
      const at = performance.now();
      producer.send(opts.topic, records).then(
        () => settle(n, at),
        (err: unknown) => settle(n, at, err),
      );
      // Let acknowledgements and timers in between sends.
      if (inFlight >= maxRecordsInFlight / 2 || opts.throughput !== undefined) await new Promise<void>((resolve) => setImmediate(resolve));
    }
    const interrupted = stop.signal.aborted;
    const flushed = (async () => {
      while (inFlight > 0) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
      }
      await producer.flush();
    })();
    if (interrupted) await Promise.race([flushed.catch(() => {}), new Promise((resolve) => setTimeout(resolve, drainTimeoutMs).unref())]);
    else await flushed.catch((err: unknown) => (firstError ??= err as Error));
    const seconds = (performance.now() - started) / 1000;
    ticker?.stop();
    progress.stop();
    const plain = opts.compression === 'none';
    const messageBytes = StoredCheck.plainMessageBytes(opts.size);
    const stored: Stored | undefined = await check?.stored({
      sent: done,
      ...(plain && { messageBytes, expectedBytes: done * messageBytes }),
      settleMs: storedSettleMs,
      timeoutMs: 60_000,
    });
    const lat = latency.summary();
    report('produce', done, done * opts.size, seconds, opts.json, {
      size: opts.size,
      batchSize: opts.batchSize,
      acks: opts.acks === -1 ? 'all' : opts.acks,
      compression: opts.compression,
      partitions: opts.partitions ?? partitions.length,
      ...(opts.partitions === undefined && { keyless: opts.keyless }),
      ...(opts.throughput !== undefined && { throughput: opts.throughput }),
    }, {
      latencyMs: lat ?? null,
      stored: stored?.messages ?? null,
      storedBytes: stored?.bytes ?? null,
      failed,
      interrupted,
      leaderRetries: producer.leaderRetries,
      // When the first send was made (ms since the epoch), for a caller timing the broker
      // against its own clock (bench/partitions.mjs): it excludes the process start and the
      // reading of the log ends before it.
      startedAtMs: performance.timeOrigin + started,
    });
    if (opts.json !== true) {
      if (lat !== undefined) printLine(`perf produce: latency of acknowledged sends: ${formatLatency(lat)}`);
      else if (!acked) printLine('perf produce: acks 0: sends are not acknowledged, so there is no latency to report (use --acks 1)');
      if (interrupted) printLine(`perf produce: interrupted after ${sent} of ${opts.messages} messages`);
      if (producer.leaderRetries > 0) printLine(`perf produce: ${describeRetries(producer.retriesByCode)}`);
    }
    const mismatch = stored === undefined ? undefined : storedMismatch(done, stored);
    if (stored !== undefined && mismatch === undefined && opts.json !== true) printLine(`perf produce: the broker stored all ${stored.messages} messages (log ends checked)`);
    if (failed > 0) throw new KlogError(`${failed} of ${sent} messages failed: ${firstError?.message ?? 'unknown error'}`);
    if (firstError !== undefined) throw firstError;
    if (mismatch !== undefined) throw new KlogError(mismatch);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    ticker?.stop();
    progress?.stop();
    await check?.close();
    await producer.close().catch(() => {});
  }
}

/** Sleeps until `performance.now()` reaches `at`, or the signal aborts. */
async function sleepUntil(at: number, signal: AbortSignal): Promise<void> {
  const ms = at - performance.now();
  if (ms <= 0 || signal.aborted) return;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done);
  });
}
