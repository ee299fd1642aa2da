/**
 * The high-watermark checkpoints of a broker's replicas (docs/replication.md §8.1, §9.5): each
 * replica's high watermark written to `high-watermark-checkpoint` in its directory
 * (packages/storage's `writeHighWatermark`, fdatasynced) every
 * `replica.high.watermark.checkpoint.interval.ms` when it moved, and on a clean shutdown; read
 * back when the replica is opened, so that a broker that restarts, and is then made leader,
 * starts its high watermark there rather than at 0 (never beyond its log end).
 */
import { readHighWatermark, writeHighWatermark } from '@klog/storage';
import type { Logger } from 'pino';
import type { Partition } from './partition.js';

/** Writes and reads the checkpoints of one broker's partitions. */
export class HighWatermarkCheckpoints {
  /** The value last written (or read) per partition, so an unchanged one is not written again. */
  readonly #written = new WeakMap<Partition, number>();
  #running: Promise<void> | undefined;

  constructor(private readonly logger: Logger) {}

  /**
   * Starts `p`'s high watermark from its replica's checkpoint (capped at the log end), when it
   * has one. A checkpoint that does not parse is logged and ignored: the high watermark then
   * starts at 0, which is always safe (it only delays consumers).
   */
  async load(p: Partition): Promise<void> {
    const log = p.log;
    if (log === undefined) return;
    try {
      const hw = await readHighWatermark(log.dir, log.logEndOffset);
      if (hw === undefined) return;
      p.setFollowerHighWatermark(hw);
      this.#written.set(p, p.highWatermark);
    } catch (err) {
      this.logger.warn({ topic: p.topic, partition: p.partition, err }, 'high-watermark checkpoint unreadable; starting the high watermark at 0');
    }
  }

  /**
   * Writes the checkpoint of every partition of `partitions` with a log whose high watermark
   * moved since it was last written; a round already running is waited for instead. A failed
   * write is logged and tried again on the next round.
   */
  writeAll(partitions: Iterable<Partition>): Promise<void> {
    this.#running ??= this.#round([...partitions]).finally(() => (this.#running = undefined));
    return this.#running;
  }

  async #round(partitions: readonly Partition[]): Promise<void> {
    for (const p of partitions) {
      const log = p.log;
      if (log === undefined) continue;
      const hw = p.highWatermark;
      if (this.#written.get(p) === hw) continue;
      try {
        await writeHighWatermark(log.dir, hw);
        this.#written.set(p, hw);
      } catch (err) {
        this.logger.warn({ topic: p.topic, partition: p.partition, highWatermark: hw, err }, 'high-watermark checkpoint not written; retried');
      }
    }
  }
}
