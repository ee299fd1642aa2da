/**
 * What the audit consumer of a group keeps in ZooKeeper (docs/audit.md), beside its committed
 * offsets: the window it counts in, fixed at its first count so that every count of the group
 * can be summed into any report window that is a multiple of it, and, per partition, the offset
 * range it is counting, written before its counts are published. A count interrupted after
 * publishing and before committing is then counted again over exactly the same range, into
 * events with the same identity, which the reconciler counts once.
 */
import type { Logger } from '@klog/logger';
import { auditRangePath, auditWindowPath, type GroupPartition, isReplicatedPartition, replicatedAuditRangePath } from './paths.js';
import type { ZkClient } from './zk-client.js';

/** An offset range `[from, to)` of a partition. */
export interface OffsetRange {
  readonly from: number;
  readonly to: number;
}

/** Reads and writes `/consumers/<group>/audit` (see the file comment and paths.ts). */
export class AuditRangeRegistry {
  private readonly logger: Logger;

  constructor(
    private readonly zk: ZkClient,
    options: { logger?: Logger } = {},
  ) {
    this.logger = options.logger ?? zk.logger;
  }

  /** The window `group` counts in, ms; undefined before its first count (or when the stored value is not a positive integer, logged). */
  async countWindowMs(group: string): Promise<number | undefined> {
    const node = await this.zk.getData(auditWindowPath(group));
    if (node === undefined) return undefined;
    const value = node.data.toString('utf8');
    const ms = /^\d+$/.test(value) ? Number(value) : NaN;
    if (Number.isSafeInteger(ms) && ms > 0) return ms;
    this.logger.warn({ path: auditWindowPath(group), value }, 'ignoring an invalid audit count window');
    return undefined;
  }

  /** Stores the window `group` counts in, ms. */
  async setCountWindowMs(group: string, windowMs: number): Promise<void> {
    await this.zk.put(auditWindowPath(group), String(windowMs));
  }

  /**
   * The range last being counted in a partition (a replicated topic's under `…/ranges/<topic>/<partition>`,
   * docs/replication.md §14); undefined when none is stored or it is malformed.
   */
  async range(group: string, topic: string, partition: GroupPartition): Promise<OffsetRange | undefined> {
    const node = await this.zk.getData(rangePath(group, topic, partition));
    if (node === undefined) return undefined;
    try {
      const r = JSON.parse(node.data.toString('utf8')) as { from?: unknown; to?: unknown };
      if (Number.isSafeInteger(r.from) && Number.isSafeInteger(r.to) && (r.from as number) >= 0 && (r.to as number) > (r.from as number)) {
        return { from: r.from as number, to: r.to as number };
      }
    } catch {
      // malformed: ignored below
    }
    this.logger.warn({ group, topic, ...partition }, 'ignoring a malformed audit range');
    return undefined;
  }

  /** Stores the range about to be counted in a partition. */
  async setRange(group: string, topic: string, partition: GroupPartition, range: OffsetRange): Promise<void> {
    await this.zk.put(rangePath(group, topic, partition), JSON.stringify({ from: range.from, to: range.to }));
  }
}

/** The range node of a paper or a replicated partition (docs/replication.md §14). */
function rangePath(group: string, topic: string, p: GroupPartition): string {
  return isReplicatedPartition(p) ? replicatedAuditRangePath(group, topic, p.partition) : auditRangePath(group, topic, p.brokerId, p.partition);
}
