/**
 * (klog) METADATA: each topic's partition count on this broker. It never creates a topic: a
 * topic the broker does not have is answered with the count a produce would create it with
 * (`num.partitions`) while `auto.create.topics.enable` is true, and UnknownTopic otherwise; for
 * a request naming no topic, every topic the broker holds (at most 32767, by name)
 * (docs/format.md §12). So one request naming thousands of topics costs no file work.
 */
import { ErrorCode, encodeMetadataResponse, type TopicMetadata } from '@klog/protocol';
import { isValidTopicName } from '@klog/storage';
import type { BrokerContext } from './context.js';

/** Most topics a listing answers with (the response's count is an int16). */
const maxTopicsListed = 32767;

/** The framed METADATA response. */
export function handleMetadata(ctx: BrokerContext, topics: readonly string[]): Buffer {
  if (topics.length === 0) {
    const all = [...ctx.logs.topics()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).slice(0, maxTopicsListed);
    return encodeMetadataResponse(all.map(([topic, partitions]) => ({ topic, errorCode: ErrorCode.None, partitions })));
  }
  const out: TopicMetadata[] = topics.map((topic) => {
    const count = ctx.logs.partitionCount(topic);
    if (count !== undefined) return { topic, errorCode: ErrorCode.None, partitions: count };
    if (!isValidTopicName(topic)) return { topic, errorCode: ErrorCode.InvalidTopic, partitions: 0 };
    if (!ctx.config.autoCreateTopics) return { topic, errorCode: ErrorCode.UnknownTopic, partitions: 0 };
    return { topic, errorCode: ErrorCode.None, partitions: ctx.config.numPartitions };
  });
  return encodeMetadataResponse(out);
}
