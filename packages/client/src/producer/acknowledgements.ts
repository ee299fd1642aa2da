/**
 * Acknowledgement settling (docs/design.md §5, docs/format.md §11): the send() calls of an
 * acknowledged request's records resolve with their offsets from the PRODUCE_ACK response, or
 * reject with the error of their partition's set.
 *
 * A set the broker rejected for one message over its `max.message.bytes` fails only the
 * records that are too large (each with a {@link RecordTooLargeError} that says its size and the
 * limit, which the broker sends in the result); the others are sent again, behind what is
 * batched for the partition by then. So one oversize record costs its own send, not its
 * neighbours'. A gzip set is one message on the wire: when it is too large, all its records fail.
 */
import { decodeProduceAckResponse, ErrorCode, messageOverheadBytes } from '@klog/protocol';
import { KlogBrokerError, RecordTooLargeError } from '../errors.js';
import type { PartitionBatch, Placement, SendCall } from './types.js';

/** Sends the given records of a rejected batch again (see the file comment). */
export type Resend = (batch: PartitionBatch, indexes: readonly number[]) => void;

/**
 * A send() call of `count` records: resolving once every record is acknowledged, rejecting at
 * the first failure; with `each`, resolving once every record is acknowledged or failed, a
 * failed record's result being its error.
 */
export function newSendCall(count: number, each: boolean): { call: SendCall; done: Promise<unknown[]> } {
  let call!: SendCall;
  const done = new Promise<unknown[]>((resolve, reject) => {
    call = { results: new Array<unknown>(count), remaining: count, settled: false, each, resolve, reject };
  });
  return { call, done };
}

/** The record of `p` failed with `e` (once; see {@link newSendCall}). */
export function failPlacement(p: Placement, e: Error): void {
  if (p.done) return;
  p.done = true;
  const call = p.call;
  if (call.settled) return;
  if (!call.each) {
    call.settled = true;
    call.reject(e);
    return;
  }
  call.results[p.index] = e;
  if (--call.remaining === 0) {
    call.settled = true;
    call.resolve(call.results);
  }
}

/** The record of `p` is acknowledged with `result` (once). */
function acknowledge(p: Placement, result: unknown): void {
  if (p.done) return;
  p.done = true;
  const call = p.call;
  if (call.settled) return;
  call.results[p.index] = result;
  if (--call.remaining === 0) {
    call.settled = true;
    call.resolve(call.results);
  }
}

/** Fails every record of `batches` with `e`. */
export function failBatches(batches: readonly PartitionBatch[], e: Error): void {
  for (const b of batches) for (const p of b.placements) failPlacement(p, e);
}

/**
 * Resolves (or rejects) the send() calls of an acknowledged request's records.
 * @param compressed each batch went as one gzip wrapper: its records share the wrapper's offset
 * @param errorCode the response's top-level code; `decode` reads its results
 */
export function settleAcks(
  address: string,
  batches: readonly PartitionBatch[],
  compressed: boolean,
  errorCode: number,
  decode: () => ReturnType<typeof decodeProduceAckResponse>,
  resend: Resend,
): void {
  if (errorCode !== ErrorCode.None) {
    for (const b of batches) failBatches([b], new KlogBrokerError(errorCode, { topic: b.topic, partition: b.meta.partition, broker: address }, 'produce rejected'));
    return;
  }
  let results;
  try {
    results = decode();
  } catch (err) {
    failBatches(batches, new KlogBrokerError(ErrorCode.Unknown, { broker: address }, `undecodable produce acknowledgement: ${(err as Error).message}`));
    return;
  }
  const byPartition = new Map(results.map((r) => [`${r.topic}\0${r.partition}`, r]));
  for (const b of batches) {
    const r = byPartition.get(`${b.topic}\0${b.partition}`);
    const where = { topic: b.topic, partition: b.meta.partition, broker: address };
    if (!r) {
      failBatches([b], new KlogBrokerError(ErrorCode.Unknown, where, 'acknowledgement does not name the partition'));
      continue;
    }
    if (r.errorCode === ErrorCode.MessageSizeTooLarge && r.nextOffset >= 0) {
      tooLarge(b, where, compressed, r.nextOffset, resend);
      continue;
    }
    if (r.errorCode !== ErrorCode.None) {
      failBatches([b], new KlogBrokerError(r.errorCode, where, 'produce rejected'));
      continue;
    }
    b.placements.forEach((p, i) => {
      if (p.done || p.call.settled) return;
      // A wrapper's records all sit at its offset; only the last one moves past it (see ProducerPool).
      const offset = compressed ? r.offset : r.offset + p.position;
      const nextOffset = compressed ? (i === b.placements.length - 1 ? r.nextOffset : r.offset) : offset + p.size;
      acknowledge(p, { ...b.meta, offset, nextOffset });
    });
  }
}

/** Bytes of a message's payload as the broker measures it against max.message.bytes (after magic and CRC). */
function payloadBytes(p: Placement): number {
  return p.size - messageOverheadBytes;
}

/** A batch rejected with MessageSizeTooLarge: fail what is over `limit`, send the rest again. */
function tooLarge(b: PartitionBatch, where: { topic: string; partition: number; broker: string }, compressed: boolean, limit: number, resend: Resend): void {
  if (compressed) {
    failBatches([b], new KlogBrokerError(ErrorCode.MessageSizeTooLarge, where, `the gzip message set of the batch is over the broker's max.message.bytes ${limit}: send smaller batches`));
    return;
  }
  const again: number[] = [];
  // Decided by size alone: a record whose call already failed (another record of it was too
  // large) is still stored, as it would have been in a set of its own.
  b.placements.forEach((p, i) => {
    if (p.done) return;
    if (payloadBytes(p) > limit) failPlacement(p, new RecordTooLargeError(where, payloadBytes(p), limit));
    else again.push(i);
  });
  // Nothing over the limit (it changed meanwhile, or the sizes disagree): sending again would loop.
  if (again.length > 0 && again.length === b.placements.length) {
    failBatches([b], new KlogBrokerError(ErrorCode.MessageSizeTooLarge, where, `produce rejected: a message is over the broker's max.message.bytes ${limit}`));
    return;
  }
  if (again.length === 0) return;
  // These placements are done here: their records settle in the batches they are placed in again.
  for (const i of again) b.placements[i]!.done = true;
  resend(b, again);
}
