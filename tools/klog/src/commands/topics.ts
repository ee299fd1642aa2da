/**
 * `klog topics`: the topics of a cluster from ZooKeeper (docs/design.md §4, §6). Without `--describe`,
 * the topic names one per line; with it, the brokers holding the topic and, for each of its
 * partitions, the broker's address and the log end offset (OFFSETS latest).
 */
import type { Command } from 'commander';
import { KlogError } from '@klog/client';
import { allPartitions, BrokerRegistry } from '@klog/zk-registry';
import { addListOrDescribeCommand, type ListOrDescribeOptions, LogEnds, orDash, table, withZooKeeper, writeNames } from '../cluster.js';
import { createLogger } from '../logger.js';
import { parseTopic } from '../options.js';

/** Adds `klog topics` to `program`. */
export function registerTopics(program: Command): void {
  addListOrDescribeCommand(
    program,
    'topics',
    'list the topics registered in ZooKeeper, or describe one: brokers, partitions, log end offsets',
    { arg: 'topic', help: 'show the brokers and partitions of this topic with their log end offsets', parse: parseTopic },
    ['--zookeeper 127.0.0.1:2181/klog', '--zookeeper 127.0.0.1:2181/klog --describe numbers', '--zookeeper 127.0.0.1:2181/klog --describe numbers --json'],
    topics,
  );
}

async function topics(opts: ListOrDescribeOptions): Promise<void> {
  const logger = createLogger('klog-topics');
  await withZooKeeper(opts.zookeeper, logger, async (zk) => {
    const registry = new BrokerRegistry(zk, { logger });
    if (opts.describe === undefined) {
      writeNames(await registry.listTopics(), opts.json);
      return;
    }
    const topic = opts.describe;
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
        partitions.push({
          brokerId,
          partition,
          address: b ? `${b.host}:${b.port}` : undefined,
          logEnd: await ends.of(topic, brokerId, partition, logger),
        });
      }
      const holders = counts.map(({ brokerId, partitions: n }) => {
        const b = brokers.get(brokerId);
        return { brokerId, address: b ? `${b.host}:${b.port}` : undefined, partitions: n };
      });
      if (opts.json) {
        process.stdout.write(`${JSON.stringify({ topic, brokers: holders, partitions: partitions.map((p) => ({ ...p, address: p.address ?? null, logEnd: p.logEnd ?? null })) })}\n`);
        return;
      }
      const total = partitions.length;
      let out = `topic ${topic}: ${total} partition${total === 1 ? '' : 's'} on ${holders.length} broker${holders.length === 1 ? '' : 's'}\n`;
      out += table([['BROKER', 'ADDRESS', 'PARTITIONS'], ...holders.map((h) => [String(h.brokerId), orDash(h.address), String(h.partitions)])]);
      out += '\n';
      out += table([
        ['PARTITION', 'BROKER', 'ADDRESS', 'LOG-END'],
        ...partitions.map((p) => [`${p.brokerId}-${p.partition}`, String(p.brokerId), orDash(p.address), orDash(p.logEnd)]),
      ]);
      process.stdout.write(out);
    } finally {
      await ends.close();
    }
  });
}
