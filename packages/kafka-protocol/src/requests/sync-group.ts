/**
 * SyncGroup (key 14), version 0:
 *
 * ```
 * SyncGroup Request (Version: 0) => group_id string generation_id int32 member_id string [assignments]
 *   assignments => member_id string assignment bytes      (sent by the leader only)
 * SyncGroup Response (Version: 0) => error_code int16 assignment bytes
 * ```
 */
import type { KafkaReader } from '../codec.js';
import { finishResponse, startResponse } from '../header.js';

/** A decoded SyncGroup request. */
export interface SyncGroupRequest {
  readonly groupId: string;
  readonly generationId: number;
  readonly memberId: string;
  readonly assignments: readonly { readonly memberId: string; readonly assignment: Buffer }[];
}

/** @throws KafkaProtocolError (InvalidRequest) */
export function decodeSyncGroupRequest(r: KafkaReader): SyncGroupRequest {
  const groupId = r.string('group_id');
  const generationId = r.int32('generation_id');
  const memberId = r.string('member_id');
  const assignments = r.array((r) => ({ memberId: r.string('member_id'), assignment: Buffer.from(r.bytes('assignment')) }), 'assignments');
  r.done('SyncGroup request');
  return { groupId, generationId, memberId, assignments };
}

/** The framed SyncGroup response. */
export function encodeSyncGroupResponse(correlationId: number, errorCode: number, assignment: Buffer): Buffer {
  return finishResponse(startResponse(correlationId, 32 + assignment.length).int16(errorCode).bytes(assignment));
}
