/**
 * OFFSETS (the paper §3.1, Kafka 0.7's getOffsetsBefore): segment start offsets before a time,
 * newest first; −1 the latest (flushed) offset, −2 the earliest. On a replicated partition the
 * leader answers, up to the high watermark: −1 is the high watermark (docs/replication.md §9.5).
 */
import { ErrorCode, OffsetTime, encodeErrorResponse, errorCodeName, encodeOffsetsResponse, type OffsetsRequest } from '@klog/protocol';
import type { BrokerContext } from './context.js';

/** The framed OFFSETS response. A topic nobody has produced to is an empty log at 0. */
export function handleOffsets(ctx: BrokerContext, r: OffsetsRequest): Buffer {
  if (ctx.replicas.isReplicatedTopic(r.topic)) return replicatedOffsets(ctx, r);
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

/**
 * OFFSETS of a replicated partition (docs/replication.md §9.5): answered by the leader only
 * (NotLeaderForPartition elsewhere); −1 is the high watermark and only segment starts up to it
 * are listed.
 */
function replicatedOffsets(ctx: BrokerContext, r: OffsetsRequest): Buffer {
  const p = ctx.replicas.get(r.topic, r.partition);
  const log = p?.log;
  if (p === undefined || !p.isLeader || log === undefined) {
    ctx.metrics.error(errorCodeName(ErrorCode.NotLeaderForPartition));
    return encodeErrorResponse(ErrorCode.NotLeaderForPartition);
  }
  const hw = p.highWatermark;
  const below = log.offsetsBefore(r.time, r.maxOffsets + 1).filter((o) => o < hw || (o === hw && r.time !== OffsetTime.Latest));
  const offsets = r.time === OffsetTime.Latest ? [hw, ...below] : below;
  return encodeOffsetsResponse(offsets.slice(0, r.maxOffsets));
}
