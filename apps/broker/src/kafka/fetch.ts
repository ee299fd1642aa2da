/**
 * Fetch and ListOffsets (docs/kafka-protocol.md, "Offsets"). A fetch reads the same logs as
 * klog's FETCH, from the first message at or after the fetch offset, never past the visible
 * (flushed) end, and re-frames the klog messages as Kafka messages of the response's magic with
 * their byte offsets; the first message is served whole even when it is larger than the
 * partition's max bytes, so no consumer stalls. With fewer than min_bytes to send it waits up to
 * max_wait_ms for a flush of one of the partitions asked for.
 */
import {
  KafkaErrorCode,
  decodeFetchRequest,
  decodeListOffsetsRequest,
  encodeFetchResponse,
  encodeListOffsetsResponse,
  fetchMagic,
  kafkaMessageSetOf,
  klogMessageAt,
  type FetchPartitionResponse,
  type FetchRequest,
  type KafkaReader,
  type ListOffsetsPartitionResponse,
  type RequestHeader,
} from '@klog/kafka-protocol';
import type { Log } from '@klog/storage';
import type { KafkaContext } from './context.js';
import { kafkaErrorOf, localLog } from './partitions.js';
import { longPoll } from '../long-poll.js';

const emptyRecords = Buffer.alloc(0);

/** Handles a Fetch request. */
export async function handleKafkaFetch(k: KafkaContext, h: RequestHeader, r: KafkaReader): Promise<Buffer[]> {
  const req = decodeFetchRequest(r, h.apiVersion);
  const magic = fetchMagic(h.apiVersion);
  let answer = await readAll(k, req, magic);
  if (answer.bytes < req.minBytes && req.maxWaitMs > 0 && answer.logs.length > 0) {
    await waitForFlush(k, answer.logs, Math.min(req.maxWaitMs, 30_000));
    answer = await readAll(k, req, magic);
  }
  return encodeFetchResponse(h.correlationId, h.apiVersion, answer.topics);
}

interface FetchAnswer {
  readonly topics: { topic: string; partitions: FetchPartitionResponse[] }[];
  /** Bytes of records in the answer. */
  readonly bytes: number;
  /** Logs asked for that had nothing to send (to wait on). */
  readonly logs: Log[];
}

async function readAll(k: KafkaContext, req: FetchRequest, magic: 0 | 1): Promise<FetchAnswer> {
  let bytes = 0;
  const logs: Log[] = [];
  const topics: FetchAnswer['topics'] = [];
  for (const t of req.topics) {
    const partitions: FetchPartitionResponse[] = [];
    for (const p of t.partitions) {
      const local = await localLog(k, t.topic, p.partition, false);
      if (local.log === undefined) {
        partitions.push({ partition: p.partition, errorCode: local.errorCode, highWatermark: -1, records: emptyRecords });
        continue;
      }
      const log = local.log;
      const budget = Math.min(p.maxBytes, k.broker.config.maxFetchBytes, Math.max(0, req.maxBytes - bytes));
      const answer = await readPartition(k, log, p.fetchOffset, bytes > 0 && budget === 0 ? 0 : Math.max(budget, 1), magic);
      if (answer.errorCode === KafkaErrorCode.None && answer.records.length === 0) logs.push(log);
      bytes += answer.records.length;
      partitions.push({ partition: p.partition, ...answer });
    }
    topics.push({ topic: t.topic, partitions });
  }
  return { topics, bytes, logs };
}

async function readPartition(k: KafkaContext, log: Log, fetchOffset: number, maxBytes: number, magic: 0 | 1): Promise<Omit<FetchPartitionResponse, 'partition'>> {
  try {
    const highWatermark = k.ends.highWatermark(log);
    const end = log.visibleEnd;
    if (fetchOffset < log.earliestOffset || fetchOffset > end) {
      return { errorCode: KafkaErrorCode.OffsetOutOfRange, highWatermark, records: emptyRecords };
    }
    const start = k.ends.firstMessageAtOrAfter(log, fetchOffset);
    if (start >= end || maxBytes === 0) return { errorCode: KafkaErrorCode.None, highWatermark, records: emptyRecords };
    let set = log.read(start, maxBytes);
    const first = klogMessageAt(set);
    if (first.status === 'cut' && first.size > set.length) set = log.read(start, Math.min(first.size, end - start));
    const framed = await kafkaMessageSetOf(set, start, magic, k.broker.config.maxFetchBytes);
    if (framed.lastOffset !== undefined) k.ends.served(log, framed.lastOffset, framed.nextOffset);
    k.broker.metrics.bytesOut(log.topic, framed.records.length);
    return { errorCode: KafkaErrorCode.None, highWatermark, records: framed.records };
  } catch (err) {
    k.broker.logger.error({ topic: log.topic, partition: log.partition, fetchOffset, err }, 'Kafka fetch failed');
    return { errorCode: kafkaErrorOf(err), highWatermark: -1, records: emptyRecords };
  }
}

/**
 * Waits until one of `logs` flushes, `ms` pass, or the broker or connection closes
 * (`k.broker.closing`), through the broker's one long-poll wait (`../long-poll.ts`).
 */
export function waitForFlush(k: KafkaContext, logs: readonly Log[], ms: number): Promise<void> {
  return longPoll(k.broker.closing, ms, (wake) => logs.map((log) => log.onFlush(() => wake())));
}

/** Handles a ListOffsets request: -1 the high watermark, -2 the earliest offset, a time: the start of the newest segment last written before it. */
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
      const log = local.log;
      const max = Math.max(1, p.maxNumOffsets);
      let offsets: number[];
      if (p.timestamp === -1) offsets = [k.ends.highWatermark(log)];
      else if (p.timestamp === -2) offsets = [log.earliestOffset];
      else offsets = log.offsetsBefore(p.timestamp, max).map((o) => (o === log.visibleEnd ? k.ends.highWatermark(log) : o));
      partitions.push({ partition: p.partition, errorCode: KafkaErrorCode.None, offsets });
    }
    topics.push({ name: t.name, partitions });
  }
  return encodeListOffsetsResponse(h.correlationId, h.apiVersion, topics);
}
