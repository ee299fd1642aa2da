/**
 * `klog topics`: the topics of a cluster from ZooKeeper (docs/design.md §4, §6), and the admin of
 * replicated topics (docs/replication.md §15.1).
 *
 * - no action: the topic names, one per line;
 * - `--describe [topic]`: one topic, or every topic. A paper topic shows the brokers holding it
 *   and, per partition, the broker's address and log end (OFFSETS latest); a replicated topic
 *   shows each partition's leader, epoch, replicas, ISR, high watermark and status
 *   (`--under-replicated` and `--unavailable` keep the partitions that are so);
 * - `--create --topic T --partitions N --replication-factor R [--min-insync-replicas M]`,
 *   `--delete --topic T`, `--elect-preferred-leaders [--topic T]`: through {@link Admin}, each
 *   waiting for the controller up to `--timeout-ms`.
 *
 * A refusal (a request the cluster cannot hold, a name taken, a paper topic where a replicated one
 * is needed) is one line, `klog topics: <why>`, and exit code 1.
 */
import type { Command } from 'commander';
import { Admin, KlogError, type ReplicatedTopicDescription, UnknownTopicError } from '@klog/client';
import { allPartitions, BrokerRegistry, ReplicatedTopicRegistry, type ZkClient } from '@klog/zk-registry';
import type { Logger } from 'pino';
import { LogEnds, orDash, table, withZooKeeper, writeNames, zookeeperOption } from '../cluster.js';
import { createLogger } from '../logger.js';
import { intParser, parseTopic, UsageError } from '../options.js';
import {
  type DescribeFilter,
  describedJson,
  formatCreated,
  formatDeleted,
  formatDescribed,
  formatElection,
  formatFilteredAll,
} from '../replicated-topics-format.js';

interface TopicsOptions {
  zookeeper: string;
  describe?: string | true;
  create?: boolean;
  delete?: boolean;
  electPreferredLeaders?: boolean;
  topic?: string;
  partitions?: number;
  replicationFactor?: number;
  minInsyncReplicas?: number;
  timeoutMs: number;
  underReplicated?: boolean;
  unavailable?: boolean;
  json?: boolean;
}

/** Adds `klog topics` to `program`. */
export function registerTopics(program: Command): void {
  program
    .command('topics')
    .description('list, describe, create and delete topics; elect preferred leaders of replicated topics')
    .addOption(zookeeperOption())
    .option('--describe [topic]', 'describe this topic (or every topic): partitions, leaders, ISRs, high watermarks / log ends', parseTopic)
    .option('--create', 'create the replicated topic --topic (with --partitions and --replication-factor)')
    .option('--delete', 'delete the replicated topic --topic (the controller removes its replicas)')
    .option('--elect-preferred-leaders', 'move each partition (of --topic, or of every replicated topic) to its preferred replica')
    .option('--topic <topic>', 'the topic to create, delete, describe or elect leaders of', parseTopic)
    .option('--partitions <n>', 'with --create: the number of partitions', intParser(1, 0x7fffffff))
    .option('--replication-factor <r>', 'with --create: replicas per partition, at most the live brokers', intParser(1, 0x7fff))
    .option('--min-insync-replicas <m>', "with --create: the topic's min.insync.replicas, at most --replication-factor (default: the brokers')", intParser(1, 0x7fff))
    .option('--timeout-ms <ms>', 'with --create, --delete, --elect-preferred-leaders: most ms to wait for the controller', intParser(0), 10_000)
    .option('--under-replicated', 'with --describe: only partitions whose ISR is smaller than their replicas')
    .option('--unavailable', 'with --describe: only partitions without a live leader')
    .option('--json', 'print JSON instead of text')
    .addHelpText(
      'after',
      `
Examples:
  klog topics --zookeeper 127.0.0.1:2181/klog
  klog topics --zookeeper 127.0.0.1:2181/klog --create --topic events --partitions 4 --replication-factor 3 --min-insync-replicas 2
  klog topics --zookeeper 127.0.0.1:2181/klog --describe events
  klog topics --zookeeper 127.0.0.1:2181/klog --describe --under-replicated
  klog topics --zookeeper 127.0.0.1:2181/klog --elect-preferred-leaders
  klog topics --zookeeper 127.0.0.1:2181/klog --delete --topic events`,
    )
    .action(async (opts: TopicsOptions) => topics(opts));
}

function checkUsage(opts: TopicsOptions): void {
  const actions = [opts.describe !== undefined && '--describe', opts.create && '--create', opts.delete && '--delete', opts.electPreferredLeaders && '--elect-preferred-leaders'].filter(Boolean);
  if (actions.length > 1) throw new UsageError(`give one of --describe, --create, --delete and --elect-preferred-leaders, not ${actions.join(' and ')}`);
  if ((opts.create || opts.delete) && opts.topic === undefined) throw new UsageError(`${opts.create ? '--create' : '--delete'} needs --topic`);
  if (opts.create && (opts.partitions === undefined || opts.replicationFactor === undefined)) throw new UsageError('--create needs --partitions and --replication-factor');
  if (!opts.create && (opts.partitions !== undefined || opts.replicationFactor !== undefined || opts.minInsyncReplicas !== undefined)) {
    throw new UsageError('--partitions, --replication-factor and --min-insync-replicas go with --create');
  }
  if (opts.describe === undefined && (opts.underReplicated || opts.unavailable)) throw new UsageError('--under-replicated and --unavailable go with --describe');
  if (opts.underReplicated && opts.unavailable) throw new UsageError('give one of --under-replicated and --unavailable');
  if (typeof opts.describe === 'string' && opts.topic !== undefined && opts.topic !== opts.describe) throw new UsageError('--describe names one topic: give it there or with --topic');
}

async function topics(opts: TopicsOptions): Promise<void> {
  checkUsage(opts);
  const logger = createLogger('klog-topics');
  if (opts.create || opts.delete || opts.electPreferredLeaders) {
    const admin = new Admin({ zookeeper: opts.zookeeper, logger });
    try {
      if (opts.create) {
        const created = await admin.createTopic(opts.topic!, {
          partitions: opts.partitions!,
          replicationFactor: opts.replicationFactor!,
          ...(opts.minInsyncReplicas !== undefined ? { minInsyncReplicas: opts.minInsyncReplicas } : {}),
          timeoutMs: opts.timeoutMs,
        });
        process.stdout.write(opts.json ? `${JSON.stringify(created)}\n` : formatCreated(created));
      } else if (opts.delete) {
        const deleted = await admin.deleteTopic(opts.topic!, { timeoutMs: opts.timeoutMs });
        process.stdout.write(opts.json ? `${JSON.stringify(deleted)}\n` : formatDeleted(deleted));
      } else {
        const election = await admin.electPreferredLeaders(opts.topic, { timeoutMs: opts.timeoutMs });
        process.stdout.write(opts.json ? `${JSON.stringify(election)}\n` : formatElection(election));
      }
    } finally {
      await admin.close();
    }
    return;
  }
  if (opts.describe === undefined) {
    await withZooKeeper(opts.zookeeper, logger, async (zk) => {
      // Both kinds: paper topics, and replicated ones (which the paper's registry leaves out).
      const paper = await new BrokerRegistry(zk, { logger }).listTopics();
      const replicated = await new ReplicatedTopicRegistry(zk, { logger }).listTopics();
      writeNames([...new Set([...paper, ...replicated])].sort(), opts.json);
    });
    return;
  }
  const one = typeof opts.describe === 'string' ? opts.describe : opts.topic;
  const filter: DescribeFilter = opts.underReplicated ? 'under-replicated' : opts.unavailable ? 'unavailable' : 'all';
  const admin = new Admin({ zookeeper: opts.zookeeper, logger });
  try {
    const described = await admin.describeTopics(one === undefined ? undefined : [one]).catch((e: unknown) => {
      throw e instanceof UnknownTopicError ? new KlogError(`topic ${e.topic} is not registered in ZooKeeper`) : e;
    });
    const replicated = described.filter((d): d is ReplicatedTopicDescription => d.kind === 'replicated');
    if (one === undefined && filter !== 'all') {
      // Over every topic, the partitions kept go in one table with a TOPIC column; paper topics have none.
      process.stdout.write(opts.json ? replicated.map((t) => `${describedJson(t, filter)}\n`).join('') : formatFilteredAll(replicated, filter));
      return;
    }
    const parts: string[] = [];
    for (const d of described) {
      if (d.kind === 'replicated') parts.push(opts.json ? `${describedJson(d, filter)}\n` : formatDescribed(d, filter));
      else if (filter === 'all') parts.push(await withZooKeeper(opts.zookeeper, logger, (zk) => describePaperTopic(zk, d.topic, opts.json === true, logger)));
    }
    process.stdout.write(parts.join(opts.json ? '' : '\n'));
  } finally {
    await admin.close();
  }
}

/** A paper topic as `--describe` shows it: the brokers holding it, then each partition's broker, address and log end. */
async function describePaperTopic(zk: ZkClient, topic: string, json: boolean, logger: Logger): Promise<string> {
  const registry = new BrokerRegistry(zk, { logger });
  const counts = await registry.topicPartitions(topic);
  if (counts.length === 0) {
    const known = (await registry.listTopics()).includes(topic);
    throw new KlogError(known ? `topic ${topic}: no live broker holds it` : `topic ${topic} is not registered in ZooKeeper`);
  }
  const brokers = new Map((await registry.listBrokers()).map((b) => [b.id, b]));
  const ends = new LogEnds(brokers);
  try {
    const partitions = [];
    for (const { brokerId, partition } of allPartitions(counts)) {
      const b = brokers.get(brokerId);
      partitions.push({ brokerId, partition, address: b ? `${b.host}:${b.port}` : undefined, logEnd: await ends.of(topic, brokerId, partition, logger) });
    }
    const holders = counts.map(({ brokerId, partitions: n }) => {
      const b = brokers.get(brokerId);
      return { brokerId, address: b ? `${b.host}:${b.port}` : undefined, partitions: n };
    });
    if (json) {
      return `${JSON.stringify({ topic, brokers: holders, partitions: partitions.map((p) => ({ ...p, address: p.address ?? null, logEnd: p.logEnd ?? null })) })}\n`;
    }
    const total = partitions.length;
    let out = `topic ${topic}: ${total} partition${total === 1 ? '' : 's'} on ${holders.length} broker${holders.length === 1 ? '' : 's'}\n`;
    out += table([['BROKER', 'ADDRESS', 'PARTITIONS'], ...holders.map((h) => [String(h.brokerId), orDash(h.address), String(h.partitions)])]);
    out += '\n';
    out += table([
      ['PARTITION', 'BROKER', 'ADDRESS', 'LOG-END'],
      ...partitions.map((p) => [`${p.brokerId}-${p.partition}`, String(p.brokerId), orDash(p.address), orDash(p.logEnd)]),
    ]);
    return out;
  } finally {
    await ends.close();
  }
}
