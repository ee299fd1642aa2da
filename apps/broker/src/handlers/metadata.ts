/**
 * (klog) METADATA: each topic's partition count on this broker, creating unknown topics with
 * `num.partitions` as a produce would; for a request naming no topic, every topic the broker
 * holds (at most 32767, by name), creating none (docs/format.md §12).
 */
import { ErrorCode, encodeMetadataResponse, type TopicMetadata } from '@klog/protocol';
import type { BrokerContext } from './context.js';
import { errorCodeOf } from './produce.js';

/** Most topics a listing answers with (the response's count is an int16). */
const maxTopicsListed = 32767;

/** The framed METADATA response. */
export function handleMetadata(ctx: BrokerContext, topics: readonly string[]): Buffer {
  if (topics.length === 0) {
    const all = [...ctx.logs.topics()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).slice(0, maxTopicsListed);
    return encodeMetadataResponse(all.map(([topic, partitions]) => ({ topic, errorCode: ErrorCode.None, partitions })));
  }
  const out: TopicMetadata[] = topics.map((topic) => {
    try {
      return { topic, errorCode: ErrorCode.None, partitions: ctx.logs.createTopic(topic) };
    } catch (err) {
      return { topic, errorCode: errorCodeOf(err), partitions: 0 };
    }
  });
  return encodeMetadataResponse(out);
}
