/**
 * (klog, replication) OFFSET_FOR_LEADER_EPOCH (type 19), follower → leader: where one of the
 * follower's epochs ends on the leader, so that it truncates what it holds beyond that
 * (docs/replication.md §6.4, §10).
 *
 * ```
 * OffsetForLeaderEpochRequest  => replicaId int32 | count int16
 *                                 | count x (topic string | partition int32 | currentLeaderEpoch int32 | leaderEpoch int32)
 * OffsetForLeaderEpochResponse => errorCode int16 | count int16
 *                                 | count x (topic string | partition int32 | errorCode int16 | leaderEpoch int32 | endOffset int64)
 *   request: replicaId ≥ 0, count ≥ 1, epochs ≥ 0
 *   response: count ≥ 0; leaderEpoch −1 and endOffset −1 when the leader has no epoch ≤ the one asked;
 *             error-only response (errorCode ≠ 0, no body) for a request that did not decode
 * ```
 */
import { type Decoder, validateTopic } from '../codec.js';
import { ErrorCode, type ErrorCodeValue } from '../errors.js';
import { encodeFrame, RequestType } from '../frame.js';
import { readCount, readPartition } from './produce.js';
import { readInt32AtLeast, readInt64AtLeast } from './replica-fields.js';

/** One partition of an OFFSET_FOR_LEADER_EPOCH request. */
export interface EpochQuery {
  readonly topic: string;
  readonly partition: number;
  /** The epoch the follower follows, ≥ 0; checked as REPLICA_FETCH's `leaderEpoch`. */
  readonly currentLeaderEpoch: number;
  /** The follower's last epoch (the latest entry of its checkpoint), ≥ 0. */
  readonly leaderEpoch: number;
}

/** An OFFSET_FOR_LEADER_EPOCH request. */
export interface OffsetForLeaderEpochRequest {
  /** The follower's broker id, ≥ 0. */
  readonly replicaId: number;
  /** At least one partition. */
  readonly partitions: readonly EpochQuery[];
}

/** The leader's answer for one partition. */
export interface EpochEndOffset {
  readonly topic: string;
  readonly partition: number;
  readonly errorCode: ErrorCodeValue;
  /** The largest epoch of the leader's checkpoint ≤ the one asked; −1 when there is none. */
  readonly leaderEpoch: number;
  /** Where that epoch ends on the leader in bytes (start of its next epoch, or its log end); −1 with epoch −1. */
  readonly endOffset: number;
}

/** An OFFSET_FOR_LEADER_EPOCH response. */
export interface OffsetForLeaderEpochResponse {
  /** 0, or the code of an error-only response (then `partitions` is empty). */
  readonly errorCode: ErrorCodeValue;
  readonly partitions: readonly EpochEndOffset[];
}

/** Encodes a framed OFFSET_FOR_LEADER_EPOCH request. @throws ProtocolError (InvalidTopic) for a bad topic name */
export function encodeOffsetForLeaderEpochRequest(r: OffsetForLeaderEpochRequest): Buffer {
  return encodeFrame(RequestType.OffsetForLeaderEpoch, (e) => {
    e.writeInt32(r.replicaId).writeInt16(r.partitions.length);
    for (const p of r.partitions) {
      validateTopic(p.topic);
      e.writeString(p.topic).writeInt32(p.partition).writeInt32(p.currentLeaderEpoch).writeInt32(p.leaderEpoch);
    }
  });
}

/** Decodes an OFFSET_FOR_LEADER_EPOCH body (after the type). @throws ProtocolError */
export function decodeOffsetForLeaderEpochRequest(d: Decoder): OffsetForLeaderEpochRequest {
  const replicaId = readInt32AtLeast(d, 'replicaId', 0);
  const count = readCount(d, 'offset-for-leader-epoch', 1);
  const partitions: EpochQuery[] = [];
  for (let i = 0; i < count; i++) {
    const topic = d.readTopic();
    const partition = readPartition(d);
    const currentLeaderEpoch = readInt32AtLeast(d, 'currentLeaderEpoch', 0);
    partitions.push({ topic, partition, currentLeaderEpoch, leaderEpoch: readInt32AtLeast(d, 'leaderEpoch', 0) });
  }
  d.assertDone('offset-for-leader-epoch request');
  return { replicaId, partitions };
}

/**
 * Encodes a framed OFFSET_FOR_LEADER_EPOCH response; an error code other than 0 with no
 * partitions gives the error-only response.
 * @throws ProtocolError (InvalidTopic) for a bad topic name
 */
export function encodeOffsetForLeaderEpochResponse(r: OffsetForLeaderEpochResponse): Buffer {
  if (r.errorCode !== ErrorCode.None && r.partitions.length === 0) return encodeFrame(r.errorCode, () => {});
  return encodeFrame(r.errorCode, (e) => {
    e.writeInt16(r.partitions.length);
    for (const p of r.partitions) {
      validateTopic(p.topic);
      e.writeString(p.topic).writeInt32(p.partition).writeInt16(p.errorCode).writeInt32(p.leaderEpoch).writeInt64(p.endOffset);
    }
  });
}

/** Decodes an OFFSET_FOR_LEADER_EPOCH response body given its top-level error code. @throws ProtocolError */
export function decodeOffsetForLeaderEpochResponse(errorCode: number, d: Decoder): OffsetForLeaderEpochResponse {
  const code = errorCode as ErrorCodeValue;
  if (code !== ErrorCode.None && d.remaining === 0) return { errorCode: code, partitions: [] };
  const count = readCount(d, 'offset-for-leader-epoch response');
  const partitions: EpochEndOffset[] = [];
  for (let i = 0; i < count; i++) {
    const topic = d.readTopic();
    const partition = readPartition(d);
    const partErrorCode = d.readInt16() as ErrorCodeValue;
    const leaderEpoch = readInt32AtLeast(d, 'leaderEpoch', -1);
    partitions.push({ topic, partition, errorCode: partErrorCode, leaderEpoch, endOffset: readInt64AtLeast(d, 'endOffset', -1) });
  }
  d.assertDone('offset-for-leader-epoch response');
  return { errorCode: code, partitions };
}
