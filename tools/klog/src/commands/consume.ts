/**
 * `klog consume`: the simple consumer (docs/design.md §3, §6). Prints message values one per
 * line on stdout (any metadata header split off, gzip message sets decompressed), with
 * `--print-key` the key and a tab first (empty for a message without one), with
 * `--print-metadata` the creation time and host first; or each message as `--format` says
 * (kcat-like, see message-format.ts) or as a JSON line (`--json`). It starts at `--offset`
 * (`-N`: the last N messages, see tail.ts) and follows the partition until it has
 * --max-messages, reached the end (`--exit-at-end`), or nothing new came for --idle-timeout-ms.
 * A topic or partition the broker does not have is an error naming those it has (fetches
 * answer it as an empty log). With `--zookeeper --group` it consumes as a member of a consumer
 * group instead (see consume-group.ts).
 */
import type { Command } from 'commander';
import { type BrokerAddress, defaultFetchBytes, describeRetries, SimpleConsumer } from '@klog/client';
import { parseZkConnect } from '../cluster.js';
import { consumeGroup } from './consume-group.js';
import { createLogger } from '../logger.js';
import { addBrokerOption, intParser, parseGroup, parseStartOffset, parseTopic, type StartOffset, UsageError } from '../options.js';
import { messagePrinter, type MessageFormatter, parseFormat } from '../message-format.js';
import { OutputWriter, printLine } from '../output.js';
import { startOfLast, type TailStart } from '../tail.js';

interface ConsumeOptions {
  broker?: BrokerAddress;
  zookeeper?: string;
  group?: string;
  streams: number;
  fromBeginning?: boolean;
  commitIntervalMs: number;
  topic: string;
  partition: number;
  offset: StartOffset;
  maxMessages?: number;
  fetchBytes: number;
  maxFetchBytes: number;
  maxWaitMs: number;
  printOffsets?: boolean;
  printKey?: boolean;
  printMetadata?: boolean;
  format?: MessageFormatter;
  json?: boolean;
  exitAtEnd?: boolean;
  maxDecompressedBytes?: number;
  idleTimeoutMs?: number;
}

/** Adds `klog consume` to `program`. */
export function registerConsume(program: Command): void {
  addBrokerOption(
    program.command('consume').description('print messages on stdout, one per line: of one partition (--broker), or as a member of a consumer group (--zookeeper --group)',),
    'broker',
    'simple mode: broker holding the partition (--broker-list is the same option)',
    false,
  )
    .option('--zookeeper <connect>', 'group mode: ZooKeeper connect string host:port[,host:port...][/chroot]', parseZkConnect)
    .option('--group <group>', 'group mode: the consumer group to join', parseGroup)
    .requiredOption('--topic <topic>', 'topic to read', parseTopic)
    .option('--partition <n>', 'simple mode: partition to read', intParser(0), 0)
    .option('--offset <earliest|latest|N|-N>', 'simple mode: where to start: the oldest message, the log end, a byte offset, or -N: the last N messages', parseStartOffset, 'earliest')
    .option('-e, --exit-at-end', 'simple mode: exit 0 once the messages up to the log end (as it was at the start) are printed')
    .option('--from-beginning', 'group mode: partitions without a committed offset start at their oldest message (default: at their end)')
    .option('--streams <n>', 'group mode: consumer threads (streams) for the topic', intParser(1, 1024), 1)
    .option('--commit-interval-ms <ms>', 'group mode: commit the offsets of printed messages this often (and on exit)', intParser(1), 1000)
    .option('--max-messages <n>', 'exit 0 after printing this many messages', intParser(1))
    .option('--fetch-bytes <bytes>', 'bytes per fetch (grown for a larger message)', intParser(1, 2 ** 31 - 1, true), 1024 * 1024)
    .option('--max-fetch-bytes <bytes>', 'largest fetch; a larger message is an error', intParser(1, 2 ** 31 - 1, true), 16 * 1024 * 1024)
    .option('--max-wait-ms <ms>', 'long-poll wait per fetch at the log end', intParser(0, 2 ** 31 - 1), 1000)
    .option(
      '--max-decompressed-bytes <bytes>',
      'most bytes one fetch may decompress (guard against gzip bombs; default 4 x --max-fetch-bytes)',
      intParser(1, Number.MAX_SAFE_INTEGER, true),
    )
    .option('--print-offsets', 'prefix each line with the message offset and a tab')
    .option('--print-key', 'prefix each line with the message key and a tab (empty when the message has none)')
    .option('--print-metadata', 'prefix each line with the creation time (ISO 8601 UTC) and the producing host, each followed by a tab (- when the message has none)')
    .option(
      '-f, --format <format>',
      'print each message as <format>, kcat-like: %t topic, %p partition (<brokerId>-<partition> in group mode), %o offset, %k key, %K key bytes, ' +
        '%s payload, %S payload bytes, %T creation time in ms (-1 if none), %h host, %%; \\n \\t \\r escapes; nothing added (end with \\n)',
      parseFormat,
    )
    .option('-J, --json', 'print each message as one JSON object per line: topic, partition, brokerId (group mode), offset, key, payload (base64 with keyEncoding/payloadEncoding when not UTF-8), timestamp, host')
    .option('--idle-timeout-ms <ms>', 'exit 0 once no new message came for this long (default: wait for ever)', intParser(1))
    .addHelpText(
      'after',
      `
Examples:
  klog consume --broker 127.0.0.1:9092 --topic greetings --offset earliest --print-offsets --idle-timeout-ms 2000
  klog consume --broker 127.0.0.1:9092 --topic greetings --partition 1 --offset latest
  klog consume --zookeeper 127.0.0.1:2181/klog --group g1 --topic numbers --from-beginning --max-messages 100`,
    )
    .action(async (opts: ConsumeOptions, command: Command) => {
      const given = (name: string): boolean => command.getOptionValueSource(name) === 'cli';
      const layouts = ['format', 'json'].filter(given);
      if (layouts.length > 1) throw new UsageError('give one of --format and --json');
      const prefixes = ['printOffsets', 'printKey', 'printMetadata'].filter(given);
      if (layouts.length > 0 && prefixes.length > 0) throw new UsageError(`${flag(layouts[0]!)} does not go with ${prefixes.map(flag).join(', ')} (put %o, %k, %T, %h in --format)`);
      if (opts.broker !== undefined) {
        const groupOnly = ['zookeeper', 'group', 'fromBeginning', 'streams', 'commitIntervalMs'].filter(given);
        if (groupOnly.length > 0) throw new UsageError(`--broker (simple mode) does not go with ${groupOnly.map(flag).join(', ')}`);
        return consume({ ...opts, broker: opts.broker });
      }
      if (opts.zookeeper === undefined || opts.group === undefined) {
        throw new UsageError('give --broker (simple mode) or --zookeeper and --group (group mode)');
      }
      const simpleOnly = ['partition', 'offset', 'exitAtEnd'].filter(given);
      if (simpleOnly.length > 0) throw new UsageError(`--zookeeper (group mode) does not go with ${simpleOnly.map(flag).join(', ')}`);
      return consumeGroup({ ...opts, zookeeper: opts.zookeeper, group: opts.group });
    });
}

function flag(option: string): string {
  return `--${option.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
}

async function consume(opts: ConsumeOptions & { broker: BrokerAddress }): Promise<void> {
  const logger = createLogger('klog-consume');
  const consumer = new SimpleConsumer({
    ...opts.broker,
    maxFetchBytes: Math.max(opts.maxFetchBytes, opts.fetchBytes),
    ...(opts.maxDecompressedBytes !== undefined && { maxDecompressedBytes: opts.maxDecompressedBytes }),
    logger,
  });
  const out = new OutputWriter();
  const stop = new AbortController();
  let idleTimer: NodeJS.Timeout | undefined;
  const armIdle = (): void => {
    if (opts.idleTimeoutMs === undefined) return;
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => stop.abort(), opts.idleTimeoutMs);
  };
  const onSignal = (): void => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let printed = 0;
  try {
    const { topic, partition } = opts;
    await consumer.checkPartition(topic, partition);
    const { offset, skip } = await startPosition(consumer, topic, partition, opts.offset, opts.fetchBytes);
    // --exit-at-end: the end as it is now; nothing to print when the start is there already.
    // A start past it is the broker's to judge (OffsetOutOfRange, as without -e), not an empty read.
    const end = opts.exitAtEnd ? await consumer.latestOffset(topic, partition) : undefined;
    logger.info({ broker: consumer.broker, topic, partition, offset, end }, 'consuming');
    if (end !== undefined && offset > end) await consumer.fetch({ topic, partition, offset, maxBytes: opts.fetchBytes });
    if (end !== undefined && offset >= end) return;
    armIdle();
    const print = messagePrinter(opts);
    let toSkip = skip;
    const batches = consumer.messageBatches({
      topic,
      partition,
      offset,
      fetchBytes: opts.fetchBytes,
      maxWaitMs: opts.maxWaitMs,
      signal: stop.signal,
    });
    outer: for await (const batch of batches) {
      armIdle();
      for (const m of batch) {
        if (toSkip > 0 && m.offset === offset) {
          toSkip--;
          continue;
        }
        for (const b of print({ ...m, topic, partition })) await out.write(b);
        if (++printed === opts.maxMessages) break outer;
        if (end !== undefined && m.nextOffset >= end) break outer;
      }
      await out.flush();
    }
    await out.flush();
    logger.info({ messages: printed, leaderRetries: consumer.leaderRetries }, 'done');
  } finally {
    // A replicated partition's leader changes ridden through (each said in a warn line as it happened).
    if (consumer.leaderRetries > 0) printLine(`klog consume: ${describeRetries(consumer.retriesByCode)}`);
    clearTimeout(idleTimer);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await consumer.close();
  }
}

/**
 * Where `--offset` starts: the partition's earliest or latest (flushed end) offset, the byte
 * offset given, or the start of the last N messages (docs/format.md §10 OFFSETS), with how many
 * messages to skip there.
 */
export async function startPosition(consumer: SimpleConsumer, topic: string, partition: number, offset: StartOffset, fetchBytes: number): Promise<TailStart> {
  if (offset === 'earliest') return { offset: await consumer.earliestOffset(topic, partition), skip: 0 };
  if (offset === 'latest') return { offset: await consumer.latestOffset(topic, partition), skip: 0 };
  if (typeof offset === 'number') return { offset, skip: 0 };
  return startOfLast(consumer, topic, partition, offset.last, fetchBytes);
}

/** The byte offset `--offset` names (see {@link startPosition}; for `-N`, the offset of the Nth last message or of its compressed set). */
export async function startOffset(consumer: SimpleConsumer, topic: string, partition: number, offset: StartOffset): Promise<number> {
  return (await startPosition(consumer, topic, partition, offset, defaultFetchBytes)).offset;
}
