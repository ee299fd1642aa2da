/**
 * Reads the audit events a cluster's audit topic holds (docs/audit.md): every partition, from
 * its earliest offset to its end when the read began.
 */
import { type AuditEvent, decodeAuditEvent, groupPartition } from '@klog/client';
import { OffsetRegistry } from '@klog/zk-registry';
import type { Cluster } from './cluster.js';
import { partitionLabel, scanPartition } from './cluster.js';

/** The events of one cluster's audit topic. */
export interface AuditLog {
  readonly events: AuditEvent[];
  /** Messages of the audit topic that are not audit events. */
  readonly undecodable: number;
  /** Partitions that could not be read (their broker down), as `brokerId-partition: reason` (`partition: reason` for a replicated audit topic). */
  readonly unreadable: string[];
}

/**
 * Reads every audit event of `cluster`'s `auditTopic` (none when the topic does not exist).
 * A partition that cannot be read is listed in `unreadable`, not thrown: the report then lacks
 * those events and says so. The end read of each partition is recorded as `group`'s offset, so
 * that a partition of the audit topic whose broker is down later (and so is not registered) is
 * known and listed as unreadable too.
 */
export async function readAuditLog(cluster: Cluster, auditTopic: string, group: string): Promise<AuditLog> {
  const events: AuditEvent[] = [];
  let undecodable = 0;
  const unreadable: string[] = [];
  const offsets = new OffsetRegistry(cluster.zk);
  const partitions = await cluster.topicPartitions(auditTopic);
  for (const o of await offsets.list(group, auditTopic)) {
    if (!partitions.some((p) => p.brokerId === o.brokerId && p.partition === o.partition)) unreadable.push(`${o.brokerId}-${o.partition}: read before, not registered now (its broker is down)`);
  }
  for (const p of partitions) {
    try {
      const consumer = await cluster.consumer(p);
      const from = await consumer.earliestOffset(p.topic, p.partition);
      const to = await consumer.latestOffset(p.topic, p.partition);
      await scanPartition(consumer, p, from, to, (messages) => {
        for (const m of messages) {
          if (m.offset >= to) return; // published after the read began: the next read's
          try {
            events.push(decodeAuditEvent(m.payload));
          } catch {
            undecodable++;
          }
        }
      });
      await offsets.commit(group, auditTopic, groupPartition(p), to);
    } catch (err) {
      unreadable.push(`${partitionLabel(p)}: ${(err as Error).message}`);
    }
  }
  return { events, undecodable, unreadable };
}
