/**
 * OFFSETS (the paper §3.1, Kafka 0.7's getOffsetsBefore): segment start offsets before a time,
 * newest first; −1 the latest (flushed) offset, −2 the earliest.
 */
import { ErrorCode, OffsetTime, encodeErrorResponse, errorCodeName, encodeOffsetsResponse, type OffsetsRequest } from '@klog/protocol';
import type { BrokerContext } from './context.js';

/** The framed OFFSETS response. A topic nobody has produced to is an empty log at 0. */
export function handleOffsets(ctx: BrokerContext, r: OffsetsRequest): Buffer {
  const count = ctx.logs.partitionCount(r.topic);
  if (count === undefined) {
    return encodeOffsetsResponse(r.time === OffsetTime.Latest || r.time === OffsetTime.Earliest ? [0] : []);
  }
  // A partition past the topic's count (or one without a log) is WrongPartition.
  const log = r.partition < count ? ctx.logs.getLog(r.topic, r.partition) : undefined;
  if (log === undefined) {
    ctx.metrics.error(errorCodeName(ErrorCode.WrongPartition));
    return encodeErrorResponse(ErrorCode.WrongPartition);
  }
  return encodeOffsetsResponse(log.offsetsBefore(r.time, r.maxOffsets));
}
