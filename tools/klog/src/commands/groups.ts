/**
 * `klog groups`: consumer groups from ZooKeeper (SPEC §4, §6). Without `--describe`, the group
 * names one per line; with it, the group's live consumers and, for every partition of the
 * topics it subscribes to (or has offsets or owners for): the owning consumer thread, the
 * committed offset, the log end offset and the lag (log end − committed offset).
 */
import { type Command, InvalidArgumentError } from 'commander';
import { KlogError } from '@klog/client';
import {
  allPartitions,
  BrokerRegistry,
  type BrokerPartition,
  checkGroup,
  ConsumerRegistry,
  OffsetRegistry,
  OwnershipRegistry,
} from '@klog/zk-registry';
import { LogEnds, orDash, parseZkConnect, table, withZooKeeper } from '../cluster.js';
import { createLogger } from '../logger.js';

interface GroupsOptions {
  zookeeper: string;
  describe?: string;
  json?: boolean;
}

/** One row of `--describe`. */
interface PartitionLag extends BrokerPartition {
  readonly topic: string;
  readonly owner: string | null;
  readonly offset: number | null;
  readonly logEnd: number | null;
  readonly lag: number | null;
}

/** Adds `klog groups` to `program`. */
export function registerGroups(program: Command): void {
  program
    .command('groups')
    .description('list the consumer groups in ZooKeeper, or describe one: owners, committed offsets, log ends, lag')
    .requiredOption('--zookeeper <connect>', 'ZooKeeper connect string host:port[,host:port...][/chroot]', parseZkConnect)
    .option('--describe <group>', 'show each partition of the group: owner thread, committed offset, log end, lag', parseGroup)
    .option('--json', 'print JSON instead of text')
    .addHelpText(
      'after',
      `
Examples:
  klog groups --zookeeper 127.0.0.1:2181/klog
  klog groups --zookeeper 127.0.0.1:2181/klog --describe g1
  klog groups --zookeeper 127.0.0.1:2181/klog --describe g1 --json`,
    )
    .action(async (opts: GroupsOptions) => groups(opts));
}

function parseGroup(value: string): string {
  try {
    return checkGroup(value);
  } catch (e) {
    throw new InvalidArgumentError(`${(e as Error).message}.`);
  }
}

async function groups(opts: GroupsOptions): Promise<void> {
  const logger = createLogger('klog-groups');
  await withZooKeeper(opts.zookeeper, logger, async (zk) => {
    const consumers = new ConsumerRegistry(zk, { logger });
    const all = await consumers.listGroups();
    if (opts.describe === undefined) {
      process.stdout.write(opts.json ? `${JSON.stringify(all)}\n` : all.map((g) => `${g}\n`).join(''));
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

    const brokers = new Map((await brokerRegistry.listBrokers()).map((b) => [b.id, b]));
    const ends = new LogEnds(brokers);
    const rows: PartitionLag[] = [];
    try {
      for (const topic of [...topics].sort()) {
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
        for (const { brokerId, partition } of sorted) {
          const name = `${brokerId}-${partition}`;
          const offset = committed.get(name);
          const logEnd = await ends.of(topic, brokerId, partition, logger);
          rows.push({
            topic,
            brokerId,
            partition,
            owner: owned.get(name) ?? null,
            offset: offset ?? null,
            logEnd: logEnd ?? null,
            lag: offset !== undefined && logEnd !== undefined ? logEnd - offset : null,
          });
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
      ['TOPIC', 'PARTITION', 'OWNER', 'OFFSET', 'LOG-END', 'LAG'],
      ...rows.map((r) => [r.topic, `${r.brokerId}-${r.partition}`, r.owner ?? '-', orDash(r.offset ?? undefined), orDash(r.logEnd ?? undefined), orDash(r.lag ?? undefined)]),
    ]);
    process.stdout.write(out);
  });
}
