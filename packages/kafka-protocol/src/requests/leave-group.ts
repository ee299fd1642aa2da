/**
 * LeaveGroup (key 13), version 0:
 *
 * ```
 * LeaveGroup Request (Version: 0) => group_id string member_id string
 * LeaveGroup Response (Version: 0) => error_code int16           (encodeErrorCodeResponse)
 * ```
 */
import type { KafkaReader } from '../codec.js';

/** @throws KafkaProtocolError (InvalidRequest) */
export function decodeLeaveGroupRequest(r: KafkaReader): { groupId: string; memberId: string } {
  const groupId = r.string('group_id');
  const memberId = r.string('member_id');
  r.done('LeaveGroup request');
  return { groupId, memberId };
}
