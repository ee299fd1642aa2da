/**
 * REPLICA_FETCH (type 18, docs/replication.md §6.3): a follower's fetch from this leader. Each
 * partition's fetch first counts as the follower's report of its positions (§9.4: the high
 * watermark and the ISR move on it), then is answered with the leader's log from `fetchOffset`
 * up to its log end (not the high watermark), at most `maxBytes`, never across the end of a
 * segment nor across the start of a later epoch. The bytes are sent from the segment file as
 * FETCH's are (a pinned region, sendfile where it can). With `maxWaitMs`, a request whose
 * partitions have no bytes and no error waits for an append to one of them.
 */
import {
  ErrorCode,
  encodeErrorResponse,
  encodeFetchedPartitionHeader,
  encodeReplicaFetchResponseHeader,
  errorCodeName,
  type ErrorCodeValue,
  type FetchedPartitionHeader,
  type ReplicaFetchPartition,
  type ReplicaFetchRequest,
} from '@klog/protocol';
import { FileRegion } from '@klog/storage';
import type { BrokerContext, ResponsePart } from './context.js';
import { maxResponseFrameBytes } from './fetch.js';
import { errorCodeOf } from './produce.js';
import { longPoll, type Unsubscribe } from '../long-poll.js';

/** One partition's answer: its header fields and the region of its bytes (empty on an error). */
interface Answer extends Omit<FetchedPartitionHeader, 'topic' | 'partition'> {
  readonly region: FileRegion;
}

function failed(errorCode: ErrorCodeValue, offsets?: { highWatermark: number; logEndOffset: number; logStartOffset: number }): Answer {
  return { errorCode, highWatermark: -1, logEndOffset: -1, logStartOffset: -1, ...offsets, epoch: -1, segmentStart: -1, region: FileRegion.empty(0) };
}

/** Takes one partition's fetch into account and reads its answer; never throws. The region is pinned. */
function answer(ctx: BrokerContext, replicaId: number, f: ReplicaFetchPartition, record: boolean): Answer {
  const p = ctx.replicas.get(f.topic, f.partition);
  // Not known here yet: its LEADER_AND_ISR has not arrived (docs/replication.md §6.3), the follower retries.
  if (p === undefined) return failed(ErrorCode.UnknownLeaderEpoch);
  const refused = p.followerRequestError(replicaId, f.leaderEpoch);
  if (refused !== undefined) return failed(refused);
  const log = p.log!;
  if (f.fetchOffset < log.earliestOffset || f.fetchOffset > log.logEndOffset) {
    return failed(ErrorCode.OffsetOutOfRange, { highWatermark: p.highWatermark, logEndOffset: log.logEndOffset, logStartOffset: log.earliestOffset });
  }
  if (record) p.recordFollowerFetch(replicaId, f.fetchOffset, f.flushedOffset, Date.now());
  const offsets = { highWatermark: p.highWatermark, logEndOffset: log.logEndOffset, logStartOffset: log.earliestOffset };
  try {
    const { epoch, end } = p.epochAt(f.fetchOffset);
    const region = log.readRange(f.fetchOffset, Math.min(f.maxBytes, ctx.config.maxFetchBytes), end);
    return { errorCode: ErrorCode.None, ...offsets, epoch, segmentStart: region.offset - region.position, region };
  } catch (err) {
    ctx.logger.error({ topic: f.topic, partition: f.partition, fetchOffset: f.fetchOffset, replicaId, err }, 'replica fetch failed');
    return failed(errorCodeOf(err), offsets);
  }
}

/** Waits until one of the partitions is appended to (or stops being led here), `ms` pass, or the connection closes. */
function waitForAppend(ctx: BrokerContext, req: ReplicaFetchRequest, ms: number): Promise<void> {
  return longPoll(ctx.closing, ms, (wake) => {
    const subscriptions: Unsubscribe[] = [];
    for (const f of req.partitions) {
      const p = ctx.replicas.get(f.topic, f.partition);
      if (p !== undefined) subscriptions.push(p.onAppend(wake));
    }
    return subscriptions;
  });
}

/** REPLICA_FETCH: the framed response as parts to send in order (headers and segment regions). */
export async function handleReplicaFetch(ctx: BrokerContext, req: ReplicaFetchRequest): Promise<ResponsePart[]> {
  let most = 8;
  for (const f of req.partitions) most += 64 + f.topic.length + Math.min(f.maxBytes, ctx.config.maxFetchBytes);
  if (most > maxResponseFrameBytes) {
    ctx.metrics.error(errorCodeName(ErrorCode.InvalidFetchSize));
    return [encodeErrorResponse(ErrorCode.InvalidFetchSize)];
  }
  let answers = req.partitions.map((f) => answer(ctx, req.replicaId, f, true));
  if (req.maxWaitMs > 0 && answers.every((a) => a.errorCode === ErrorCode.None && a.region.length === 0)) {
    await waitForAppend(ctx, req, req.maxWaitMs);
    answers = req.partitions.map((f) => answer(ctx, req.replicaId, f, true));
  }
  const parts: ResponsePart[] = [];
  let bytes = 0;
  req.partitions.forEach((f, i) => {
    const a = answers[i]!;
    if (a.errorCode !== ErrorCode.None) ctx.metrics.error(errorCodeName(a.errorCode));
    const header = encodeFetchedPartitionHeader({ topic: f.topic, partition: f.partition, ...a }, a.region.length);
    parts.push(header);
    bytes += header.length + a.region.length;
    if (a.region.length > 0) parts.push(a.region);
  });
  return [encodeReplicaFetchResponseHeader(req.partitions.length, bytes), ...parts];
}
