/**
 * The record accumulator (docs/design.md §5): the batches waiting for each broker, one per
 * partition, sent once a broker has batchSize messages batched or its oldest batched message
 * waited lingerMs. A batch keeps references to its payloads; nothing is encoded here. With
 * lingerMs 0 a broker's batches go at the end of the event-loop turn (setImmediate) that batched
 * their first message: the records of one turn still go together, and none waits for a timer
 * (Node runs a setTimeout of 0 after at least 1 ms).
 */
import type { MessageHeader } from '@klog/protocol';
import type { BrokerState, PartitionBatch, PartitionMeta, PartitionTarget, SendCall } from './types.js';

/** Batches records per broker and partition, and says when a broker's batches are to go. */
export class RecordAccumulator {
  /**
   * @param batchSize messages per broker that send its batches at once
   * @param lingerMs most ms a message waits in a batch; 0: until the end of the event-loop turn
   * @param ready sends a broker's batches (takes them with {@link take}); called when they are
   *   full, when the linger time is up, and at once for a retired broker
   */
  constructor(
    private readonly batchSize: number,
    private readonly lingerMs: number,
    private readonly ready: (b: BrokerState) => void,
  ) {}

  /**
   * Adds one message of `size` encoded bytes to the batch of its target's partition.
   * @param call the send() call the record belongs to, with acks 1-2; `index` is its place there
   */
  append(
    b: BrokerState,
    target: PartitionTarget<PartitionMeta>,
    payload: Buffer,
    header: MessageHeader | undefined,
    size: number,
    call: SendCall | undefined,
    index: number,
  ): void {
    let batch = b.lastTarget === target ? b.lastBatch : undefined;
    if (batch === undefined) {
      const key = `${target.meta.topic}\0${target.brokerPartition}`;
      batch = b.batches.get(key);
      if (!batch) {
        const { topic } = target.meta;
        batch = { topic, partition: target.brokerPartition, meta: target.meta, target, payloads: [], headers: undefined, bytes: 0, placements: [] };
        b.batches.set(key, batch);
        b.batchList.push(batch);
      }
      b.lastTarget = target;
      b.lastBatch = batch;
    }
    if (call) batch.placements.push({ call, done: false, index, position: batch.bytes, size });
    if (header !== undefined) (batch.headers ??= new Array<MessageHeader | undefined>(batch.payloads.length)).push(header);
    else batch.headers?.push(undefined);
    batch.payloads.push(payload);
    batch.bytes += size;
    if (b.batchedMessages++ === 0) b.oldestBatchedAt = Date.now();
    // A retired broker gets no linger: its batch goes (and fails) at once.
    if (b.retired || b.batchedMessages >= this.batchSize) this.ready(b);
    else if (!b.lingerTimer) this.armLinger(b);
  }

  /** Takes every batch of the broker, in the order they were opened (none: an empty array). */
  take(b: BrokerState): PartitionBatch[] {
    const batches = b.batchList;
    if (batches.length === 0) return batches;
    b.batchList = [];
    b.batches.clear();
    b.lastTarget = undefined;
    b.lastBatch = undefined;
    b.batchedMessages = 0;
    return batches;
  }

  /** Disarms a broker's linger timer (nothing is batched for it, or nothing will be sent). */
  stopLinger(b: BrokerState): void {
    const t = b.lingerTimer;
    if (t === undefined) return;
    if (t.kind === 'immediate') clearImmediate(t.handle);
    else clearTimeout(t.handle);
    b.lingerTimer = undefined;
  }

  /** Arms the broker's linger timer: lingerMs 0 at the end of this event-loop turn, else a timeout of lingerMs. */
  private armLinger(b: BrokerState): void {
    b.lingerTimer =
      this.lingerMs === 0
        ? { kind: 'immediate', handle: setImmediate(() => this.lingerUp(b)) }
        : { kind: 'timeout', handle: setTimeout(() => this.lingerUp(b), this.lingerMs) };
  }

  /** The linger timer fired: send what waited lingerMs, or wait for the rest of it (see BrokerState.lingerTimer). */
  private lingerUp(b: BrokerState): void {
    b.lingerTimer = undefined;
    if (b.batchedMessages === 0) return;
    const waitMs = b.oldestBatchedAt + this.lingerMs - Date.now();
    if (waitMs > 0) b.lingerTimer = { kind: 'timeout', handle: setTimeout(() => this.lingerUp(b), waitMs) };
    else this.ready(b);
  }
}
