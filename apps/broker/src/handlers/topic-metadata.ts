/**
 * TOPIC_METADATA (docs/replication.md §6.6): leaders, replicas and ISRs of replicated topics,
 * answered from the broker's metadata cache (replication/metadata-cache.ts, §13.1). It never
 * creates a topic. A standalone broker has no replicated topics: every topic is
 * NotReplicatedTopic.
 */
import { encodeTopicMetadataResponse, ErrorCode } from '@klog/protocol';
import type { BrokerContext } from './context.js';

/** The framed TOPIC_METADATA response. */
export function handleTopicMetadata(ctx: BrokerContext, topics: readonly string[]): Buffer {
  const cache = ctx.metadataCache;
  if (cache !== undefined) return encodeTopicMetadataResponse(cache.topicMetadata(topics));
  return encodeTopicMetadataResponse({
    errorCode: ErrorCode.None,
    brokers: [],
    topics: topics.map((topic) => ({ topic, errorCode: ErrorCode.NotReplicatedTopic, partitions: [] })),
  });
}
