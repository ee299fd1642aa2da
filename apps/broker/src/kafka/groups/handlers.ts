/**
 * The group APIs of the Kafka listener: FindCoordinator, JoinGroup, SyncGroup, Heartbeat,
 * LeaveGroup, OffsetCommit, OffsetFetch (docs/kafka-protocol.md, "Consumer groups").
 */
import {
  KafkaErrorCode,
  kafkaErrorName,
  decodeFindCoordinatorRequest,
  decodeHeartbeatRequest,
  decodeJoinGroupRequest,
  decodeLeaveGroupRequest,
  decodeOffsetCommitRequest,
  decodeOffsetFetchRequest,
  decodeSyncGroupRequest,
  encodeErrorCodeResponse,
  encodeFindCoordinatorResponse,
  encodeJoinGroupResponse,
  encodeOffsetCommitResponse,
  encodeOffsetFetchResponse,
  encodeSyncGroupResponse,
  type KafkaReader,
  type OffsetFetchPartition,
  type RequestHeader,
} from '@klog/kafka-protocol';
import type { GroupPartition } from '@klog/zk-registry';
import type { KafkaContext } from '../context.js';
import { heldReplica, kafkaErrorOf, visibleEndOf, type ServedLog } from '../partitions.js';
import { maxSessionTimeoutMs, minSessionTimeoutMs } from './coordinator.js';

/** Logs a group request's answer at debug level (docs/kafka-protocol.md, "Consumer groups"). */
function answered(k: KafkaContext, api: string, req: { groupId: string; memberId: string; generationId: number }, errorCode: number): void {
  k.broker.logger.debug({ api, group: req.groupId, member: req.memberId, generation: req.generationId, error: kafkaErrorName(errorCode) }, 'Kafka group request answered');
}

/** FindCoordinator v0. */
export async function handleFindCoordinator(k: KafkaContext, h: RequestHeader, r: KafkaReader): Promise<Buffer> {
  const { groupId } = decodeFindCoordinatorRequest(r);
  const b = await k.groups.coordinatorOf(groupId);
  return encodeFindCoordinatorResponse(h.correlationId, { errorCode: KafkaErrorCode.None, nodeId: b.nodeId, host: b.host, port: b.port });
}

/** JoinGroup v0: answered when the rebalance completes. */
export async function handleJoinGroup(k: KafkaContext, h: RequestHeader, r: KafkaReader): Promise<Buffer> {
  const req = decodeJoinGroupRequest(r);
  const timeoutOk = req.sessionTimeoutMs >= minSessionTimeoutMs && req.sessionTimeoutMs <= maxSessionTimeoutMs;
  const g = await k.groups.group(req.groupId, timeoutOk);
  const fail = (errorCode: number): Buffer =>
    encodeJoinGroupResponse(h.correlationId, { errorCode, generationId: -1, protocolName: '', leader: '', memberId: req.memberId, members: [] });
  if (typeof g === 'number') return fail(g);
  if (!timeoutOk) return fail(KafkaErrorCode.InvalidSessionTimeout);
  const answer = await g.join({ ...req, clientId: h.clientId ?? '' });
  answered(k, 'JoinGroup', { ...req, generationId: answer.generationId, memberId: answer.memberId }, answer.errorCode);
  if (answer.errorCode === KafkaErrorCode.InconsistentGroupProtocol) {
    k.broker.logger.warn({ group: req.groupId, protocolType: req.protocolType, protocols: req.protocols.map((p) => p.name) }, 'Kafka JoinGroup refused: no protocol (assignor) in common with the group');
  }
  return encodeJoinGroupResponse(h.correlationId, answer);
}

/** SyncGroup v0. */
export async function handleSyncGroup(k: KafkaContext, h: RequestHeader, r: KafkaReader): Promise<Buffer> {
  const req = decodeSyncGroupRequest(r);
  const g = await k.groups.group(req.groupId);
  if (typeof g === 'number') return encodeSyncGroupResponse(h.correlationId, g, Buffer.alloc(0));
  const { errorCode, assignment } = await g.sync(req.memberId, req.generationId, req.assignments);
  answered(k, 'SyncGroup', req, errorCode);
  return encodeSyncGroupResponse(h.correlationId, errorCode, assignment);
}

/** Heartbeat v0. */
export async function handleHeartbeat(k: KafkaContext, h: RequestHeader, r: KafkaReader): Promise<Buffer> {
  const req = decodeHeartbeatRequest(r);
  const g = await k.groups.group(req.groupId);
  const errorCode = typeof g === 'number' ? g : g.heartbeat(req.memberId, req.generationId);
  if (errorCode !== KafkaErrorCode.None) answered(k, 'Heartbeat', req, errorCode);
  return encodeErrorCodeResponse(h.correlationId, errorCode);
}

/** LeaveGroup v0. */
export async function handleLeaveGroup(k: KafkaContext, h: RequestHeader, r: KafkaReader): Promise<Buffer> {
  const req = decodeLeaveGroupRequest(r);
  const g = await k.groups.group(req.groupId);
  return encodeErrorCodeResponse(h.correlationId, typeof g === 'number' ? g : g.leave(req.memberId));
}

/**
 * The partition a group commits for Kafka partition `partition` of `topic`: a replicated topic's
 * own partition (docs/replication.md §14), a paper topic's (broker, partition); undefined when
 * the topic has no such partition.
 */
async function groupPartitionOf(k: KafkaContext, topic: string, partition: number): Promise<GroupPartition | undefined> {
  const replicated = k.broker.metadataCache?.partitionCount(topic);
  if (replicated !== undefined) return partition >= 0 && partition < replicated ? { replicated: true, partition } : undefined;
  return (await k.topology.partitions(topic))[partition];
}

/** OffsetCommit v2: stored per (broker, partition) of each Kafka partition (a replicated topic's: per partition), fenced by generation. */
export async function handleOffsetCommit(k: KafkaContext, h: RequestHeader, r: KafkaReader): Promise<Buffer> {
  const req = decodeOffsetCommitRequest(r);
  const g = await k.groups.group(req.groupId);
  const fenced = typeof g === 'number' ? g : k.groups.mayCommit(g, req.memberId, req.generationId);
  if (fenced !== KafkaErrorCode.None) answered(k, 'OffsetCommit', req, fenced);
  const topics = [];
  for (const t of req.topics) {
    const partitions = [];
    for (const p of t.partitions) {
      let errorCode: number = fenced;
      if (errorCode === KafkaErrorCode.None) {
        try {
          const gp = await groupPartitionOf(k, t.name, p.partition);
          if (gp === undefined) errorCode = KafkaErrorCode.UnknownTopicOrPartition;
          else if (p.offset < 0) errorCode = KafkaErrorCode.InvalidCommitOffsetSize;
          else await k.groups.offsets.commit(req.groupId, t.name, gp, boundaryOf(k, t.name, gp, p.offset));
        } catch (err) {
          k.broker.logger.warn({ group: req.groupId, topic: t.name, partition: p.partition, err: (err as Error).message }, 'Kafka offset commit failed');
          errorCode = kafkaErrorOf(err);
        }
      }
      partitions.push({ partition: p.partition, errorCode });
    }
    topics.push({ name: t.name, partitions });
  }
  return encodeOffsetCommitResponse(h.correlationId, topics);
}

/**
 * The offset stored for a commit of `offset`: a Kafka client commits "last offset + 1", inside
 * the last message it read; where this broker holds the partition (a paper partition of its own,
 * or a replica of a replicated one, leader or follower) and `offset` is within what it holds
 * visible (the flushed end; the high watermark of its replica, below which every replica has the
 * same bytes), the first message at or after it is stored instead, so klog's own consumers can
 * resume from it too and lag reads 0 at the end. Anywhere else the coordinator cannot know where
 * messages start, and stores `offset` as committed.
 */
function boundaryOf(k: KafkaContext, topic: string, gp: GroupPartition, offset: number): number {
  const served = heldLog(k, topic, gp);
  if (served === undefined || offset < served.log.earliestOffset || offset > visibleEndOf(served)) return offset;
  return k.ends.firstMessageAtOrAfter(served, offset);
}

/** This broker's log of a group partition, when it holds one. */
function heldLog(k: KafkaContext, topic: string, gp: GroupPartition): ServedLog | undefined {
  if ('replicated' in gp) return heldReplica(k, topic, gp.partition);
  if (gp.brokerId !== k.topology.self.nodeId) return undefined;
  const log = k.broker.logs.getLog(topic, gp.partition);
  return log === undefined ? undefined : { log };
}

/** OffsetFetch v1: -1 for a partition without a committed offset. */
export async function handleOffsetFetch(k: KafkaContext, h: RequestHeader, r: KafkaReader): Promise<Buffer> {
  const req = decodeOffsetFetchRequest(r);
  const g = await k.groups.group(req.groupId);
  const topics = [];
  for (const t of req.topics) {
    const partitions: OffsetFetchPartition[] = [];
    for (const partition of t.partitions) {
      if (typeof g === 'number') {
        partitions.push({ partition, offset: -1, errorCode: g });
        continue;
      }
      try {
        const gp = await groupPartitionOf(k, t.name, partition);
        const offset = gp === undefined ? undefined : await k.groups.offsets.read(req.groupId, t.name, gp);
        partitions.push({ partition, offset: offset ?? -1, errorCode: KafkaErrorCode.None });
      } catch (err) {
        partitions.push({ partition, offset: -1, errorCode: kafkaErrorOf(err) });
      }
    }
    topics.push({ name: t.name, partitions });
  }
  return encodeOffsetFetchResponse(h.correlationId, topics);
}
