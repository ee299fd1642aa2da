/**
 * (klog, replication) STOP_REPLICA (type 17), controller → broker: stop leading or following
 * some partitions; with `delete` 1 delete their replica logs too (docs/replication.md §6.2).
 *
 * ```
 * StopReplicaRequest  => controllerId int32 | controllerEpoch int32 | delete int8
 *                        | count int16 | count x (topic string | partition int32 | leaderEpoch int32)
 * StopReplicaResponse => errorCode int16 | count int16 | count x (topic string | partition int32 | errorCode int16)
 *   delete 0 or 1; count ≥ 1; leaderEpoch ≥ 0;
 *   error-only response (errorCode ≠ 0, no body): StaleControllerEpoch
 * ```
 */
import { type Decoder, validateTopic } from '../codec.js';
import { ErrorCode } from '../errors.js';
import { encodeErrorResponse, encodeFrame, RequestType } from '../frame.js';
import { readCount, readPartition } from './produce.js';
import { type PartitionErrorsResponse, readFlag, readInt32AtLeast, readPartitionErrorsResponse, writePartitionErrors } from './replica-fields.js';

/** One partition to stop, with its leader epoch in ZooKeeper when the controller decided. */
export interface StopReplicaPartition {
  readonly topic: string;
  readonly partition: number;
  /** ≥ 0; a broker holding a newer epoch answers FencedLeaderEpoch for the partition and keeps it. */
  readonly leaderEpoch: number;
}

/** A STOP_REPLICA request. */
export interface StopReplicaRequest {
  /** Broker id of the controller that sends it, ≥ 0. */
  readonly controllerId: number;
  /** Its controller epoch, ≥ 0. */
  readonly controllerEpoch: number;
  /** Delete the replica logs too (topic deletion); false: only stop (controlled shutdown). */
  readonly delete: boolean;
  /** At least one partition. */
  readonly partitions: readonly StopReplicaPartition[];
}

/** A STOP_REPLICA response: an error code per partition, or error-only StaleControllerEpoch. */
export type StopReplicaResponse = PartitionErrorsResponse;

/** Encodes a framed STOP_REPLICA request. @throws ProtocolError (InvalidTopic) for a bad topic name */
export function encodeStopReplicaRequest(r: StopReplicaRequest): Buffer {
  return encodeFrame(RequestType.StopReplica, (e) => {
    e.writeInt32(r.controllerId).writeInt32(r.controllerEpoch).writeInt8(r.delete ? 1 : 0).writeInt16(r.partitions.length);
    for (const p of r.partitions) {
      validateTopic(p.topic);
      e.writeString(p.topic).writeInt32(p.partition).writeInt32(p.leaderEpoch);
    }
  });
}

/** Decodes a STOP_REPLICA body (after the type). @throws ProtocolError */
export function decodeStopReplicaRequest(d: Decoder): StopReplicaRequest {
  const controllerId = readInt32AtLeast(d, 'controllerId', 0);
  const controllerEpoch = readInt32AtLeast(d, 'controllerEpoch', 0);
  const del = readFlag(d, 'delete');
  const count = readCount(d, 'stop-replica', 1);
  const partitions: StopReplicaPartition[] = [];
  for (let i = 0; i < count; i++) {
    const topic = d.readTopic();
    const partition = readPartition(d);
    partitions.push({ topic, partition, leaderEpoch: readInt32AtLeast(d, 'leaderEpoch', 0) });
  }
  d.assertDone('stop-replica request');
  return { controllerId, controllerEpoch, delete: del, partitions };
}

/**
 * Encodes a framed STOP_REPLICA response; with a top-level error code other than 0 and no
 * partitions, the error-only response.
 * @throws ProtocolError (InvalidTopic) for a bad topic name
 */
export function encodeStopReplicaResponse(r: StopReplicaResponse): Buffer {
  if (r.errorCode !== ErrorCode.None && r.partitions.length === 0) return encodeErrorResponse(r.errorCode);
  return encodeFrame(r.errorCode, (e) => writePartitionErrors(e, r.partitions));
}

/** Decodes a STOP_REPLICA response body given its top-level error code. @throws ProtocolError */
export function decodeStopReplicaResponse(errorCode: number, d: Decoder): StopReplicaResponse {
  return readPartitionErrorsResponse(errorCode, d, 'stop-replica response');
}
