/**
 * One table from API key to handler (docs/kafka-protocol.md has the versions): each request is
 * decoded, answered, and its response framed. ApiVersions is answered at any version.
 */
import { ApiKey, KafkaProtocolError, KafkaErrorCode, apiKeyName, checkSupported, encodeApiVersionsResponse, type KafkaReader, type RequestHeader } from '@klog/kafka-protocol';
import type { KafkaContext, LaterResponse } from './context.js';
import { handleKafkaFetch } from './fetch.js';
import { handleKafkaListOffsets } from './list-offsets.js';
import { handleFindCoordinator, handleHeartbeat, handleJoinGroup, handleLeaveGroup, handleOffsetCommit, handleOffsetFetch, handleSyncGroup } from './groups/handlers.js';
import { handleKafkaCreateTopics, handleKafkaMetadata } from './metadata.js';
import { handleKafkaProduce } from './produce.js';

type Handler = (k: KafkaContext, h: RequestHeader, r: KafkaReader) => Promise<Buffer | Buffer[] | LaterResponse | undefined>;

const handlers = new Map<number, Handler>([
  [ApiKey.Produce, handleKafkaProduce],
  [ApiKey.Fetch, handleKafkaFetch],
  [ApiKey.ListOffsets, handleKafkaListOffsets],
  [ApiKey.Metadata, handleKafkaMetadata],
  [ApiKey.OffsetCommit, handleOffsetCommit],
  [ApiKey.OffsetFetch, handleOffsetFetch],
  [ApiKey.FindCoordinator, handleFindCoordinator],
  [ApiKey.JoinGroup, handleJoinGroup],
  [ApiKey.Heartbeat, handleHeartbeat],
  [ApiKey.LeaveGroup, handleLeaveGroup],
  [ApiKey.SyncGroup, handleSyncGroup],
  [ApiKey.CreateTopics, handleKafkaCreateTopics],
]);

/**
 * Answers one request.
 * @returns the framed response (one buffer, or parts to send in order), one still to come
 *   ({@link LaterResponse}: a Produce with acks -1 waiting for its flush or high watermark), or undefined when there is none
 *   (Produce with acks 0)
 * @throws KafkaProtocolError when the request cannot be answered (an API or version klog does
 *   not serve, bytes that are not the layout): Kafka brokers close the connection then
 */
export async function routeKafkaRequest(k: KafkaContext, h: RequestHeader, body: KafkaReader): Promise<Buffer | Buffer[] | LaterResponse | undefined> {
  if (h.apiKey === ApiKey.ApiVersions) return encodeApiVersionsResponse(h.correlationId, h.apiVersion);
  checkSupported(h.apiKey, h.apiVersion);
  const handler = handlers.get(h.apiKey);
  if (handler === undefined) throw new KafkaProtocolError(KafkaErrorCode.UnsupportedVersion, `${apiKeyName(h.apiKey)} is not served`);
  return handler(k, h, body);
}
