/**
 * (klog) METADATA: each topic's partition count on this broker. It never creates a topic: a
 * topic the broker does not have is answered with the count a produce would create it with
 * (`num.partitions`) while `auto.create.topics.enable` is true, and UnknownTopic otherwise
 * (docs/format.md §12). So one request naming thousands of topics costs no file work.
 */
import { ErrorCode, encodeMetadataResponse, type TopicMetadata } from '@klog/protocol';
import { isValidTopicName } from '@klog/storage';
import type { BrokerContext } from './context.js';

/** The framed METADATA response. */
export function handleMetadata(ctx: BrokerContext, topics: readonly string[]): Buffer {
  const out: TopicMetadata[] = topics.map((topic) => {
    const count = ctx.logs.partitionCount(topic);
    if (count !== undefined) return { topic, errorCode: ErrorCode.None, partitions: count };
    if (!isValidTopicName(topic)) return { topic, errorCode: ErrorCode.InvalidTopic, partitions: 0 };
    if (!ctx.config.autoCreateTopics) return { topic, errorCode: ErrorCode.UnknownTopic, partitions: 0 };
    return { topic, errorCode: ErrorCode.None, partitions: ctx.config.numPartitions };
  });
  return encodeMetadataResponse(out);
}
