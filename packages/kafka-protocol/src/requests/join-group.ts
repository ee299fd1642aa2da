/**
 * JoinGroup (key 11), version 0:
 *
 * ```
 * JoinGroup Request (Version: 0) => group_id string session_timeout_ms int32 member_id string protocol_type string [protocols]
 *   protocols => name string metadata bytes
 * JoinGroup Response (Version: 0) => error_code int16 generation_id int32 protocol_name string leader string member_id string [members]
 *   members => member_id string metadata bytes          (filled in for the leader only)
 * ```
 *
 * In version 0 the rebalance timeout is the session timeout.
 */
import type { KafkaReader } from '../codec.js';
import { finishResponse, startResponse } from '../header.js';

/** One protocol (assignor) a member supports, with its metadata (subscription). */
export interface GroupProtocol {
  readonly name: string;
  readonly metadata: Buffer;
}

/** A decoded JoinGroup request. */
export interface JoinGroupRequest {
  readonly groupId: string;
  readonly sessionTimeoutMs: number;
  /** Empty for a new member. */
  readonly memberId: string;
  /** `consumer` for consumers. */
  readonly protocolType: string;
  readonly protocols: readonly GroupProtocol[];
}

/** @throws KafkaProtocolError (InvalidRequest) */
export function decodeJoinGroupRequest(r: KafkaReader): JoinGroupRequest {
  const groupId = r.string('group_id');
  const sessionTimeoutMs = r.int32('session_timeout_ms');
  const memberId = r.string('member_id');
  const protocolType = r.string('protocol_type');
  const protocols = r.array((r) => ({ name: r.string('protocol name'), metadata: Buffer.from(r.bytes('protocol metadata')) }), 'protocols');
  r.done('JoinGroup request');
  return { groupId, sessionTimeoutMs, memberId, protocolType, protocols };
}

/** What a JoinGroup response says. */
export interface JoinGroupResponse {
  readonly errorCode: number;
  readonly generationId: number;
  readonly protocolName: string;
  readonly leader: string;
  readonly memberId: string;
  readonly members: readonly { readonly memberId: string; readonly metadata: Buffer }[];
}

/** The framed JoinGroup response. */
export function encodeJoinGroupResponse(correlationId: number, j: JoinGroupResponse): Buffer {
  const w = startResponse(correlationId, 128);
  w.int16(j.errorCode).int32(j.generationId).string(j.protocolName).string(j.leader).string(j.memberId);
  w.array(j.members, (w, m) => w.string(m.memberId).bytes(m.metadata));
  return finishResponse(w);
}
