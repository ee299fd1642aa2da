/**
 * PRODUCE, MULTIPRODUCE (fire-and-forget, the paper §3.1) and klog's PRODUCE_ACK: each message
 * set is checked whole (lengths, magic, CRC, `max.message.bytes`) and appended as it came, in
 * one append; a set that fails the check never enters the log.
 *
 * Every message's CRC is checked on its own (validateMessageSet), not with the one-pass check
 * readers use: errors in two messages can be made to cancel in a combined check, and a set
 * crafted so would put messages with wrong CRCs in the log, which readers starting between them
 * and recovery would then stop at.
 *
 * Fire-and-forget sets that arrive together on one connection (a {@link ProduceRun}) are
 * appended together when they follow each other to the same partition: one write instead of one
 * per set (a producer sending batches of one message sends a set per message).
 */
import {
  AckLevel,
  ErrorCode,
  encodeProduceAckResponse,
  errorCodeName,
  firstBadMessageCrc,
  validateMessageSet,
  validateMessageSetFraming,
  type ErrorCodeValue,
  type PartitionMessages,
  type ProduceAckRequest,
  type ProduceAckResult,
} from '@klog/protocol';
import type { BrokerContext } from './context.js';

/** Most bytes a {@link ProduceRun} gathers for one append. */
export const maxRunBytes = 1024 * 1024;

/**
 * Where a run's sets are copied together for their one append. One for the whole broker: the
 * append writes synchronously (`Log.append`) and keeps no reference, so the buffer is free again
 * as soon as it returns.
 */
let runBuffer: Buffer | undefined;

/**
 * Appends one partition's message set.
 * @returns where it landed
 * @throws ProtocolError (InvalidMessage, MessageSizeTooLarge) or WrongPartitionError; nothing is appended then
 */
export function appendMessages(ctx: BrokerContext, p: PartitionMessages): { offset: number; nextOffset: number } {
  const count = validateMessageSet(p.messages, ctx.config.maxMessageBytes);
  const log = ctx.logs.getOrCreateLog(p.topic, p.partition);
  if (count === 0) return { offset: log.logEndOffset, nextOffset: log.logEndOffset };
  const result = log.append(p.messages, count);
  ctx.metrics.messagesIn(p.topic, count, p.messages.length);
  return result;
}

/** Fire-and-forget produce: a rejected set is logged (there is no response to carry an error). */
export function handleProduce(ctx: BrokerContext, produces: readonly PartitionMessages[]): void {
  const run = new ProduceRun(ctx);
  for (const p of produces) run.add(p);
  run.flush();
}

function rejected(ctx: BrokerContext, p: PartitionMessages, err: unknown): void {
  ctx.metrics.error(errorCodeName(errorCodeOf(err)));
  ctx.logger.warn({ topic: p.topic, partition: p.partition, bytes: p.messages.length, err: (err as Error).message }, 'produce rejected');
}

/**
 * Fire-and-forget message sets in arrival order, appended by {@link flush}: consecutive sets to
 * one partition as one append (copied together into one buffer, at most {@link maxRunBytes}).
 * Every set is checked on its own (lengths, magic, size limit when added; every message's CRC
 * when appended, with one {@link firstBadMessageCrc} call for the whole run, which checks each
 * message on its own); a set that fails is logged and dropped, and only it. The log sees the same
 * bytes in the same order as with one append per set.
 */
export class ProduceRun {
  /** Partition of the sets gathered. */
  private topic = '';
  private partition = -1;
  /** Sets gathered for that partition, their framing checked, and the messages of each. */
  private sets: Buffer[] = [];
  private counts: number[] = [];
  /** Bytes in `sets`. */
  private bytes = 0;

  constructor(private readonly ctx: BrokerContext) {}

  /** True while sets wait for {@link flush}. */
  get pending(): boolean {
    return this.sets.length > 0;
  }

  /** Adds one set, appending what was gathered first when it is for another partition or the run is full. */
  add(p: PartitionMessages): void {
    const set = p.messages;
    let count: number;
    try {
      count = validateMessageSetFraming(set, this.ctx.config.maxMessageBytes);
    } catch (err) {
      rejected(this.ctx, p, err);
      return;
    }
    if (this.sets.length > 0 && (p.topic !== this.topic || p.partition !== this.partition || this.bytes + set.length > maxRunBytes)) this.flush();
    if (count === 0) {
      // An empty set appends nothing but creates the partition, as a produce to it does.
      try {
        this.ctx.logs.getOrCreateLog(p.topic, p.partition);
      } catch (err) {
        rejected(this.ctx, p, err);
      }
      return;
    }
    this.topic = p.topic;
    this.partition = p.partition;
    this.sets.push(set);
    this.counts.push(count);
    this.bytes += set.length;
  }

  /** Checks the CRCs of what was gathered and appends it, less any set with a bad CRC. */
  flush(): void {
    if (this.sets.length === 0) return;
    const { topic, partition, sets, counts, bytes } = this;
    this.sets = [];
    this.counts = [];
    this.bytes = 0;
    let joined = sets[0]!;
    if (sets.length > 1) {
      joined = (runBuffer ??= Buffer.allocUnsafeSlow(maxRunBytes)).subarray(0, bytes);
      let pos = 0;
      for (const set of sets) pos += set.copy(joined, pos);
    }
    // Sets [first, i) from `from` on are good so far; a bad CRC cuts the run around its set.
    let from = 0;
    let first = 0;
    let count = 0;
    let bad = firstBadMessageCrc(joined, 0, bytes);
    for (let i = 0, end = 0; bad >= 0 && i < sets.length; i++) {
      const start = end;
      end += sets[i]!.length;
      if (bad >= end) {
        count += counts[i]!;
        continue;
      }
      this.append(topic, partition, joined.subarray(from, start), count);
      try {
        validateMessageSet(sets[i]!, this.ctx.config.maxMessageBytes);
      } catch (err) {
        rejected(this.ctx, { topic, partition, messages: sets[i]! }, err);
      }
      from = end;
      first = i + 1;
      count = 0;
      bad = firstBadMessageCrc(joined, end, bytes);
    }
    if (bad < 0) for (let i = first; i < sets.length; i++) count += counts[i]!;
    this.append(topic, partition, from === 0 ? joined : joined.subarray(from, bytes), count);
  }

  /** Appends `count` messages (nothing when 0). */
  private append(topic: string, partition: number, messages: Buffer, count: number): void {
    if (count === 0) return;
    try {
      const log = this.ctx.logs.getOrCreateLog(topic, partition);
      log.append(messages, count);
      this.ctx.metrics.messagesIn(topic, count, messages.length);
    } catch (err) {
      rejected(this.ctx, { topic, partition, messages }, err);
    }
  }
}

/** PRODUCE_ACK: answers per partition once appended (acks 1) or flushed (acks 2). */
export async function handleProduceAck(ctx: BrokerContext, req: ProduceAckRequest): Promise<Buffer> {
  const results: ProduceAckResult[] = [];
  const flushes: Promise<void>[] = [];
  for (const p of req.partitions) {
    try {
      const { offset, nextOffset } = appendMessages(ctx, p);
      results.push({ topic: p.topic, partition: p.partition, errorCode: ErrorCode.None, offset, nextOffset });
      if (req.acks === AckLevel.Flushed) flushes.push(ctx.logs.getOrCreateLog(p.topic, p.partition).flushedThrough(nextOffset));
    } catch (err) {
      const errorCode = errorCodeOf(err);
      ctx.metrics.error(errorCodeName(errorCode));
      ctx.logger.warn({ topic: p.topic, partition: p.partition, err: (err as Error).message }, 'produce rejected');
      // For a message over the limit, nextOffset carries the limit (docs/format.md §11), so the producer can say which.
      const nextOffset = errorCode === ErrorCode.MessageSizeTooLarge ? ctx.config.maxMessageBytes : -1;
      results.push({ topic: p.topic, partition: p.partition, errorCode, offset: -1, nextOffset });
    }
  }
  await Promise.all(flushes);
  return encodeProduceAckResponse(results);
}

/** The wire error code of an error thrown by the protocol or storage layer; Unknown for anything else. */
export function errorCodeOf(err: unknown): ErrorCodeValue {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'number' && code !== 0 ? (code as ErrorCodeValue) : ErrorCode.Unknown;
}
