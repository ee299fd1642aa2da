/**
 * (klog) METADATA: each topic's partition count on this broker, creating unknown topics with
 * `num.partitions` as a produce would.
 */
import { ErrorCode, encodeMetadataResponse, type TopicMetadata } from '@klog/protocol';
import type { BrokerContext } from './context.js';
import { errorCodeOf } from './produce.js';

/** The framed METADATA response. */
export function handleMetadata(ctx: BrokerContext, topics: readonly string[]): Buffer {
  const out: TopicMetadata[] = topics.map((topic) => {
    try {
      return { topic, errorCode: ErrorCode.None, partitions: ctx.logs.createTopic(topic) };
    } catch (err) {
      return { topic, errorCode: errorCodeOf(err), partitions: 0 };
    }
  });
  return encodeMetadataResponse(out);
}
