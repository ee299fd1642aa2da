/**
 * The sender (docs/design.md §5, docs/format.md §6-§7, §11): frames batches into requests, one
 * path per kind of request, and reports each request's end to the pool.
 *
 * - a message alone (batchSize 1, acks 0, no compression): one MULTIPRODUCE of one message,
 *   written in place in the connection's slab, settled by the write through one shared callback
 *   (see {@link RequestSender.sendAlone});
 * - plain batches: one MULTIPRODUCE (acks 0) or PRODUCE_ACK (acks 1-2) per at most 32767
 *   partitions, the payloads copied straight from the batches into the frame, each CRC computed
 *   there (no message set is built first);
 * - compressed batches: each partition's set gzipped in zlib's thread pool, the requests written
 *   in the order their batches were sent.
 */
import {
  decodeProduceAckResponse,
  encodeMessageSet,
  encodeMessageSetWithHeaders,
  gzipMessageSet,
  maxPartitionsPerRequest,
  type MessageHeader,
  multiProduceRequestBytes,
  type PartitionMessages,
  produceAckRequestBytes,
  singleSetMultiProduceRequestBytes,
  TopicNameCache,
  writeMultiProduceMessageRequest,
  writeMultiProduceRequest,
  writeProduceAckRequest,
} from '@klog/protocol';
import type { Connection } from '../connection.js';
import { type Resend, settleAcks } from './acknowledgements.js';
import type { Acks, BrokerState, PartitionBatch } from './types.js';

/** What the sender reports to the pool about each request. */
export interface RequestOutcome {
  /** A request to `b` was handed to its connection (it settles later, exactly once). */
  started(b: BrokerState): void;
  /** The request failed; `batches` are its records (none for a message sent alone). */
  failed(b: BrokerState, batches: readonly PartitionBatch[], e: Error): void;
  /** A request of `bytes` batched bytes is done: written (acks 0), answered (acks 1-2) or failed. */
  settled(b: BrokerState, bytes: number): void;
  /** Sends again records of a batch rejected for another record's size. */
  readonly resend: Resend;
}

/** The batches of a request that has none (a message sent alone): with acks 0, failed() reads no batch. */
const noBatches: readonly PartitionBatch[] = [];

/** Frames and writes requests (see the file comment). */
export class RequestSender {
  /** The topic name last found valid by the writer of requests of one message. */
  private readonly topicNames = new TopicNameCache();

  /**
   * @param codec the wrapper's compression codec, 0 for none
   */
  constructor(
    private readonly acks: Acks,
    private readonly codec: number,
    private readonly outcome: RequestOutcome,
  ) {}

  /** Sends the broker's batches, one request per at most 32767 partitions. */
  sendBatches(b: BrokerState, batches: PartitionBatch[]): void {
    if (batches.length <= maxPartitionsPerRequest) this.sendRequest(b, batches);
    else for (let i = 0; i < batches.length; i += maxPartitionsPerRequest) this.sendRequest(b, batches.slice(i, i + maxPartitionsPerRequest));
  }

  /**
   * Sends one message of `size` encoded bytes as a request of its own, straight into the
   * connection's outgoing slab: what {@link sendBatches} does for a batch of one message,
   * without the batch, its arrays and the request's blocks, which at one request per message
   * cost more than the request. Only when nothing is batched for the broker (so requests keep
   * the order of their records), with acks 0.
   */
  sendAlone(b: BrokerState, topic: string, partition: number, payload: Buffer, header: MessageHeader | undefined, size: number): void {
    this.outcome.started(b);
    const c = b.connection;
    let at: number;
    let bytes: number;
    try {
      bytes = singleSetMultiProduceRequestBytes(topic, size, this.topicNames);
      // Written in place in the connection's slab: a Buffer per frame would cost more than most frames' bytes.
      at = c.reserveFrame(bytes);
      writeMultiProduceMessageRequest(c.frameSlab, at, topic, partition, payload, header, size);
    } catch (err) {
      // As in sendPlain: the record was checked before; a failure here is a bug, reported as the request's.
      this.outcome.failed(b, noBatches, err as Error);
      queueMicrotask(() => this.outcome.settled(b, size));
      return;
    }
    // One callback for every message sent alone, not a closure each: the connection calls
    // back its frames in the order they were queued, so the oldest size is this frame's.
    b.aloneBytes.push(size);
    c.send(at, bytes, b.aloneWritten);
  }

  /**
   * A message sent alone is written, or failed. When the connection fails, the frames it had
   * not yet handed to the socket are called back before those it had, so their sizes may be
   * settled against one another: the same total, once every frame is called back.
   */
  aloneWritten(b: BrokerState, err: Error | undefined): void {
    if (err) this.outcome.failed(b, noBatches, err);
    this.outcome.settled(b, b.aloneBytes.shift());
  }

  private sendRequest(b: BrokerState, batches: PartitionBatch[]): void {
    let bytes = 0;
    for (const batch of batches) bytes += batch.bytes;
    this.outcome.started(b);
    if (this.codec === 0) this.sendPlain(b, batches, bytes);
    else this.sendCompressed(b, batches, bytes);
  }

  /**
   * Writes an uncompressed request straight into the connection's outgoing slab: the payloads
   * go from the batches (which are the request's blocks) into the frame. Settles the request's
   * `bytes` once it is written (acks 0) or answered (acks 1-2), failed or not.
   */
  private sendPlain(b: BrokerState, batches: PartitionBatch[], bytes: number): void {
    const c = b.connection;
    let at: number;
    let frameBytes: number;
    try {
      const setBytes: number[] = [];
      if (this.acks === 0) {
        frameBytes = multiProduceRequestBytes(batches, setBytes);
        at = c.reserveFrame(frameBytes);
        writeMultiProduceRequest(c.frameSlab, at, batches, setBytes);
      } else {
        frameBytes = produceAckRequestBytes(batches, setBytes);
        at = c.reserveFrame(frameBytes);
        writeProduceAckRequest(c.frameSlab, at, this.acks, batches, setBytes);
      }
    } catch (err) {
      // Records were checked before they were batched; this is a bug, reported where the records are.
      this.outcome.failed(b, batches, err as Error);
      queueMicrotask(() => this.outcome.settled(b, bytes));
      return;
    }
    if (this.acks === 0) {
      c.send(at, frameBytes, (err) => {
        if (err) this.outcome.failed(b, batches, err);
        this.outcome.settled(b, bytes);
      });
      return;
    }
    this.acknowledged(b, batches, c.request(c.frameSlab.subarray(at, at + frameBytes)), false).then(
      () => this.outcome.settled(b, bytes),
      (e: Error) => {
        this.outcome.failed(b, batches, e);
        this.outcome.settled(b, bytes);
      },
    );
  }

  /** Gzips each batch's set (in parallel) and writes the request once the one before it is written. */
  private sendCompressed(b: BrokerState, batches: PartitionBatch[], bytes: number): void {
    const settled = (): void => this.outcome.settled(b, bytes);
    const sets: PartitionMessages[] = batches.map((batch) => ({
      topic: batch.topic,
      partition: batch.partition,
      messages:
        batch.headers === undefined
          ? encodeMessageSet(batch.payloads)
          : encodeMessageSetWithHeaders(batch.payloads.map((value, i) => ({ value, header: batch.headers![i] }))),
    }));
    const ready = Promise.all(sets.map(async (s) => ({ ...s, messages: await gzipMessageSet(s.messages) })));
    const issued = b.writeChain.then(() => ready).then((r) => ({ done: this.writeCompressed(b, batches, r) }));
    b.writeChain = issued.then(
      () => undefined,
      () => undefined,
    );
    issued.then((r) => r.done).then(settled, (e: Error) => {
      this.outcome.failed(b, batches, e);
      settled();
    });
  }

  /** Writes a request of compressed sets; resolves once written (acks 0) or answered and settled (acks 1-2). */
  private writeCompressed(b: BrokerState, batches: PartitionBatch[], ready: PartitionMessages[]): Promise<void> {
    const c = b.connection;
    const setBytes: number[] = [];
    if (this.acks === 0) {
      const frameBytes = multiProduceRequestBytes(ready, setBytes);
      const at = c.reserveFrame(frameBytes);
      writeMultiProduceRequest(c.frameSlab, at, ready, setBytes);
      return new Promise<void>((resolve, reject) => c.send(at, frameBytes, (err) => (err ? reject(err) : resolve())));
    }
    const frameBytes = produceAckRequestBytes(ready, setBytes);
    const at = c.reserveFrame(frameBytes);
    writeProduceAckRequest(c.frameSlab, at, this.acks, ready, setBytes);
    return this.acknowledged(b, batches, c.request(c.frameSlab.subarray(at, at + frameBytes)), true);
  }

  /** Settles the send() calls of an acknowledged request's records from its response. */
  private async acknowledged(b: BrokerState, batches: PartitionBatch[], response: ReturnType<Connection['request']>, compressed: boolean): Promise<void> {
    const res = await response;
    settleAcks(b.address, batches, compressed, res.errorCode, () => decodeProduceAckResponse(res.body), this.outcome.resend);
  }
}
