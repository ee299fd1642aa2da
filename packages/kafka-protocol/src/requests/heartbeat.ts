/**
 * Heartbeat (key 12), version 0:
 *
 * ```
 * Heartbeat Request (Version: 0) => group_id string generation_id int32 member_id string
 * Heartbeat Response (Version: 0) => error_code int16
 * ```
 */
import type { KafkaReader } from '../codec.js';
import { finishResponse, startResponse } from '../header.js';

/** @throws KafkaProtocolError (InvalidRequest) */
export function decodeHeartbeatRequest(r: KafkaReader): { groupId: string; generationId: number; memberId: string } {
  const groupId = r.string('group_id');
  const generationId = r.int32('generation_id');
  const memberId = r.string('member_id');
  r.done('Heartbeat request');
  return { groupId, generationId, memberId };
}

/** A framed response that is only an error code (Heartbeat v0, LeaveGroup v0). */
export function encodeErrorCodeResponse(correlationId: number, errorCode: number): Buffer {
  return finishResponse(startResponse(correlationId, 16).int16(errorCode));
}
