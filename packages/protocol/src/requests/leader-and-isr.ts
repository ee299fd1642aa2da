/**
 * (klog, replication) LEADER_AND_ISR (type 16), controller → broker: for some partitions, who
 * leads, the ISR, and so the broker's own role (docs/replication.md §6.1).
 *
 * ```
 * LeaderAndIsrRequest  => controllerId int32 | controllerEpoch int32 | count int16 | count x PartitionState
 *                         | brokerCount int16 | brokerCount x Broker
 * PartitionState       => topic string | topicId string | partition int32 | leader int32 | leaderEpoch int32
 *                         | stateVersion int32 | minInsyncReplicas int16 | isNew int8
 *                         | replicaCount int16 | replicaCount x int32 | isrCount int16 | isrCount x int32
 * Broker               => brokerId int32 | host string | port int32
 * LeaderAndIsrResponse => errorCode int16 | count int16 | count x (topic string | partition int32 | errorCode int16)
 *   count ≥ 1, brokerCount ≥ 0, replicaCount ≥ 1, isrCount ≥ 0 (an offline partition may have an empty ISR);
 *   leader −1: offline; topicId 16 lowercase hex digits; isNew 0 or 1;
 *   error-only response (errorCode ≠ 0, no body): StaleControllerEpoch
 * ```
 */
import { type Decoder, validateTopic } from '../codec.js';
import { ErrorCode, ProtocolError } from '../errors.js';
import { encodeErrorResponse, encodeFrame, RequestType } from '../frame.js';
import { readCount, readPartition } from './produce.js';
import {
  type BrokerAddress,
  type PartitionErrorsResponse,
  readBrokerIds,
  readBrokers,
  readFlag,
  readInt32AtLeast,
  readPartitionErrorsResponse,
  writeBrokerIds,
  writeBrokers,
  writePartitionErrors,
} from './replica-fields.js';

/** A topic id: 64 random bits as 16 lowercase hex digits (docs/replication.md §3.1). */
const topicIdPattern = /^[0-9a-f]{16}$/;

/** Checks a topic id (16 lowercase hex digits). @throws RangeError naming it */
export function validateTopicId(topicId: string): void {
  if (!topicIdPattern.test(topicId)) throw new RangeError(`topic id ${JSON.stringify(topicId.slice(0, 40))} is not 16 lowercase hex digits`);
}

/** One partition's state as the controller wrote it to ZooKeeper (docs/replication.md §3.1, §6.1). */
export interface PartitionState {
  readonly topic: string;
  /** The topic definition's `id`, 16 hex digits. */
  readonly topicId: string;
  readonly partition: number;
  /** Broker id of the leader, or −1 while the partition is offline. */
  readonly leader: number;
  /** The partition's leader epoch, ≥ 0. */
  readonly leaderEpoch: number;
  /** ZooKeeper version of the state node after the controller's write, ≥ 0 (the leader's ISR writes are conditional on it). */
  readonly stateVersion: number;
  /** The topic's `min.insync.replicas`, 1 to 32767. */
  readonly minInsyncReplicas: number;
  /** The state's `new`: the broker may create the replica log (docs/replication.md §8.1). */
  readonly isNew: boolean;
  /** The replica list, preferred leader first; at least one broker. */
  readonly replicas: readonly number[];
  /** The ISR, in replica-list order; may be empty for an offline partition. */
  readonly isr: readonly number[];
}

/** A LEADER_AND_ISR request. */
export interface LeaderAndIsrRequest {
  /** Broker id of the controller that sends it, ≥ 0. */
  readonly controllerId: number;
  /** Its controller epoch, ≥ 0 (docs/replication.md §5.1). */
  readonly controllerEpoch: number;
  /** At least one partition. */
  readonly partitions: readonly PartitionState[];
  /** The address of every leader named in `partitions` (may be empty). */
  readonly brokers: readonly BrokerAddress[];
}

/**
 * A LEADER_AND_ISR response: an error code per partition (0, FencedLeaderEpoch, NotReplica,
 * ReplicaLost, a storage error), or error-only StaleControllerEpoch.
 */
export type LeaderAndIsrResponse = PartitionErrorsResponse;

/**
 * Encodes a framed LEADER_AND_ISR request.
 * @throws ProtocolError (InvalidTopic) for a bad topic name; RangeError for a bad topic id or a count that does not fit an int16
 */
export function encodeLeaderAndIsrRequest(r: LeaderAndIsrRequest): Buffer {
  return encodeFrame(
    RequestType.LeaderAndIsr,
    (e) => {
      e.writeInt32(r.controllerId).writeInt32(r.controllerEpoch).writeInt16(r.partitions.length);
      for (const p of r.partitions) {
        validateTopic(p.topic);
        validateTopicId(p.topicId);
        e.writeString(p.topic).writeString(p.topicId).writeInt32(p.partition).writeInt32(p.leader).writeInt32(p.leaderEpoch);
        e.writeInt32(p.stateVersion).writeInt16(p.minInsyncReplicas).writeInt8(p.isNew ? 1 : 0);
        writeBrokerIds(e, p.replicas);
        writeBrokerIds(e, p.isr);
      }
      writeBrokers(e, r.brokers);
    },
    256,
  );
}

/** Decodes a LEADER_AND_ISR body (after the type). @throws ProtocolError */
export function decodeLeaderAndIsrRequest(d: Decoder): LeaderAndIsrRequest {
  const controllerId = readInt32AtLeast(d, 'controllerId', 0);
  const controllerEpoch = readInt32AtLeast(d, 'controllerEpoch', 0);
  const count = readCount(d, 'leader-and-isr', 1);
  const partitions: PartitionState[] = [];
  for (let i = 0; i < count; i++) {
    const topic = d.readTopic();
    const topicId = d.readString('topicId');
    if (!topicIdPattern.test(topicId)) {
      throw new ProtocolError(ErrorCode.InvalidRequest, `topic id ${JSON.stringify(topicId.slice(0, 40))} is not 16 lowercase hex digits`);
    }
    const partition = readPartition(d);
    const leader = readInt32AtLeast(d, 'leader', -1);
    const leaderEpoch = readInt32AtLeast(d, 'leaderEpoch', 0);
    const stateVersion = readInt32AtLeast(d, 'stateVersion', 0);
    const minInsyncReplicas = d.readInt16();
    if (minInsyncReplicas < 1) throw new ProtocolError(ErrorCode.InvalidRequest, `minInsyncReplicas ${minInsyncReplicas} is below 1`);
    const isNew = readFlag(d, 'isNew');
    const replicas = readBrokerIds(d, 'replica', 1);
    const isr = readBrokerIds(d, 'isr', 0);
    partitions.push({ topic, topicId, partition, leader, leaderEpoch, stateVersion, minInsyncReplicas, isNew, replicas, isr });
  }
  const brokers = readBrokers(d, 'broker');
  d.assertDone('leader-and-isr request');
  return { controllerId, controllerEpoch, partitions, brokers };
}

/**
 * Encodes a framed LEADER_AND_ISR response; with a top-level error code other than 0 and no
 * partitions, the error-only response (StaleControllerEpoch).
 * @throws ProtocolError (InvalidTopic) for a bad topic name
 */
export function encodeLeaderAndIsrResponse(r: LeaderAndIsrResponse): Buffer {
  if (r.errorCode !== ErrorCode.None && r.partitions.length === 0) return encodeErrorResponse(r.errorCode);
  return encodeFrame(r.errorCode, (e) => writePartitionErrors(e, r.partitions));
}

/** Decodes a LEADER_AND_ISR response body given its top-level error code. @throws ProtocolError */
export function decodeLeaderAndIsrResponse(errorCode: number, d: Decoder): LeaderAndIsrResponse {
  return readPartitionErrorsResponse(errorCode, d, 'leader-and-isr response');
}
