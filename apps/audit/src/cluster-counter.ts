/**
 * The audit consumer (docs/audit.md, tier `consumer`): counts what a cluster holds. It reads
 * every audited topic of the cluster (all but the audit topic) from the offsets its consumer
 * group committed up to each partition's end, counts the messages per topic and window of
 * their creation time, publishes the counts to the cluster's audit topic, and only then
 * commits the offsets it read to: a committed offset never passes a message whose count was
 * not published, so a crash can only make it count messages again (over), never skip them.
 *
 * It claims each partition in the group's ownership registry (SPEC §4) while it reads it, so
 * two auditors running at once never count one partition twice; a partition another member
 * owns is skipped and reported. A partition read for the first time starts at its earliest
 * offset; a committed offset retention has deleted meanwhile resumes at the earliest one kept,
 * and the messages in between are reported as never counted (they show as short).
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { AuditCounter, OffsetOutOfRangeError, ZkProducer } from '@klog/client';
import { OffsetRegistry, OwnershipRegistry, type ZkLogger } from '@klog/zk-registry';
import { type Cluster, scanPartition, type TopicPartition } from './cluster.js';

/** Settings of a count. */
export interface CountOptions {
  /** The consumer group the audit consumer commits as. */
  readonly group: string;
  /** Window length of the counts, ms. */
  readonly windowMs: number;
  readonly auditTopic: string;
  readonly logger: ZkLogger & { info(obj: object, msg?: string): void };
}

/** What one count did. */
export interface CountResult {
  /** Partitions read. */
  readonly partitions: number;
  /** Messages counted. */
  readonly counted: number;
  /** Messages without a creation time (plain messages): read, not counted. */
  readonly untimed: number;
  /** Partitions not read, with why. */
  readonly skipped: Array<TopicPartition & { readonly reason: string }>;
  /** Byte ranges retention deleted before they were counted. */
  readonly lost: Array<TopicPartition & { readonly from: number; readonly to: number }>;
}

/**
 * Counts what `cluster` holds since the group's last count (see the file comment).
 * @throws what publishing the counts throws (nothing is committed then), ZkError when
 *   ZooKeeper fails
 */
export async function countCluster(cluster: Cluster, options: CountOptions): Promise<CountResult> {
  const { group, logger } = options;
  const owners = new OwnershipRegistry(cluster.zk);
  const offsets = new OffsetRegistry(cluster.zk);
  const consumerId = `${group}_${hostname()}-${Date.now()}-${randomBytes(4).toString('hex')}`;
  const producer = new ZkProducer({ zookeeper: cluster.spec.connect, acks: 2, logger });
  const counter = new AuditCounter({ tier: 'consumer', group, windowMs: options.windowMs, topic: options.auditTopic, send: (topic, records) => producer.send(topic, records) });
  const claimed: TopicPartition[] = [];
  const positions: Array<{ p: TopicPartition; offset: number }> = [];
  const skipped: Array<TopicPartition & { reason: string }> = [];
  const lost: Array<TopicPartition & { from: number; to: number }> = [];
  let untimed = 0;
  let read = 0;
  try {
    for (const p of await cluster.partitions(options.auditTopic)) {
      if (!(await owners.claim(group, p.topic, p, consumerId))) {
        skipped.push({ ...p, reason: 'owned by another member of the group' });
        continue;
      }
      claimed.push(p);
      try {
        const consumer = await cluster.consumer(p);
        const earliest = await consumer.earliestOffset(p.topic, p.partition);
        const end = await consumer.latestOffset(p.topic, p.partition);
        const committed = await offsets.read(group, p.topic, p);
        let from = committed ?? earliest;
        if (from < earliest || from > end) {
          if (from < earliest) lost.push({ ...p, from, to: earliest });
          logger.warn({ cluster: cluster.name, ...p, committed, earliest, end }, 'committed offset out of range; counting from the earliest offset');
          from = earliest;
        }
        const position = await scanPartition(consumer, p, from, end, (messages) => {
          for (const m of messages) {
            if (m.timestamp === undefined) untimed++;
            else counter.count(p.topic, m.timestamp);
          }
        });
        read++;
        if (position !== committed) positions.push({ p, offset: position });
      } catch (err) {
        // A partition that cannot be read now is read from the same offset next time.
        skipped.push({ ...p, reason: err instanceof OffsetOutOfRangeError ? `retention deleted data while it was read: ${err.message}` : (err as Error).message });
      }
    }
    // Counts first: see the file comment.
    await counter.close();
    for (const { p, offset } of positions) await offsets.commit(group, p.topic, p, offset);
  } finally {
    for (const p of claimed) await owners.release(group, p.topic, p).catch(() => {});
    await producer.close().catch((err: unknown) => logger.warn({ err }, 'closing the audit producer failed'));
  }
  if (untimed > 0) logger.warn({ cluster: cluster.name, untimed }, 'messages without a creation time were read and not counted (plain messages; producers stamp them with --audit or --stamp-metadata)');
  logger.info({ cluster: cluster.name, partitions: read, counted: counter.counted, untimed, skipped: skipped.length }, 'cluster counted');
  return { partitions: read, counted: counter.counted, untimed, skipped, lost };
}
