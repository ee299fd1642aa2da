/**
 * PRODUCE, MULTIPRODUCE (fire-and-forget, the paper §3.1) and klog's PRODUCE_ACK: each message
 * set is checked whole (lengths, magic, CRC, `max.message.bytes`) and appended as it came, in
 * one append; a set that fails the check never enters the log.
 */
import {
  AckLevel,
  ErrorCode,
  encodeProduceAckResponse,
  validateMessageSet,
  type ErrorCodeValue,
  type PartitionMessages,
  type ProduceAckRequest,
  type ProduceAckResult,
} from '@klog/protocol';
import type { BrokerContext } from './context.js';

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
  for (const p of produces) {
    try {
      appendMessages(ctx, p);
    } catch (err) {
      ctx.logger.warn({ topic: p.topic, partition: p.partition, bytes: p.messages.length, err: (err as Error).message }, 'produce rejected');
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
      ctx.logger.warn({ topic: p.topic, partition: p.partition, err: (err as Error).message }, 'produce rejected');
      results.push({ topic: p.topic, partition: p.partition, errorCode, offset: -1, nextOffset: -1 });
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
