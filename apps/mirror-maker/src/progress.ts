/**
 * What the mirror knows of each source partition it reads: the messages taken from the source
 * in offset order and which of them the target acknowledged. The position it may commit is the
 * offset after the longest acknowledged prefix: acknowledgements can arrive out of order
 * (messages of one source partition go to several target partitions), but a source offset
 * stands for every message before it, so it never moves past a message still in flight.
 */

/** Key of a source partition: `<topic>/<brokerId>-<partition>`, `<topic>/<partition>` for a replicated topic (the group consumer's key). */
export { partitionKey } from '@klog/client';

/** One message taken from the source and not yet part of the acknowledged prefix. */
export interface InFlight {
  /** The source offset after it. */
  readonly nextOffset: number;
  acked: boolean;
}

/**
 * Progress of one source partition since the consumer (re)started owning it. Dropped when the
 * partition is released: late acknowledgements then land on a detached object.
 */
export class PartitionProgress {
  /** Messages taken and not yet in the acknowledged prefix, in source order. */
  private queue: InFlight[] = [];
  /** Index of the first entry of `queue` still in use. */
  private head = 0;
  /** Offset after the longest acknowledged prefix: what may be committed. Undefined until a message is acknowledged. */
  ackedOffset: number | undefined;
  /** Offset after the last message taken from the source. */
  takenOffset: number | undefined;
  /** Last offset committed to the source. */
  committedOffset: number | undefined;

  constructor(
    readonly topic: string,
    readonly brokerId: number,
    readonly partition: number,
  ) {}

  /** Records a message taken from the source (in source order); acknowledge the returned entry later. */
  take(nextOffset: number): InFlight {
    const entry: InFlight = { nextOffset, acked: false };
    this.queue.push(entry);
    this.takenOffset = nextOffset;
    return entry;
  }

  /** Marks a message acknowledged and advances the acknowledged prefix. */
  ack(entry: InFlight): void {
    entry.acked = true;
    while (this.head < this.queue.length && this.queue[this.head]!.acked) {
      this.ackedOffset = this.queue[this.head]!.nextOffset;
      this.head++;
    }
    if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
  }

  /** Messages taken and not yet acknowledged (or waiting behind one that is not). */
  get pending(): number {
    return this.queue.length - this.head;
  }

  /** The position to commit when it moved since the last commit. */
  commitPosition(): { topic: string; brokerId: number; partition: number; nextOffset: number } | undefined {
    if (this.ackedOffset === undefined || this.ackedOffset === this.committedOffset) return undefined;
    return { topic: this.topic, brokerId: this.brokerId, partition: this.partition, nextOffset: this.ackedOffset };
  }
}
