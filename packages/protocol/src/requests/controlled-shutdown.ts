/**
 * (klog, replication) CONTROLLED_SHUTDOWN (type 20), broker → controller: a broker about to
 * stop asks the controller to move its leaderships away (docs/replication.md §6.5, §15.2).
 *
 * ```
 * ControlledShutdownRequest  => brokerId int32 | brokerEpoch int64
 * ControlledShutdownResponse => errorCode int16 | count int16 | count x (topic string | partition int32)
 *   brokerId ≥ 0, brokerEpoch ≥ 0 (the czxid of the broker's registration);
 *   response count ≥ 0: the partitions the broker still leads;
 *   error-only response (errorCode ≠ 0, no body): NotController, StaleBrokerEpoch
 * ```
 */
import { type Decoder, validateTopic } from '../codec.js';
import { ErrorCode, type ErrorCodeValue } from '../errors.js';
import { encodeFrame, RequestType } from '../frame.js';
import { readCount, readPartition } from './produce.js';
import { readInt32AtLeast, readInt64AtLeast } from './replica-fields.js';

/** A CONTROLLED_SHUTDOWN request. */
export interface ControlledShutdownRequest {
  /** The broker that is stopping, ≥ 0. */
  readonly brokerId: number;
  /** Its broker epoch: the `czxid` of its `/brokers/ids/<id>` node, ≥ 0. */
  readonly brokerEpoch: number;
}

/** A partition named in a CONTROLLED_SHUTDOWN response. */
export interface TopicPartition {
  readonly topic: string;
  readonly partition: number;
}

/** A CONTROLLED_SHUTDOWN response. */
export interface ControlledShutdownResponse {
  /** 0, or NotController / StaleBrokerEpoch (an error-only response, `remaining` empty). */
  readonly errorCode: ErrorCodeValue;
  /** The partitions the broker still leads because no other ISR member could take them. */
  readonly remaining: readonly TopicPartition[];
}

/** Encodes a framed CONTROLLED_SHUTDOWN request. */
export function encodeControlledShutdownRequest(r: ControlledShutdownRequest): Buffer {
  return encodeFrame(RequestType.ControlledShutdown, (e) => e.writeInt32(r.brokerId).writeInt64(r.brokerEpoch), 32);
}

/** Decodes a CONTROLLED_SHUTDOWN body (after the type). @throws ProtocolError */
export function decodeControlledShutdownRequest(d: Decoder): ControlledShutdownRequest {
  const brokerId = readInt32AtLeast(d, 'brokerId', 0);
  const brokerEpoch = readInt64AtLeast(d, 'brokerEpoch', 0);
  d.assertDone('controlled-shutdown request');
  return { brokerId, brokerEpoch };
}

/**
 * Encodes a framed CONTROLLED_SHUTDOWN response; an error code other than 0 with no partitions
 * gives the error-only response.
 * @throws ProtocolError (InvalidTopic) for a bad topic name
 */
export function encodeControlledShutdownResponse(r: ControlledShutdownResponse): Buffer {
  if (r.errorCode !== ErrorCode.None && r.remaining.length === 0) return encodeFrame(r.errorCode, () => {});
  return encodeFrame(r.errorCode, (e) => {
    e.writeInt16(r.remaining.length);
    for (const p of r.remaining) {
      validateTopic(p.topic);
      e.writeString(p.topic).writeInt32(p.partition);
    }
  });
}

/** Decodes a CONTROLLED_SHUTDOWN response body given its top-level error code. @throws ProtocolError */
export function decodeControlledShutdownResponse(errorCode: number, d: Decoder): ControlledShutdownResponse {
  const code = errorCode as ErrorCodeValue;
  if (code !== ErrorCode.None && d.remaining === 0) return { errorCode: code, remaining: [] };
  const count = readCount(d, 'controlled-shutdown response');
  const remaining: TopicPartition[] = [];
  for (let i = 0; i < count; i++) {
    const topic = d.readTopic();
    remaining.push({ topic, partition: readPartition(d) });
  }
  d.assertDone('controlled-shutdown response');
  return { errorCode: code, remaining };
}
