/**
 * `klog consume --zookeeper --group --topic`: consume as a member of a consumer group
 * (docs/design.md §4, §6). Prints message values one per line on stdout (with `--print-offsets`,
 * `--print-key`, `--print-metadata` their prefixes first; or as `--format` or `--json` say)
 * until --max-messages, --idle-timeout-ms, SIGINT or SIGTERM, and commits, for each
 * partition, the offset after the last message it printed. A topic the registry does not know
 * is an error naming those it knows (and saying so when no broker is registered: a mistyped
 * chroot).
 *
 * The positions committed are those of the messages written to stdout
 * (`GroupConsumer.commitOffsets(printed)`), rather than the consumer's auto-commit of what it
 * handed out: a message handed to a stream after the command decided to stop is never
 * committed, so the group loses nothing when the command stops. Offsets are committed every
 * --commit-interval-ms after stdout has taken what was printed, and on exit.
 */
import { type GroupMessage, GroupConsumer, type MessageStream, UnknownTopicError } from '@klog/client';
import { BrokerRegistry, ReplicatedTopicRegistry } from '@klog/zk-registry';
import type { Logger } from 'pino';
import { withZooKeeper } from '../cluster.js';
import { createLogger } from '../logger.js';
import { messagePrinter, type MessageFormatter } from '../message-format.js';
import { OutputWriter } from '../output.js';

/** Settings of group mode. */
export interface GroupConsumeOptions {
  zookeeper: string;
  group: string;
  topic: string;
  streams: number;
  fromBeginning?: boolean;
  maxMessages?: number;
  idleTimeoutMs?: number;
  fetchBytes: number;
  maxFetchBytes: number;
  maxWaitMs: number;
  commitIntervalMs: number;
  maxDecompressedBytes?: number;
  printKey?: boolean;
  printMetadata?: boolean;
  printOffsets?: boolean;
  format?: MessageFormatter;
  json?: boolean;
}

/**
 * Checks that the registry at `connect` knows `topic`.
 * @throws UnknownTopicError naming the topics it knows, and saying when no broker is registered there at all
 */
export async function checkRegisteredTopic(connect: string, topic: string, logger: Logger): Promise<void> {
  await withZooKeeper(connect, logger, async (zk) => {
    const registry = new BrokerRegistry(zk, { logger });
    // Paper topics and replicated ones (docs/replication.md §3: one namespace, read by two registries).
    const topics = [...(await registry.listTopics()), ...(await new ReplicatedTopicRegistry(zk, { logger }).listTopics())];
    if (topics.includes(topic)) return;
    const brokers = await registry.listBrokerIds();
    const where = brokers.length === 0 ? `in ZooKeeper at ${connect}, where no broker is registered (is the chroot right?)` : `in ZooKeeper at ${connect}`;
    throw new UnknownTopicError(topic, [...topics].sort(), undefined, where);
  });
}


/** Runs group mode (see the file comment). */
export async function consumeGroup(opts: GroupConsumeOptions): Promise<void> {
  const logger = createLogger('klog-consume');
  await checkRegisteredTopic(opts.zookeeper, opts.topic, logger);
  const consumer = new GroupConsumer({
    zookeeper: opts.zookeeper,
    groupId: opts.group,
    autoOffsetReset: opts.fromBeginning ? 'smallest' : 'largest',
    autoCommit: false,
    fetchBytes: Math.min(opts.fetchBytes, opts.maxFetchBytes),
    maxFetchBytes: Math.max(opts.maxFetchBytes, opts.fetchBytes),
    maxWaitMs: opts.maxWaitMs,
    ...(opts.maxDecompressedBytes !== undefined && { maxDecompressedBytes: opts.maxDecompressedBytes }),
    logger,
  });
  const out = new OutputWriter();
  const printMessage = messagePrinter(opts);
  /** The last message printed of each partition, by `<brokerId>-<partition>`. */
  const printed = new Map<string, GroupMessage>();
  let count = 0;
  let stopped = false;
  let wake!: () => void;
  const stopping = new Promise<void>((resolve) => (wake = resolve));
  const stop = (): void => {
    stopped = true;
    wake();
  };
  let idleTimer: NodeJS.Timeout | undefined;
  const armIdle = (): void => {
    if (opts.idleTimeoutMs === undefined) return;
    clearTimeout(idleTimer);
    idleTimer = setTimeout(stop, opts.idleTimeoutMs);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  let commitTimer: NodeJS.Timeout | undefined;
  const commit = async (): Promise<void> => {
    await out.flush();
    const positions = [...printed.entries()];
    await consumer.commitOffsets(positions.map(([, m]) => m));
    // Forget what was committed (a partition that moves away and back must not go back to it),
    // unless a newer message was printed meanwhile.
    for (const [key, m] of positions) if (printed.get(key) === m) printed.delete(key);
  };

  try {
    const streams = (await consumer.createMessageStreams({ [opts.topic]: opts.streams }))[opts.topic]!;
    logger.info({ group: opts.group, topic: opts.topic, consumerId: consumer.consumerId, owned: consumer.ownedPartitions() }, 'consuming');
    armIdle();
    commitTimer = setInterval(() => {
      commit().catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'committing offsets failed; will retry'));
    }, opts.commitIntervalMs);
    // Output goes out in chunks of up to 64 KiB, and whenever the streams pause.
    let flushQueued = false;
    const flushSoon = (): void => {
      if (flushQueued) return;
      flushQueued = true;
      setImmediate(() => {
        flushQueued = false;
        out.flush().catch((err: unknown) => logger.warn({ err: (err as Error).message }, 'writing to stdout failed'));
      });
    };
    const print = async (m: GroupMessage): Promise<void> => {
      // Queued in `out` synchronously, before the first await: a message counted is a message printed.
      const parts = printMessage(m);
      const written = Promise.all(parts.map((b) => out.write(b)));
      printed.set(`${m.brokerId}-${m.partition}`, m);
      armIdle();
      if (++count === opts.maxMessages) stop();
      flushSoon();
      await written;
    };
    const readers = streams.map((s) => read(s, () => stopped, print));
    await Promise.race([stopping, Promise.all(readers)]);
    stopped = true;
  } finally {
    clearTimeout(idleTimer);
    clearInterval(commitTimer);
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    try {
      await commit();
    } finally {
      await consumer.close();
    }
  }
  logger.info({ messages: count }, 'done');
}

/** Prints the messages of one stream until `isStopped`; a message taken after the stop is not printed (nor committed). */
async function read(stream: MessageStream, isStopped: () => boolean, print: (m: GroupMessage) => Promise<void>): Promise<void> {
  for await (const m of stream) {
    if (isStopped()) return;
    await print(m);
  }
}
