/**
 * OFFSET_FOR_LEADER_EPOCH (type 19, docs/replication.md §6.4): where one of a follower's epochs
 * ends on this leader, from the leader-epoch checkpoint (§8.2): the largest epoch ≤ the one
 * asked and the start of the epoch after it, or the log end for the latest.
 */
import { ErrorCode, encodeOffsetForLeaderEpochResponse, errorCodeName, type EpochEndOffset, type OffsetForLeaderEpochRequest } from '@klog/protocol';
import type { BrokerContext } from './context.js';

/** The framed OFFSET_FOR_LEADER_EPOCH response. */
export function handleOffsetForLeaderEpoch(ctx: BrokerContext, req: OffsetForLeaderEpochRequest): Buffer {
  const partitions = req.partitions.map((q): EpochEndOffset => {
    const p = ctx.replicas.get(q.topic, q.partition);
    const refused = p === undefined ? ErrorCode.UnknownLeaderEpoch : p.followerRequestError(req.replicaId, q.currentLeaderEpoch);
    if (refused !== undefined) {
      ctx.metrics.error(errorCodeName(refused));
      return { topic: q.topic, partition: q.partition, errorCode: refused, leaderEpoch: -1, endOffset: -1 };
    }
    const { epoch, endOffset } = p!.log!.leaderEpochs.endOffsetFor(q.leaderEpoch, p!.log!.logEndOffset);
    return { topic: q.topic, partition: q.partition, errorCode: ErrorCode.None, leaderEpoch: epoch, endOffset };
  });
  return encodeOffsetForLeaderEpochResponse({ errorCode: ErrorCode.None, partitions });
}
