/**
 * `klog produce`: one message per line of stdin or a file (SPEC §5, §6), sent with a Producer
 * over `--broker-list`, or with a ZkProducer that finds the brokers in `--zookeeper`.
 * `--stamp-metadata` stores each line's key, creation time and this host in the message
 * (docs/format.md §2a); `--compression gzip` sends gzip message sets (§2b). `--audit` counts
 * the lines sent per window of creation time and publishes the counts to the audit topic
 * (docs/audit.md).
 */
import { createReadStream } from 'node:fs';
import type { Command } from 'commander';
import { defaultAuditTopic, defaultAuditWindowMs, KlogError, Producer, type ProducerRecord, ZkProducer } from '@klog/client';
import { parseZkConnect } from '../cluster.js';
import { readLineGroups } from '../lines.js';
import { createLogger } from '../logger.js';
import { brokerAliasOption, brokerSpellings, intParser, parseAcks, parseBrokerListOption, parseCompression, parseNonEmpty, parseTopic, UsageError } from '../options.js';
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
  acks: 0 | 1 | 2;
  compression: 'none' | 'gzip';
  stampMetadata?: boolean;
  host?: string;
  audit?: boolean;
  auditWindowMs?: number;
  auditTopic?: string;
}

/** Records handed to one Producer.send call. */
const recordsPerSend = 1000;
/** send() calls awaited at most at once. */
const sendWindow = 8;

/** Adds `klog produce` to `program`. */
export function registerProduce(program: Command): void {
  program
    .command('produce')
    .description('send one message per line of stdin (or --file) to a topic; prints a summary to stderr')
    .option('--broker-list <host:port,...>', 'brokers to send to; their order numbers the partitions (--broker is the same option)', parseBrokerListOption)
    .addOption(brokerAliasOption('brokerList', parseBrokerListOption))
    .option('--zookeeper <connect>', 'find the brokers and partitions in ZooKeeper (host:port[/chroot]) instead of --broker-list', parseZkConnect)
    .requiredOption('--topic <topic>', 'topic to send to', parseTopic)
    .option('--file <path>', 'read lines from this file instead of stdin')
    .option('--partition <n>', 'with --broker-list: send every message to this partition (default: by key, else random)', intParser(0))
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
    .option('--linger-ms <ms>', 'most ms a message waits for its batch to fill', intParser(0), 5)
    .option('--acks <0|1|2>', '0: fire-and-forget (nothing reports a rejected message), 1: wait until appended, 2: wait until flushed', parseAcks, 1)
    .hook('preAction', brokerSpellings('brokerList', false))
    .addHelpText(
      'after',
      `
Examples:
  printf 'hello\\nworld\\n' | klog produce --broker-list 127.0.0.1:9092 --topic greetings
  klog produce --broker-list 127.0.0.1:9092,127.0.0.1:9093 --topic logs --file /var/log/dpkg.log --acks 2
  seq 1 1000 | klog produce --zookeeper 127.0.0.1:2181/klog --topic numbers
  tail -f app.log | klog produce --broker-list 127.0.0.1:9092 --topic app --key-separator ' ' --stamp-metadata`,
    )
    .action(async (opts: ProduceOptions) => produce(opts));
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
  const producer =
    opts.zookeeper !== undefined
      ? new ZkProducer({ zookeeper: opts.zookeeper, ...settings })
      : new Producer({ brokerList: opts.brokerList!, ...settings });
  // acks 0 has no answer: what the broker stored is read from the log ends (see ../stored-check.ts).
  const check = opts.acks === 0 ? await checkStoredBy(producer, opts.topic) : undefined;
  /** Bytes the lines take in the log as plain messages (no header, no compression). */
  let logBytes = 0;
  const input = opts.file ? createReadStream(opts.file) : process.stdin;
  const separator = opts.keySeparator === undefined ? undefined : Buffer.from(opts.keySeparator);
  const started = process.hrtime.bigint();
  let messages = 0;
  let bytes = 0;
  const window: Promise<unknown[]>[] = [];
  let records: ProducerRecord[] = [];
  const dispatch = async (): Promise<void> => {
    const p = producer.send(opts.topic, records);
    p.catch(() => {}); // awaited below; this keeps a failure from being reported as unhandled first
    window.push(p);
    records = [];
    if (window.length >= sendWindow) await window.shift();
  };
  try {
    for await (const lines of readLineGroups(input)) {
      for (const line of lines) {
        records.push(toRecord(line, separator, opts.partition));
        messages++;
        bytes += line.length;
        logBytes += StoredCheck.plainMessageBytes(records[records.length - 1]!.value.length);
        if (records.length >= recordsPerSend) await dispatch();
      }
    }
    if (records.length > 0) await dispatch();
    for (const p of window.splice(0)) await p;
    // Close publishes the last audit counts: its failure is the command's.
    await producer.close();
  } finally {
    await producer.close().catch(() => {});
  }
  const plain = !opts.stampMetadata && !opts.audit && opts.compression === 'none';
  let stored: Stored | undefined;
  try {
    stored = await check?.stored({ sent: messages, ...(plain && { expectedBytes: logBytes }), settleMs: 2500, timeoutMs: 60_000 });
  } finally {
    await check?.close();
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const r = rate(messages, bytes, seconds);
  printLine(
    `produced ${messages} messages (${bytes} bytes) to topic ${opts.topic} in ${seconds.toFixed(3)} s ` +
      `(${r.msgsPerSec.toFixed(0)} msg/s, ${r.mbPerSec.toFixed(2)} MB/s)`,
  );
  const mismatch = stored === undefined ? undefined : storedMismatch(messages, stored);
  if (mismatch !== undefined) throw new KlogError(`--acks 0: ${mismatch}`);
  if (stored !== undefined) printLine(`acks 0: the broker stored all ${stored.messages} messages (log ends checked)`);
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
