/**
 * The shapes both producers and the parts of the producer pool share (docs/design.md §5): a
 * record's fields, where a record goes, what it reports, and the batches waiting for a broker.
 */
import type { MessageHeader } from '@klog/protocol';
import type { Connection, WrittenCallback } from '../connection.js';

/**
 * 0: fire-and-forget (no response); 1: answered once appended; 2: answered once appended and
 * flushed; −1 ("all"): on a replicated partition, answered once flushed on every ISR member (on a
 * paper topic as 2; docs/replication.md §11).
 */
export type Acks = 0 | 1 | 2 | -1;

/**
 * A broker's armed linger timer (see BrokerState.lingerTimer): a timeout for lingerMs > 0, an
 * immediate (the end of the event-loop turn) for lingerMs 0 (docs/design.md §5).
 */
export type LingerTimer = { readonly kind: 'timeout'; readonly handle: NodeJS.Timeout } | { readonly kind: 'immediate'; readonly handle: NodeJS.Immediate };

/** What the `acks` option takes: an {@link Acks} value, or `'all'` for −1. */
export type AcksOption = Acks | 'all';

/**
 * The {@link Acks} value of an `acks` option (`'all'` is −1).
 * @throws RangeError for anything else
 */
export function parseAcksOption(acks: AcksOption | undefined): Acks {
  if (acks === undefined) return 0;
  if (acks === 'all') return -1;
  if (acks === 0 || acks === 1 || acks === 2 || acks === -1) return acks;
  throw new RangeError(`acks ${String(acks)} must be 0, 1, 2, -1 or 'all'`);
}

/** The logger the producers write to: klog's one logger shape. */
export type { Logger } from '@klog/logger';

/**
 * The fields of a record to send, as both producers take them ({@link ProducerRecord} and
 * {@link ZkProducerRecord} add only how a partition is named).
 */
export interface RecordFields {
  /** The message payload; a string is sent as its UTF-8 bytes. */
  readonly value: Buffer | string;
  /**
   * Chooses the partition through the producer's partitioner when none is named; stored in the
   * message header with stampMetadata (docs/format.md §2a), then at most 65535 bytes. A string is its UTF-8.
   */
  readonly key?: Buffer | string;
  /** Creation time in ms since the epoch, stored with stampMetadata. Default: the time of the send call. Only with stampMetadata. */
  readonly timestamp?: number;
  /** The producing host, stored with stampMetadata (e.g. a copied message's origin). Default: the producer's metadataHost. Only with stampMetadata. */
  readonly host?: string;
}

/** Options of one send call. */
export interface SendOptions {
  /**
   * `'all'` (default): resolve once every record is acknowledged, reject at the first failure.
   * `'each'` (acks 1-2): resolve once every record is acknowledged or failed, with each failed
   * record's error (KlogBrokerError, KlogConnectionError) in its place, so one rejected record
   * (e.g. over the broker's max.message.bytes, RecordTooLargeError) fails alone.
   */
  readonly settle?: 'all' | 'each';
}

/** What the pool knows of a record's partition: at least its topic and a partition number for messages. */
export interface PartitionMeta {
  readonly topic: string;
  /** The partition number the producer reports (over the broker list, or on the broker). */
  readonly partition: number;
}

/** A record's result: its partition's meta plus, with acks 1 or 2, its offsets. */
export type SendResult<M extends PartitionMeta> = M & {
  /** Byte offset of the message in its partition; only with acks 1 or 2. */
  readonly offset?: number;
  /** Byte offset of the message after it (`offset + 4 + length`); only with acks 1 or 2. */
  readonly nextOffset?: number;
};

/** A broker of the pool: its connection and the batches waiting for it. */
export interface PooledBroker {
  /** `host:port`. */
  readonly address: string;
  readonly connection: Connection;
}

/** Where one record goes: a partition of a pooled broker, and what to report about it. */
export interface PartitionTarget<M extends PartitionMeta> {
  readonly broker: PooledBroker;
  /** Partition number on the broker (what the request names). */
  readonly brokerPartition: number;
  readonly meta: M;
}

/** One send() call waiting for its acknowledgements (acks 1-2). */
export interface SendCall {
  /** Each record's result; with `each`, a failed record's is its Error. */
  readonly results: unknown[];
  remaining: number;
  settled: boolean;
  /** Settle per record (the call resolves once every record is acknowledged or failed) rather than reject at the first failure. */
  readonly each: boolean;
  readonly resolve: (r: unknown[]) => void;
  readonly reject: (e: Error) => void;
}

/** A record of a SendCall placed in a partition batch. */
export interface Placement {
  readonly call: SendCall;
  /** Set once this placement settled its record (acknowledged, failed, or placed again in another batch). */
  done: boolean;
  readonly index: number;
  /** Bytes before this message in the batch's message set. */
  readonly position: number;
  /** Bytes of this message, length field included. */
  readonly size: number;
}

/**
 * The messages batched for one partition of one broker; also the block of the request that
 * carries them (`partition` and `payloads` are what the request writers read).
 */
export interface PartitionBatch {
  readonly topic: string;
  /** Partition number on the broker (the partition the request names). */
  readonly partition: number;
  /** Reported in results and errors. */
  readonly meta: PartitionMeta;
  /** The target the batch's records were sent to (a batch sent again goes there). */
  readonly target: PartitionTarget<PartitionMeta>;
  readonly payloads: Buffer[];
  /** Headers parallel to `payloads`; undefined while no message of the batch has one. */
  headers: Array<MessageHeader | undefined> | undefined;
  /** Encoded bytes of `payloads` (uncompressed). */
  bytes: number;
  /** One per payload with acks 1-2 (parallel to `payloads`); empty with acks 0. */
  readonly placements: Placement[];
}

/** A pooled broker as the pool keeps it: its batches (see RecordAccumulator) and its requests. */
export interface BrokerState extends PooledBroker {
  /** Batches by `topic\0brokerPartition`. */
  readonly batches: Map<string, PartitionBatch>;
  /** The batches of `batches`, in the order they were opened. */
  batchList: PartitionBatch[];
  /** The target of the last record batched and its batch: most records follow one to the same partition. */
  lastTarget: PartitionTarget<PartitionMeta> | undefined;
  lastBatch: PartitionBatch | undefined;
  /** Messages in `batches`. */
  batchedMessages: number;
  /**
   * Fires when the oldest batched message may have waited lingerMs; armed when a message is
   * batched and none is armed, and left armed when its batches go out full (re-armed for the
   * batches opened since, or let go when there are none), so a batch costs no timer of its own.
   * With lingerMs 0 it is an immediate: it fires at the end of the event-loop turn.
   */
  lingerTimer: LingerTimer | undefined;
  /** `Date.now()` when the first message of the current batches was batched. */
  oldestBatchedAt: number;
  /** Requests to this broker handed to its connection and not yet settled. */
  requestsInFlight: number;
  /** Bytes of each message sent alone (see RequestSender.sendAlone) and not yet written, oldest first. */
  readonly aloneBytes: SizeQueue;
  /** The written callback of every message sent alone: settles the oldest of them. */
  readonly aloneWritten: WrittenCallback;
  /** Resolved when `requestsInFlight` drops to 0. */
  idleWaiters: Array<() => void>;
  /** Set by retire(): no longer routed to; closes once its requests settle. */
  retired: boolean;
  /** With compression: resolves once the last compressed request is written (keeps requests in order). */
  writeChain: Promise<void>;
}

/** A first-in first-out queue of numbers in a ring that doubles when full: no object per entry. */
export class SizeQueue {
  private ring = new Float64Array(64);
  private head = 0;
  private count = 0;

  push(n: number): void {
    if (this.count === this.ring.length) {
      const next = new Float64Array(this.ring.length * 2);
      next.set(this.ring.subarray(this.head));
      next.set(this.ring.subarray(0, this.head), this.ring.length - this.head);
      this.ring = next;
      this.head = 0;
    }
    this.ring[(this.head + this.count) & (this.ring.length - 1)] = n;
    this.count++;
  }

  /** The oldest number, removed; 0 when empty. */
  shift(): number {
    if (this.count === 0) return 0;
    const n = this.ring[this.head]!;
    this.head = (this.head + 1) & (this.ring.length - 1);
    this.count--;
    return n;
  }
}

/** A payload or key as bytes: a string is its UTF-8. */
export function toBuffer(v: Buffer | string): Buffer {
  return typeof v === 'string' ? Buffer.from(v, 'utf8') : v;
}
