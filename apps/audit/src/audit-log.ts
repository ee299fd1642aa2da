/**
 * Reads the audit events a cluster's audit topic holds (docs/audit.md): every partition, from
 * its earliest offset to its end when the read began.
 */
import { type AuditEvent, decodeAuditEvent } from '@klog/client';
import type { Cluster } from './cluster.js';
import { scanPartition } from './cluster.js';

/** The events of one cluster's audit topic. */
export interface AuditLog {
  readonly events: AuditEvent[];
  /** Messages of the audit topic that are not audit events. */
  readonly undecodable: number;
  /** Partitions that could not be read (their broker down), as `brokerId-partition: reason`. */
  readonly unreadable: string[];
}

/**
 * Reads every audit event of `cluster`'s `auditTopic` (none when the topic does not exist).
 * A partition whose broker is down is listed in `unreadable`, not thrown: the report then
 * lacks those events and says so.
 */
export async function readAuditLog(cluster: Cluster, auditTopic: string): Promise<AuditLog> {
  const events: AuditEvent[] = [];
  let undecodable = 0;
  const unreadable: string[] = [];
  for (const p of await cluster.topicPartitions(auditTopic)) {
    try {
      const consumer = await cluster.consumer(p);
      const from = await consumer.earliestOffset(p.topic, p.partition);
      const to = await consumer.latestOffset(p.topic, p.partition);
      await scanPartition(consumer, p, from, to, (messages) => {
        for (const m of messages) {
          try {
            events.push(decodeAuditEvent(m.payload));
          } catch {
            undecodable++;
          }
        }
      });
    } catch (err) {
      unreadable.push(`${p.brokerId}-${p.partition}: ${(err as Error).message}`);
    }
  }
  return { events, undecodable, unreadable };
}
