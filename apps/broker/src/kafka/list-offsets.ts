/**
 * ListOffsets (docs/kafka-protocol.md, "Offsets"): -1 the latest offset (the high watermark as
 * Kafka clients see it: the last visible message's offset + 1), -2 the earliest offset; a time:
 *
 * - v0 (Kafka 0.7's getOffsetsBefore, which v0 still is in Kafka): the starts of the segments
 *   last written at or before it, newest first, up to max_num_offsets;
 * - v1 (Kafka 0.10.1's offsets for times): the offset of the first message whose timestamp is at
 *   or after it, with that timestamp; -1 when no visible message has one. A message's timestamp is
 *   its own (the metadata header's, docs/format.md §2a: what Kafka producers send); a message
 *   without one is at or after the time when its segment was last written at or after it.
 *   klog keeps no time index
 *   (docs/design.md §2): the search reads messages from the start of the newest segment last
 *   written before the time, and segments older than that are not read (their messages were
 *   appended before the time; one stamped by its producer with a later time is not found there).
 *
 * A replicated partition is answered by its leader, within its high watermark
 * (docs/replication.md §9.5).
 */
import { iterateMessageSet, readMessageHeader } from '@klog/protocol';
import { KafkaErrorCode, decodeListOffsetsRequest, encodeListOffsetsResponse, type KafkaReader, type ListOffsetsPartitionResponse, type RequestHeader } from '@klog/kafka-protocol';
import type { KafkaContext } from './context.js';
import { kafkaErrorOf, localLog, visibleEndOf, type ServedLog } from './partitions.js';

/** ListOffsets' `timestamp` asking for the latest offset. */
const latestTime = -1;
/** ListOffsets' `timestamp` asking for the earliest offset. */
const earliestTime = -2;
/** Bytes read per step of a search by time. */
const searchReadBytes = 64 * 1024;

/** Handles a ListOffsets request. */
export async function handleKafkaListOffsets(k: KafkaContext, h: RequestHeader, r: KafkaReader): Promise<Buffer> {
  const req = decodeListOffsetsRequest(r, h.apiVersion);
  const topics = [];
  for (const t of req.topics) {
    const partitions: ListOffsetsPartitionResponse[] = [];
    for (const p of t.partitions) {
      const local = await localLog(k, t.name, p.partition, false);
      if (local.log === undefined) {
        partitions.push({ partition: p.partition, errorCode: local.errorCode, offsets: [] });
        continue;
      }
      try {
        let answer: Pick<ListOffsetsPartitionResponse, 'offsets' | 'timestamp'>;
        if (p.timestamp === latestTime) answer = { offsets: [k.ends.highWatermark(local)] };
        else if (p.timestamp === earliestTime) answer = { offsets: [local.log.earliestOffset] };
        else if (h.apiVersion === 0) answer = { offsets: segmentsBefore(k, local, p.timestamp, Math.max(1, p.maxNumOffsets)) };
        else answer = firstMessageAtOrAfterTime(local, p.timestamp) ?? { offsets: [] };
        partitions.push({ partition: p.partition, errorCode: KafkaErrorCode.None, ...answer });
      } catch (err) {
        k.broker.logger.error({ topic: t.name, partition: p.partition, timestamp: p.timestamp, err }, 'Kafka ListOffsets failed');
        partitions.push({ partition: p.partition, errorCode: kafkaErrorOf(err), offsets: [] });
      }
    }
    topics.push({ name: t.name, partitions });
  }
  return encodeListOffsetsResponse(h.correlationId, h.apiVersion, topics);
}

/** v0 by time: segment starts last written at or before `time`, newest first, within the visible end (the end itself as the high watermark). */
function segmentsBefore(k: KafkaContext, served: ServedLog, time: number, max: number): number[] {
  const end = visibleEndOf(served);
  const out: number[] = [];
  for (const o of served.log.offsetsBefore(time, max + 1)) {
    if (o > end) continue;
    out.push(o === end ? k.ends.highWatermark(served) : o);
    if (out.length === max) break;
  }
  return out;
}

/**
 * v1 by time: the first visible message whose timestamp is at or after `time` (see the module
 * comment), with its own timestamp (-1 for a message without one); undefined when there is none.
 * @throws ProtocolError (InvalidMessage) at a damaged message on the way
 */
export function firstMessageAtOrAfterTime(served: ServedLog, time: number): { offsets: [number]; timestamp: number } | undefined {
  const log = served.log;
  const end = visibleEndOf(served);
  // The newest segment last written before `time`: its messages without a timestamp are older than
  // `time`; from the next segment on, every message was appended at or after it.
  const before = time > 0 ? log.offsetsBefore(time - 1, 1)[0] : undefined; // (-1 and -2 are OFFSETS' latest and earliest)
  const newerFrom = before === undefined ? log.earliestOffset : (log.segmentStarts().find((s) => s > before) ?? Infinity);
  let pos = before ?? log.earliestOffset;
  let want = searchReadBytes;
  while (pos < end) {
    const buf = log.read(pos, Math.min(want, end - pos), end);
    if (buf.length === 0) return undefined;
    const from = pos;
    for (const m of iterateMessageSet(buf, pos)) {
      pos = m.nextOffset;
      const stamped = readMessageHeader(m.message).header?.timestamp;
      if (stamped !== undefined ? stamped >= time : m.offset >= newerFrom) return { offsets: [m.offset], timestamp: stamped ?? -1 };
    }
    if (pos > from) {
      want = searchReadBytes;
      continue;
    }
    // Not one whole message in the bytes read: one larger than a step, read whole next.
    const size = buf.length >= 4 ? 4 + buf.readUInt32BE(0) : 0;
    if (size <= buf.length || from + size > end) return undefined;
    want = size;
  }
  return undefined;
}
