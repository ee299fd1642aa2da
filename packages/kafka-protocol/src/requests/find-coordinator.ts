/**
 * FindCoordinator (key 10, GroupCoordinator in Kafka 0.10), version 0:
 *
 * ```
 * FindCoordinator Request (Version: 0) => key string                      the group id
 * FindCoordinator Response (Version: 0) => error_code int16 node_id int32 host string port int32
 * ```
 */
import type { KafkaReader } from '../codec.js';
import { finishResponse, startResponse } from '../header.js';

/** @returns the group id asked about. @throws KafkaProtocolError (InvalidRequest) */
export function decodeFindCoordinatorRequest(r: KafkaReader): { groupId: string } {
  const groupId = r.string('key');
  r.done('FindCoordinator request');
  return { groupId };
}

/** The framed FindCoordinator response. */
export function encodeFindCoordinatorResponse(correlationId: number, c: { errorCode: number; nodeId: number; host: string; port: number }): Buffer {
  return finishResponse(startResponse(correlationId).int16(c.errorCode).int32(c.nodeId).string(c.host).int32(c.port));
}
