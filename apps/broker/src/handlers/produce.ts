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
  type MessageSetShape,
  type PartitionMessages,
  type ProduceAckRequest,
  type ProduceAckResult,
} from '@klog/protocol';
import { WrongPartitionError, type Log } from '@klog/storage';
import type { BrokerContext } from './context.js';
import type { Partition } from '../replication/partition.js';

/** Most bytes a {@link ProduceRun} gathers for one append. */
export const maxRunBytes = 1024 * 1024;

/**
 * Where a set is put together just before its append: a run's sets copied together, a Kafka
 * set converted (kafka/produce.ts). One for the whole broker: every use fills it and appends
 * from it with no await between, and the append writes synchronously (`Log.append`) and keeps no
 * reference, so the buffer is free again as soon as it returns.
 */
let appendBuffer: Buffer | undefined;

/**
 * The broker-wide buffer of {@link maxRunBytes} to put a set of `bytes` together in just before
 * appending it, with no await between; a new buffer for a larger set.
 */
export function appendBufferFor(bytes: number): Buffer {
  if (bytes > maxRunBytes) return Buffer.allocUnsafe(bytes);
  return (appendBuffer ??= Buffer.allocUnsafeSlow(maxRunBytes));
}

/**
 * Appends one partition's message set, creating the topic first when it is new (and
 * `auto.create.topics.enable` allows).
 * @returns where it landed, and the log
 * @throws ProtocolError (InvalidMessage, MessageSizeTooLarge), WrongPartitionError,
 *   UnknownTopicError, TooManyPartitionsError or DiskFullError; nothing is appended then
 */
export async function appendMessages(ctx: BrokerContext, p: PartitionMessages): Promise<{ offset: number; nextOffset: number; log: Log }> {
  const shape = validateMessageSet(p.messages, ctx.config.maxMessageBytes);
  const log = ctx.logs.getLog(p.topic, p.partition) ?? (await ctx.logs.getOrCreateLog(p.topic, p.partition));
  return { ...appendChecked(ctx, log, p.messages, shape), log };
}

/**
 * Appends a message set klog's own encoder wrote (every CRC computed from its bytes: the Kafka
 * listener's converted sets) to `log`, synchronously: only its framing and `max.message.bytes`
 * are checked (`validateMessageSetFraming`), not its CRCs again. `messages` is not kept once
 * this returns (the caller may reuse its buffer).
 * @returns where it landed
 * @throws ProtocolError (MessageSizeTooLarge) or the append's error; nothing is appended then
 */
export function appendEncodedMessages(ctx: BrokerContext, log: Log, messages: Buffer): { offset: number; nextOffset: number } {
  return appendChecked(ctx, log, messages, validateMessageSetFraming(messages, ctx.config.maxMessageBytes));
}

/** Appends a set whose check found `shape`, counting it in. */
function appendChecked(ctx: BrokerContext, log: Log, messages: Buffer, shape: MessageSetShape): { offset: number; nextOffset: number } {
  if (shape.count === 0) return { offset: log.logEndOffset, nextOffset: log.logEndOffset };
  const appended = log.append(messages, shape.count, shape.lastPosition);
  ctx.metrics.messagesIn(log.topic, shape.count, messages.length);
  return appended;
}

/** Fire-and-forget produce: a rejected set is logged (there is no response to carry an error). */
export async function handleProduce(ctx: BrokerContext, produces: readonly PartitionMessages[]): Promise<void> {
  const run = new ProduceRun(ctx);
  for (const p of produces) await run.add(p);
  run.flush();
}

/**
 * A set as its result and its log lines name it: its partition and size, not necessarily its
 * bytes (an answer that waits holds no more than this).
 */
export type SetRef = Pick<PartitionMessages, 'topic' | 'partition'> & { readonly messages: { readonly length: number } };

/**
 * Logs and counts (`klog_errors_total` by code) a set that was not appended. A full disk is
 * logged at error, with the log dir: an operator must act.
 */
export function rejected(ctx: BrokerContext, p: SetRef, err: unknown): void {
  const code = errorCodeOf(err);
  ctx.metrics.error(errorCodeName(code));
  const entry = { topic: p.topic, partition: p.partition, bytes: p.messages.length, code: errorCodeName(code), err: (err as Error).message };
  if (code === ErrorCode.DiskFull) ctx.logger.error({ ...entry, logDir: ctx.config.logDir }, 'disk full: produce rejected');
  else ctx.logger.warn(entry, 'produce rejected');
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

  /**
   * Adds one set, appending what was gathered first when it is for another partition or the run
   * is full.
   * @returns undefined when the set was taken at once; a promise when its partition's topic is
   *   being created (off the event loop): the caller waits for it before adding more, so sets
   *   stay in arrival order. Never rejects: a set that cannot be appended is logged.
   */
  add(p: PartitionMessages): Promise<void> | undefined {
    if (this.ctx.replicas.isReplicatedTopic(p.topic)) {
      this.flush();
      appendReplicatedFireAndForget(this.ctx, p);
      return undefined;
    }
    const set = p.messages;
    let count: number;
    try {
      count = validateMessageSetFraming(set, this.ctx.config.maxMessageBytes).count;
    } catch (err) {
      rejected(this.ctx, p, err);
      return undefined;
    }
    if (this.sets.length > 0 && (p.topic !== this.topic || p.partition !== this.partition || this.bytes + set.length > maxRunBytes)) this.flush();
    if (this.ctx.logs.getLog(p.topic, p.partition) === undefined) {
      // A new topic: created first (even by an empty set, as a produce to it does), then gathered.
      return this.ctx.logs.getOrCreateLog(p.topic, p.partition).then(
        () => this.#gather(p, count),
        (err: unknown) => rejected(this.ctx, p, err),
      );
    }
    this.#gather(p, count);
    return undefined;
  }

  #gather(p: PartitionMessages, count: number): void {
    if (count === 0) return;
    const set = p.messages;
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
      joined = appendBufferFor(bytes).subarray(0, bytes);
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
      const log = this.ctx.logs.getLog(topic, partition);
      if (log === undefined) throw new WrongPartitionError(topic, partition, this.ctx.logs.partitionCount(topic) ?? 0);
      log.append(messages, count);
      this.ctx.metrics.messagesIn(topic, count, messages.length);
    } catch (err) {
      rejected(this.ctx, { topic, partition, messages }, err);
    }
  }
}

/**
 * PRODUCE_ACK: answers per partition once appended (acks 1) or flushed (acks 2); on a replicated
 * partition with acks −1 once the high watermark reaches the set (docs/replication.md §11), on a
 * paper topic acks −1 is acks 2.
 */
export async function handleProduceAck(ctx: BrokerContext, req: ProduceAckRequest): Promise<Buffer> {
  return (await appendProduceAck(ctx, req)).response;
}

/**
 * PRODUCE_ACK in two steps, so that a connection can pipeline them (connection.ts): resolves
 * once every set of the request is appended (or refused), with the promise of its response,
 * which settles when each partition's ack level is met (see {@link handleProduceAck}). Sets of
 * a later request appended after this one resolved land after this request's sets.
 * Never rejects: a set's errors become its result's code.
 */
export async function appendProduceAck(ctx: BrokerContext, req: ProduceAckRequest): Promise<{ response: Promise<Buffer> }> {
  const results: ProduceAckResult[] = [];
  const flushes: Promise<void>[] = [];
  for (const p of req.partitions) {
    if (ctx.replicas.isReplicatedTopic(p.topic)) {
      const i = results.length;
      results.push({ topic: p.topic, partition: p.partition, errorCode: ErrorCode.Unknown, offset: -1, nextOffset: -1 });
      flushes.push(produceReplicated(ctx, p, req.acks).then((r) => void (results[i] = r)));
      continue;
    }
    try {
      const { offset, nextOffset, log } = await appendMessages(ctx, p);
      const i = results.length;
      results.push({ topic: p.topic, partition: p.partition, errorCode: ErrorCode.None, offset, nextOffset });
      // A failed flush is the partition's answer, handled at once: later partitions may still be
      // awaited, and the response never rejects.
      if (req.acks !== AckLevel.Appended) flushes.push(log.flushedThrough(nextOffset).catch((err: unknown) => void (results[i] = rejectedResult(ctx, p, err))));
    } catch (err) {
      results.push(rejectedResult(ctx, p, err));
    }
  }
  return { response: Promise.all(flushes).then(() => encodeProduceAckResponse(results)) };
}

/**
 * One partition's PRODUCE_ACK on a replicated topic (docs/replication.md §11): checked whole,
 * appended by the leader only (NotLeaderForPartition elsewhere), refused whole with
 * NotEnoughReplicas for acks −1 when the ISR is below `min.insync.replicas`, and answered after
 * the append (1), the leader's flush (2) or the high watermark reaching the set (−1). Also the
 * Kafka listener's Produce to a replicated partition (docs/kafka-protocol.md, "Partitions").
 * The set is appended (or refused) before this returns its promise, so a caller can take the
 * next request while the promise waits for the ack level, and that request's sets land after
 * this one's (both listeners pipeline produces this way).
 * Never rejects: errors become the result's code (counted in `klog_errors_total`).
 */
export function produceReplicated(ctx: BrokerContext, p: PartitionMessages, acks: number): Promise<ProduceAckResult> {
  let appended: ReturnType<typeof appendToReplica>;
  try {
    appended = appendToReplica(ctx, p, acks === AckLevel.All);
  } catch (err) {
    return Promise.resolve(rejectedResult(ctx, p, err));
  }
  // The bytes are in the log: what waits for the acks keeps only the set's name and size.
  const set: SetRef = { topic: p.topic, partition: p.partition, messages: { length: p.messages.length } };
  if ('errorCode' in appended) return Promise.resolve(replicatedResult(ctx, set, appended.errorCode));
  return replicatedAnswer(ctx, set, appended, acks);
}

/** The answer of a set appended to a replicated partition, once its ack level is met (see {@link produceReplicated}). */
async function replicatedAnswer(
  ctx: BrokerContext,
  set: SetRef,
  appended: { partition: Partition; offset: number; nextOffset: number },
  acks: number,
): Promise<ProduceAckResult> {
  const { partition, offset, nextOffset } = appended;
  try {
    if (acks === AckLevel.Flushed) await partition.log!.flushedThrough(nextOffset);
    if (acks !== AckLevel.All) return replicatedResult(ctx, set, ErrorCode.None, offset, nextOffset);
    const code = await partition.waitForHighWatermark(nextOffset);
    const landed = code === ErrorCode.None || code === ErrorCode.NotEnoughReplicasAfterAppend;
    return landed ? replicatedResult(ctx, set, code, offset, nextOffset) : replicatedResult(ctx, set, code);
  } catch (err) {
    return rejectedResult(ctx, set, err);
  }
}

/** A replicated set's result; an error code is counted in `klog_errors_total`. */
function replicatedResult(ctx: BrokerContext, set: SetRef, errorCode: ErrorCodeValue, offset = -1, nextOffset = -1): ProduceAckResult {
  if (errorCode !== ErrorCode.None) ctx.metrics.error(errorCodeName(errorCode));
  return { topic: set.topic, partition: set.partition, errorCode, offset, nextOffset };
}

/**
 * A fire-and-forget set to a replicated topic: appended by the partition's leader; anywhere
 * else dropped, logged and counted (`klog_errors_total{code="NotLeaderForPartition"}`,
 * docs/replication.md §11).
 */
function appendReplicatedFireAndForget(ctx: BrokerContext, p: PartitionMessages): void {
  try {
    const appended = appendToReplica(ctx, p, false);
    if ('errorCode' in appended) throw Object.assign(new Error(`${errorCodeName(appended.errorCode)}: this broker does not lead ${p.topic}/${p.partition}`), { code: appended.errorCode });
  } catch (err) {
    rejected(ctx, p, err);
  }
}

/**
 * Checks a set and appends it to the replicated partition this broker leads, counting it in;
 * `{ errorCode }` when the broker does not lead it (NotLeaderForPartition) or, with
 * `checkMinIsr`, when the ISR is below `min.insync.replicas` (NotEnoughReplicas, nothing appended).
 * @throws the check's ProtocolError for a bad set
 */
function appendToReplica(
  ctx: BrokerContext,
  p: PartitionMessages,
  checkMinIsr: boolean,
): { partition: Partition; offset: number; nextOffset: number } | { errorCode: ErrorCodeValue } {
  const shape = validateMessageSet(p.messages, ctx.config.maxMessageBytes);
  const partition = ctx.replicas.get(p.topic, p.partition);
  const appended = partition?.appendAsLeader(p.messages, shape, checkMinIsr) ?? { errorCode: ErrorCode.NotLeaderForPartition };
  if ('errorCode' in appended) return appended;
  ctx.metrics.messagesIn(p.topic, shape.count, p.messages.length);
  return { partition: partition!, ...appended };
}

/**
 * The PRODUCE_ACK result of a set that could not be appended, after logging and counting it
 * ({@link rejected}). For a message over the limit, `nextOffset` carries the limit
 * (docs/format.md §11), so the producer can say which.
 */
function rejectedResult(ctx: BrokerContext, p: SetRef, err: unknown): ProduceAckResult {
  rejected(ctx, p, err);
  const errorCode = errorCodeOf(err);
  const nextOffset = errorCode === ErrorCode.MessageSizeTooLarge ? ctx.config.maxMessageBytes : -1;
  return { topic: p.topic, partition: p.partition, errorCode, offset: -1, nextOffset };
}

/** The wire error code of an error thrown by the protocol or storage layer; Unknown for anything else. */
export function errorCodeOf(err: unknown): ErrorCodeValue {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'number' && code !== 0 ? (code as ErrorCodeValue) : ErrorCode.Unknown;
}
