/**
 * `klog produce`: one message per line of stdin or a file (docs/design.md §5, §6), sent with a
 * Producer over `--broker-list`, or with a ZkProducer that finds the brokers in `--zookeeper`.
 *
 * Each line is handed to the producer as it arrives (the lines of each chunk read in one send
 * call, each acknowledged on its own), so `tail -f app.log |
 * klog produce` and lines typed at a terminal go out at once, batched only by `--batch-size` and
 * `--linger-ms`. Each line's acknowledgement is its own: a line the broker rejects (a message over
 * its max.message.bytes) is reported by its number and the others are stored; the exit code is
 * then 1 (`--stop-on-error`: stop reading at the first failure). On SIGINT or SIGTERM it stops
 * reading, waits up to `--drain-timeout-ms` for the lines read to be acknowledged, prints the
 * summary and exits.
 * `--stamp-metadata` stores each line's key, creation time and this host in the message
 * (docs/format.md §2a); `--compression gzip` sends gzip message sets (§2b). `--audit` counts
 * the lines sent per window of creation time and publishes the counts to the audit topic
 * (docs/audit.md).
 */
import { createReadStream } from 'node:fs';
import type { Command } from 'commander';
import { defaultAuditTopic, defaultAuditWindowMs, describeRetries, KlogBrokerError, KlogError, Producer, type ProducerRecord, type SendOptions, ZkProducer } from '@klog/client';
import { parseZkConnect } from '../cluster.js';
import { readLineGroupsUntil } from '../lines.js';
import { createLogger } from '../logger.js';
import { type AcksValue, addBrokerOption, intParser, parseAcks, parseCompression, parseNonEmpty, parseTopic, UsageError } from '../options.js';
import { printLine } from '../output.js';
import { rate } from '../rate.js';
import { checkStoredBy, type Stored, StoredCheck, storedMismatch } from '../stored-check.js';

interface ProduceOptions {
  brokerList?: string;
  zookeeper?: string;
  topic: string;
  file?: string;
  partition?: number;
  keySeparator?: string;
  batchSize: number;
  lingerMs: number;
  acks: AcksValue;
  compression: 'none' | 'gzip';
  stampMetadata?: boolean;
  host?: string;
  audit?: boolean;
  auditWindowMs?: number;
  auditTopic?: string;
  stopOnError?: boolean;
  drainTimeoutMs: number;
}

/** Adds `klog produce` to `program`. */
export function registerProduce(program: Command): void {
  addBrokerOption(
    program.command('produce').description('send one message per line of stdin (or --file) to a topic; prints a summary to stderr'),
    'brokerList',
    'brokers to send to; their order numbers the partitions (--broker is the same option)',
    false,
  )
    .option('--zookeeper <connect>', 'find the brokers and partitions in ZooKeeper (host:port[/chroot]) instead of --broker-list', parseZkConnect)
    .requiredOption('--topic <topic>', 'topic to send to', parseTopic)
    .option('--file <path>', 'read lines from this file instead of stdin')
    .option('--partition <n>', 'with --broker-list: send every message to this partition (default: by key, else a sticky partition per batch)', intParser(0))
    .option(
      '--key-separator <sep>',
      'the text before the first <sep> of a line is its key (used for partitioning, stored with --stamp-metadata), the rest its payload',
      parseNonEmpty,
    )
    .option('--stamp-metadata', 'store the key, the creation time and the producing host in each message (default: plain messages)')
    .option('--host <name>', 'with --stamp-metadata or --audit: the host name to store (default: this machine\'s)', parseNonEmpty)
    .option('--audit', 'count the messages sent per window of creation time and publish the counts to the audit topic (implies --stamp-metadata)')
    .option('--audit-window-ms <ms>', `with --audit: window length in ms (default ${defaultAuditWindowMs}, at least 1000)`, intParser(1000))
    .option('--audit-topic <topic>', `with --audit: the audit topic (default ${defaultAuditTopic})`, parseTopic)
    .option('--compression <none|gzip>', 'send each batch as one gzip-compressed message set', parseCompression, 'none')
    .option('--batch-size <n>', 'messages per request', intParser(1), 200)
    .option('--linger-ms <ms>', 'most ms a message waits for its batch to fill (0: until the end of the event-loop turn)', intParser(0), 5)
    .option(
      '--acks <0|1|2|all>',
      '0: fire-and-forget (nothing reports a rejected message), 1: wait until appended, 2: wait until flushed, all: until flushed on every in-sync replica (a paper topic: as 2)',
      parseAcks,
      1,
    )
    .option('--stop-on-error', 'stop reading at the first line the broker rejects (default: report it by line number, store the others, exit 1)')
    .option('--drain-timeout-ms <ms>', 'on SIGINT/SIGTERM or --stop-on-error: most ms to wait for the lines read to be acknowledged', intParser(0), 10_000)
    .addHelpText(
      'after',
      `
Examples:
  printf 'hello\\nworld\\n' | klog produce --broker-list 127.0.0.1:9092 --topic greetings
  klog produce --broker-list 127.0.0.1:9092,127.0.0.1:9093 --topic logs --file /var/log/dpkg.log --acks 2
  seq 1 1000 | klog produce --zookeeper 127.0.0.1:2181/klog --topic events --acks all
  seq 1 1000 | klog produce --zookeeper 127.0.0.1:2181/klog --topic numbers
  tail -F app.log | klog produce --broker-list 127.0.0.1:9092 --topic app --key-separator ' ' --stamp-metadata`,
    )
    .action(async (opts: ProduceOptions) => produce(opts));
}

/** What produce needs of either producer. */
interface LineProducer {
  send(topic: string, records: readonly ProducerRecord[], options: SendOptions): Promise<unknown[]>;
  flush(): Promise<void>;
  close(): Promise<void>;
  /** Retries of sends to a replicated topic by the code each followed (docs/replication.md §13.2). */
  readonly retriesByCode: ReadonlyMap<number, number>;
}

/** Lines sent and not yet settled, at most: past it, reading waits (the producer bounds their bytes too). */
const maxPendingLines = 10_000;
/** Rejected lines reported one by one; past it, only their count. */
const maxReportedFailures = 100;

/** What happened to the lines read (see {@link produce}). */
interface Tally {
  /** Lines read and handed to the producer. */
  sent: number;
  bytes: number;
  /** Lines the broker acknowledged (acks 1-2), or that went out (acks 0). */
  acknowledged: number;
  failed: number;
  /** Line numbers of the failed lines, in the order their failures came. */
  readonly failedLines: number[];
}

async function produce(opts: ProduceOptions): Promise<void> {
  if ((opts.brokerList === undefined) === (opts.zookeeper === undefined)) {
    throw new UsageError('give exactly one of --broker-list and --zookeeper');
  }
  if (opts.zookeeper !== undefined && opts.partition !== undefined) {
    throw new UsageError('--partition applies to --broker-list; with --zookeeper messages go by key, else to a random live partition');
  }
  if (opts.host !== undefined && !opts.stampMetadata && !opts.audit) throw new UsageError('--host is stored only with --stamp-metadata or --audit');
  if ((opts.auditWindowMs !== undefined || opts.auditTopic !== undefined) && !opts.audit) throw new UsageError('--audit-window-ms and --audit-topic apply with --audit');
  if (opts.audit && opts.topic === (opts.auditTopic ?? defaultAuditTopic)) throw new UsageError(`--topic ${opts.topic} is the audit topic: audited messages go to another topic`);
  if (opts.keySeparator !== undefined && !opts.stampMetadata && !opts.audit) {
    printLine('klog produce: warning: keys (--key-separator) choose the partition but are not stored; add --stamp-metadata to store them');
  }
  const logger = createLogger('klog-produce');
  const settings = {
    batchSize: opts.batchSize,
    lingerMs: opts.lingerMs,
    acks: opts.acks,
    compression: opts.compression,
    stampMetadata: opts.stampMetadata ?? false,
    ...(opts.host !== undefined && { metadataHost: opts.host }),
    ...(opts.audit && { audit: { windowMs: opts.auditWindowMs, topic: opts.auditTopic } }),
    logger,
  };
  const producer: LineProducer =
    opts.zookeeper !== undefined
      ? new ZkProducer({ zookeeper: opts.zookeeper, ...settings })
      : new Producer({ brokerList: opts.brokerList!, ...settings });
  if (opts.partition !== undefined && producer instanceof Producer) {
    // A partition the topic does not have is the command's error, not each line's.
    const count = await producer.partitionCount(opts.topic).catch(async (e: unknown) => {
      await producer.close().catch(() => {});
      throw e;
    });
    if (opts.partition >= count) {
      await producer.close();
      throw new KlogError(`--partition ${opts.partition}: topic ${opts.topic} has ${count === 1 ? 'only partition 0' : `partitions 0-${count - 1}`} over --broker-list`);
    }
  }
  // acks 0 has no answer: what the broker stored is read from the log ends (see ../stored-check.ts).
  const check = opts.acks === 0 ? await checkStoredBy(producer as Producer | ZkProducer, opts.topic) : undefined;
  /** Bytes the lines take in the log as plain messages (no header, no compression). */
  let logBytes = 0;
  const input = opts.file ? createReadStream(opts.file) : process.stdin;
  const separator = opts.keySeparator === undefined ? undefined : Buffer.from(opts.keySeparator);
  const started = process.hrtime.bigint();
  const tally: Tally = { sent: 0, bytes: 0, acknowledged: 0, failed: 0, failedLines: [] };
  const stop = new AbortController();
  let why: string | undefined;
  const onSignal = (signal: NodeJS.Signals): void => {
    why ??= signal;
    stop.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let pending = 0;
  let roomWaiter: (() => void) | undefined;
  let idleWaiter: (() => void) | undefined;
  /** The first failure not tied to a line (the connection, ZooKeeper): it ends the command. */
  let fatal: Error | undefined;
  const settle = (lines: number): void => {
    pending -= lines;
    if (pending < maxPendingLines && roomWaiter) roomWaiter();
    if (pending === 0 && idleWaiter) idleWaiter();
  };
  /**
   * Line `lineNumber` failed with `e`: its own fault (the broker rejected it, or it cannot be
   * stored: a RangeError) or not (then no use reading on).
   */
  const lineFailed = (lineNumber: number, e: unknown): void => {
    tally.failed++;
    tally.failedLines.push(lineNumber);
    if (e instanceof KlogBrokerError || e instanceof RangeError) {
      if (tally.failed <= maxReportedFailures) printLine(`klog produce: line ${lineNumber}: ${oneLine(e)}`);
      if (opts.stopOnError && !stop.signal.aborted) {
        why ??= `line ${lineNumber} failed (--stop-on-error)`;
        stop.abort();
      }
    } else {
      // Not the line's own fault (the connection, the registry, the producer closed): no use reading on.
      fatal ??= e as Error;
      stop.abort();
    }
  };
  /**
   * Sends the lines read together in one call, each acknowledged on its own (settle 'each').
   * A record the producer refuses before sending (a RangeError: a key too long to store) fails
   * the whole call: its lines are then sent one by one, to name the line.
   */
  const sendLines = (records: ProducerRecord[], firstLine: number): void => {
    pending += records.length;
    producer.send(opts.topic, records, { settle: 'each' }).then(
      (results) => {
        results.forEach((r, i) => {
          if (r instanceof Error) lineFailed(firstLine + i, r);
          else tally.acknowledged++;
        });
        settle(records.length);
      },
      (e: unknown) => {
        if (e instanceof RangeError && records.length > 1) records.forEach((r, i) => sendLines([r], firstLine + i));
        else if (e instanceof RangeError) lineFailed(firstLine, new RangeError(e.message.replace(/^record 0: /, '')));
        else for (let i = 0; i < records.length; i++) lineFailed(firstLine + i, e);
        settle(records.length);
      },
    );
  };
  let closed = false;
  try {
    logger.info({ topic: opts.topic, input: opts.file ?? 'stdin' }, 'reading lines');
    let lineNumber = 0;
    for await (const lines of readLineGroupsUntil(input, stop.signal)) {
      const records = lines.map((line) => toRecord(line, separator, opts.partition));
      sendLines(records, lineNumber + 1);
      lineNumber += lines.length;
      tally.sent += lines.length;
      for (const line of lines) tally.bytes += line.length;
      for (const r of records) logBytes += StoredCheck.plainMessageBytes(r.value.length);
      if (pending >= maxPendingLines) await new Promise<void>((resolve) => (roomWaiter = resolve)).finally(() => (roomWaiter = undefined));
      if (stop.signal.aborted) break;
    }
    // Wait for every line (bounded when stopped early), then close: close publishes the last
    // audit counts and, with acks 0, reports a failed request; its failure is the command's.
    const drained = pending === 0 ? Promise.resolve() : new Promise<void>((resolve) => (idleWaiter = resolve));
    const closing = drained.then(() => producer.close());
    if (why === undefined) await closing;
    else {
      printLine(`klog produce: ${why}: stopped reading; waiting up to ${opts.drainTimeoutMs} ms for the lines read to be acknowledged`);
      closing.catch(() => {});
      await Promise.race([closing, new Promise((resolve) => setTimeout(resolve, opts.drainTimeoutMs).unref())]);
    }
    closed = true;
  } catch (e) {
    fatal ??= e as Error;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    if (!closed) await producer.close().catch(() => {});
  }
  // Nothing read (the input or the producer failed first): the error alone says it.
  if (fatal !== undefined && tally.sent === 0) {
    await check?.close();
    throw fatal;
  }
  const plain = !opts.stampMetadata && !opts.audit && opts.compression === 'none' && tally.failed === 0;
  let stored: Stored | undefined;
  try {
    stored = await check?.stored({ sent: tally.acknowledged, ...(plain && { expectedBytes: logBytes }), settleMs: 2500, timeoutMs: 60_000 });
  } finally {
    await check?.close();
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const r = rate(tally.sent, tally.bytes, seconds);
  const unacknowledged = tally.sent - tally.acknowledged - tally.failed;
  printLine(
    `produced ${tally.sent} messages (${tally.bytes} bytes) to topic ${opts.topic} in ${seconds.toFixed(3)} s ` +
      `(${r.msgsPerSec.toFixed(0)} msg/s, ${r.mbPerSec.toFixed(2)} MB/s): ${tally.sent} sent, ` +
      `${opts.acks === 0 ? `${tally.acknowledged} written (acks 0: not acknowledged)` : `${tally.acknowledged} acknowledged`}, ${tally.failed} failed` +
      (unacknowledged > 0 ? `, ${unacknowledged} not acknowledged in time` : '') +
      (describeRetries(producer.retriesByCode) === '' ? '' : `, ${describeRetries(producer.retriesByCode)}`),
  );
  const mismatch = stored === undefined ? undefined : storedMismatch(tally.acknowledged, stored);
  if (stored !== undefined && mismatch === undefined) printLine(`klog produce: acks 0: the broker stored all ${stored.messages} messages (log ends checked)`);
  if (fatal !== undefined) throw fatal;
  if (mismatch !== undefined) throw new KlogError(`--acks 0: ${mismatch}`);
  if (tally.failed > 0) throw new KlogError(`${tally.failed} of ${tally.sent} lines failed: lines ${lineList(tally.failedLines)}`);
  if (unacknowledged > 0) throw new KlogError(`${unacknowledged} of ${tally.sent} lines were not acknowledged within --drain-timeout-ms ${opts.drainTimeoutMs}`);
}

/** Line numbers, sorted, as `3, 7, 9` (the first 20, then how many more). */
function lineList(lines: readonly number[]): string {
  const sorted = [...lines].sort((a, b) => a - b);
  return sorted.length <= 20 ? sorted.join(', ') : `${sorted.slice(0, 20).join(', ')} and ${sorted.length - 20} more`;
}

function oneLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).replace(/\s*\n\s*/g, ' ').trim();
}

function toRecord(line: Buffer, separator: Buffer | undefined, partition: number | undefined): ProducerRecord {
  let key: Buffer | undefined;
  let value = line;
  if (separator) {
    const at = line.indexOf(separator);
    if (at !== -1) {
      key = line.subarray(0, at);
      value = line.subarray(at + separator.length);
    }
  }
  return { value, ...(key ? { key } : {}), ...(partition !== undefined ? { partition } : {}) };
}
