/**
 * `klog groups`: consumer groups from ZooKeeper (docs/design.md §4, §6). Without `--describe`,
 * the group names one per line; with it, the group's live consumers and, for every partition of
 * the topics it subscribes to (or has offsets or owners for), kafka-consumer-groups' columns:
 * `GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG(BYTES) LAG(MESSAGES) CONSUMER-ID HOST`.
 * Offsets are byte positions, so the lag (log end − committed offset) is in bytes; the lag in
 * messages is counted from one fetch of at most {@link lagCountBytes} after the committed
 * offset, exact when the lag fits in it, otherwise estimated from the messages in it (`~`).
 */
import type { Command } from 'commander';
import { KlogError } from '@klog/client';
import {
  allPartitions,
  BrokerRegistry,
  type BrokerPartition,
  ConsumerRegistry,
  OffsetRegistry,
  OwnershipRegistry,
  ReplicatedTopicRegistry,
} from '@klog/zk-registry';
import { addListOrDescribeCommand, type ListOrDescribeOptions, LogEnds, orDash, table, withZooKeeper, writeNames } from '../cluster.js';
import { createLogger } from '../logger.js';
import { parseGroup } from '../options.js';
import type { Logger } from 'pino';

/** One row of `--describe` (its JSON shape). */
interface PartitionLag extends BrokerPartition {
  readonly group: string;
  readonly topic: string;
  /**
   * The partition's number in the topic: of a paper topic, the brokers' partitions counted in
   * broker-id order; of a replicated topic (`brokerId` −1, docs/replication.md §14), its partition.
   */
  readonly partitionNumber: number;
  /** A replicated topic's partition: the leader its log end was read from (null: none live). */
  readonly leader?: number | null;
  /** The owning consumer thread, `<consumerId>-<stream>`. */
  readonly owner: string | null;
  readonly consumerId: string | null;
  /** The host in the consumer id (`<group>_<host>-<ms>-<hex>`), when it has that form. */
  readonly host: string | null;
  /** The committed offset (CURRENT-OFFSET). */
  readonly offset: number | null;
  /** The log end offset (LOG-END-OFFSET). */
  readonly logEnd: number | null;
  /** Lag in bytes: logEnd − offset. */
  readonly lag: number | null;
  /** Lag in messages, exact or (lagMessagesEstimated) estimated; null when it could not be read. */
  readonly lagMessages: number | null;
  readonly lagMessagesEstimated: boolean;
}

/** Bytes fetched after a committed offset to count the lag in messages. */
export const lagCountBytes = 1024 * 1024;

/** Adds `klog groups` to `program`. */
export function registerGroups(program: Command): void {
  addListOrDescribeCommand(
    program,
    'groups',
    'list the consumer groups in ZooKeeper, or describe one: committed offsets, log ends, lag in bytes and messages, owners',
    { arg: 'group', help: 'show each partition of the group: committed offset, log end offset, lag (bytes, messages), consumer id, host', parse: parseGroup },
    ['--zookeeper 127.0.0.1:2181/klog', '--zookeeper 127.0.0.1:2181/klog --describe g1', '--zookeeper 127.0.0.1:2181/klog --describe g1 --json'],
    groups,
  );
}

async function groups(opts: ListOrDescribeOptions): Promise<void> {
  const logger = createLogger('klog-groups');
  await withZooKeeper(opts.zookeeper, logger, async (zk) => {
    const consumers = new ConsumerRegistry(zk, { logger });
    const all = await consumers.listGroups();
    if (opts.describe === undefined) {
      writeNames(all, opts.json);
      return;
    }
    const group = opts.describe;
    if (!all.includes(group)) throw new KlogError(`consumer group ${group} does not exist in ZooKeeper`);
    const brokerRegistry = new BrokerRegistry(zk, { logger });
    const offsets = new OffsetRegistry(zk, { logger });
    const owners = new OwnershipRegistry(zk, { logger });
    const members = await consumers.listConsumers(group);
    const topics = new Set<string>();
    for (const m of members) for (const t of Object.keys(m.subscription)) topics.add(t);
    for (const t of await offsets.listTopics(group)) topics.add(t);
    for (const t of await owners.listTopics(group)) topics.add(t);
    const replicated = new ReplicatedTopicRegistry(zk, { logger });

    const brokers = new Map((await brokerRegistry.listBrokers()).map((b) => [b.id, b]));
    const ends = new LogEnds(brokers);
    const rows: PartitionLag[] = [];
    try {
      for (const topic of [...topics].sort()) {
        const definition = await replicated.readDefinition(topic);
        if (definition) {
          // A replicated topic: partitions 0..N-1, owners and offsets as <partition>, log ends from each leader.
          const committedR = new Map((await offsets.listReplicated(group, topic)).map((o) => [o.partition, o.offset]));
          const ownedR = new Map((await owners.listReplicatedOwners(group, topic)).map((o) => [o.partition, o.owner]));
          const states = await replicated.readPartitionStates(topic);
          for (let partition = 0; partition < definition.partitions.length; partition++) {
            const leaderId = states.get(partition)?.state.leader ?? -1;
            const leader = brokers.has(leaderId) ? leaderId : null;
            const offset = committedR.get(partition);
            const logEnd = leader === null ? undefined : await ends.of(topic, leader, partition, logger);
            const progress = await ownerAndLag(ends, group, members, topic, leader, partition, ownedR.get(partition) ?? null, offset, logEnd, logger);
            rows.push({ group, topic, brokerId: -1, partition, partitionNumber: partition, leader, ...progress });
          }
          continue;
        }
        const committed = new Map((await offsets.list(group, topic)).map((o) => [`${o.brokerId}-${o.partition}`, o.offset]));
        const owned = new Map((await owners.listOwners(group, topic)).map((o) => [`${o.brokerId}-${o.partition}`, o.owner]));
        // The live partitions, plus any a dead broker left offsets or owners for.
        const partitions = new Map<string, BrokerPartition>();
        for (const bp of allPartitions(await brokerRegistry.topicPartitions(topic))) partitions.set(`${bp.brokerId}-${bp.partition}`, bp);
        for (const name of [...committed.keys(), ...owned.keys()]) {
          if (!partitions.has(name)) {
            const [brokerId, partition] = name.split('-').map(Number) as [number, number];
            partitions.set(name, { brokerId, partition });
          }
        }
        const sorted = [...partitions.values()].sort((a, b) => a.brokerId - b.brokerId || a.partition - b.partition);
        for (const [partitionNumber, { brokerId, partition }] of sorted.entries()) {
          const name = `${brokerId}-${partition}`;
          const offset = committed.get(name);
          const logEnd = await ends.of(topic, brokerId, partition, logger);
          const progress = await ownerAndLag(ends, group, members, topic, brokerId, partition, owned.get(name) ?? null, offset, logEnd, logger);
          rows.push({ group, topic, brokerId, partition, partitionNumber, ...progress });
        }
      }
    } finally {
      await ends.close();
    }
    if (opts.json) {
      process.stdout.write(`${JSON.stringify({ group, consumers: members, partitions: rows })}\n`);
      return;
    }
    let out = `group ${group}: ${members.length} consumer${members.length === 1 ? '' : 's'}\n`;
    if (members.length > 0) {
      out += table([['CONSUMER', 'SUBSCRIPTION'], ...members.map((m) => [m.consumerId, JSON.stringify(m.subscription)])]);
    }
    out += '\n';
    out += table([
      ['GROUP', 'TOPIC', 'PARTITION', 'CURRENT-OFFSET', 'LOG-END-OFFSET', 'LAG(BYTES)', 'LAG(MESSAGES)', 'CONSUMER-ID', 'HOST'],
      ...rows.map((r) => [
        r.group,
        r.topic,
        String(r.partitionNumber),
        orDash(r.offset ?? undefined),
        orDash(r.logEnd ?? undefined),
        orDash(r.lag ?? undefined),
        r.lagMessages === null ? '-' : `${r.lagMessagesEstimated ? '~' : ''}${r.lagMessages}`,
        r.consumerId ?? '-',
        r.host ?? '-',
      ]),
    ]);
    if (rows.some((r) => r.lagMessagesEstimated)) {
      out += `~ estimated from the messages in the first ${lagCountBytes} bytes after the committed offset (offsets are byte positions)\n`;
    }
    if (rows.some((r) => r.brokerId >= 0)) out += 'PARTITION counts the partitions of the brokers in broker-id order (as the topic is numbered for Kafka clients); --json gives each brokerId and partition\n';
    process.stdout.write(out);
  });
}

/**
 * The lag in messages between `offset` and `logEnd` of one partition: one fetch of at most
 * {@link lagCountBytes} from `offset`; exact when it reaches `logEnd`, otherwise the lag in
 * bytes divided by the mean bytes per message of that fetch (`estimated`).
 * @returns undefined when the broker is not alive or the fetch fails (logged)
 */
async function countLag(
  ends: LogEnds,
  topic: string,
  brokerId: number,
  partition: number,
  offset: number,
  logEnd: number,
  logger: Logger,
): Promise<{ messages: number; estimated: boolean } | undefined> {
  if (logEnd <= offset) return { messages: 0, estimated: false };
  const consumer = ends.consumer(brokerId);
  if (consumer === undefined) return undefined;
  try {
    const r = await consumer.fetchWhole({ topic, partition, offset, maxBytes: Math.min(logEnd - offset, lagCountBytes, consumer.maxFetchBytes) });
    const messages = r.messages.filter((m) => m.offset < logEnd).length;
    if (r.nextOffset >= logEnd || messages === 0) return { messages, estimated: r.nextOffset < logEnd };
    return { messages: Math.round((messages * (logEnd - offset)) / (r.nextOffset - offset)), estimated: true };
  } catch (e) {
    logger.warn({ topic, brokerId, partition, offset, err: (e as Error).message }, 'could not count the lag in messages');
    return undefined;
  }
}

/**
 * A row's owner and lag fields: the owning thread and its consumer and host, the committed offset,
 * the log end read from broker `brokerId` (null: none live), the lag in bytes and, counted
 * through {@link countLag}, in messages.
 */
async function ownerAndLag(
  ends: LogEnds,
  group: string,
  members: readonly { readonly consumerId: string }[],
  topic: string,
  brokerId: number | null,
  partition: number,
  owner: string | null,
  offset: number | undefined,
  logEnd: number | undefined,
  logger: Logger,
): Promise<Pick<PartitionLag, 'owner' | 'consumerId' | 'host' | 'offset' | 'logEnd' | 'lag' | 'lagMessages' | 'lagMessagesEstimated'>> {
  const lag = offset !== undefined && logEnd !== undefined ? logEnd - offset : null;
  const consumerId = consumerOf(members, owner);
  const counted = lag === null || brokerId === null ? undefined : await countLag(ends, topic, brokerId, partition, offset!, logEnd!, logger);
  return {
    owner,
    consumerId,
    host: consumerId === null ? null : hostOf(group, consumerId),
    offset: offset ?? null,
    logEnd: logEnd ?? null,
    lag,
    lagMessages: counted?.messages ?? null,
    lagMessagesEstimated: counted?.estimated ?? false,
  };
}

/** The consumer of an owning thread id `<consumerId>-<stream>` (a member's id when one matches); null for none. */
function consumerOf(members: readonly { readonly consumerId: string }[], owner: string | null): string | null {
  if (owner === null) return null;
  return members.find((m) => owner.startsWith(`${m.consumerId}-`))?.consumerId ?? owner.replace(/-\d+$/, '');
}

/** The host in a consumer id of the default form `<group>_<host>-<epoch ms>-<8 hex>`; null for another form. */
function hostOf(group: string, consumerId: string): string | null {
  const prefix = `${group}_`;
  if (!consumerId.startsWith(prefix)) return null;
  const m = /^(.+)-\d+-[0-9a-f]{8}$/.exec(consumerId.slice(prefix.length));
  return m ? m[1]! : null;
}
