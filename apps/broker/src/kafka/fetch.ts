/**
 * Fetch and ListOffsets (docs/kafka-protocol.md, "Offsets"). A fetch reads the same logs as
 * klog's FETCH, from the first message at or after the fetch offset, never past the visible end
 * (the flushed end; a replicated partition's high watermark, read from its leader only:
 * docs/replication.md §9.5), and re-frames the klog messages as Kafka messages of the response's magic with
 * their byte offsets; the first message is served whole even when it is larger than the
 * partition's max bytes, so no consumer stalls. With fewer than min_bytes to send it waits up to
 * max_wait_ms for a flush (a high watermark move) of one of the partitions asked for. The next
 * answer of a paper partition is read ahead (./read-ahead.ts).
 *
 * Answers are built in memory, so their bytes count in the listener's fetch memory
 * (`kafka.fetch.memory.bytes`, broker-wide) until the response has left the socket's buffer
 * (./connection.ts): each partition's max bytes is also bounded by what the budget has left, so
 * when it is spent answers get smaller, down to one message: the first message of an answer
 * that would otherwise be empty is still served whole (the same rule), so no consumer stalls.
 * The budget bounds the klog bytes read; re-framing adds at most 24 bytes a message.
 */
import {
  KafkaErrorCode,
  decodeFetchRequest,
  encodeFetchResponse,
  fetchMagic,
  kafkaMessageSetOf,
  klogMessageAt,
  plainKafkaMessageSetOf,
  type FetchPartitionResponse,
  type FetchRequest,
  type KafkaFraming,
  type KafkaReader,
  type RequestHeader,
} from '@klog/kafka-protocol';
import type { KafkaContext } from './context.js';
import { kafkaErrorOf, localLog, onVisibleEndMoved, visibleEndOf, type ServedLog } from './partitions.js';
import { longPoll } from '../long-poll.js';

const emptyRecords = Buffer.alloc(0);

/** Handles a Fetch request. */
export async function handleKafkaFetch(k: KafkaContext, h: RequestHeader, r: KafkaReader): Promise<Buffer[]> {
  const req = decodeFetchRequest(r, h.apiVersion);
  const magic = fetchMagic(h.apiVersion);
  let answer = await readAll(k, req, magic);
  if (answer.bytes < req.minBytes && req.maxWaitMs > 0 && answer.logs.length > 0) {
    k.held.release(answer.bytes); // this answer is dropped: read again after the wait
    await waitForFlush(k, answer.logs, Math.min(req.maxWaitMs, 30_000));
    answer = await readAll(k, req, magic);
  }
  return encodeFetchResponse(h.correlationId, h.apiVersion, answer.topics);
}

interface FetchAnswer {
  readonly topics: { topic: string; partitions: FetchPartitionResponse[] }[];
  /** Bytes of records in the answer, held in `k.held` (the fetch memory). */
  readonly bytes: number;
  /** Logs asked for that had nothing to send (to wait on). */
  readonly logs: ServedLog[];
}

/**
 * Reads every partition asked for, each within its max bytes, what is left of the request's and
 * what is left of the fetch memory; the records' bytes are added to `k.held`.
 */
async function readAll(k: KafkaContext, req: FetchRequest, magic: 0 | 1): Promise<FetchAnswer> {
  let bytes = 0;
  const logs: ServedLog[] = [];
  const topics: FetchAnswer['topics'] = [];
  for (const t of req.topics) {
    const partitions: FetchPartitionResponse[] = [];
    for (const p of t.partitions) {
      const local = await localLog(k, t.topic, p.partition, false);
      if (local.log === undefined) {
        partitions.push({ partition: p.partition, errorCode: local.errorCode, highWatermark: -1, records: emptyRecords });
        continue;
      }
      const budget = Math.min(p.maxBytes, k.broker.config.maxFetchBytes, Math.max(0, req.maxBytes - bytes), k.fetchMemory.freeBytes);
      // Held while the partition is read (other fetches see it spent), then what was read.
      k.held.add(budget);
      let answer: Omit<FetchPartitionResponse, 'partition'>;
      try {
        answer = await readPartition(k, local, p.fetchOffset, bytes > 0 && budget === 0 ? 0 : Math.max(budget, 1), magic);
      } finally {
        k.held.release(budget);
      }
      k.held.add(answer.records.length);
      if (answer.errorCode === KafkaErrorCode.None && answer.records.length === 0) logs.push(local);
      bytes += answer.records.length;
      partitions.push({ partition: p.partition, ...answer });
    }
    topics.push({ topic: t.topic, partitions });
  }
  return { topics, bytes, logs };
}

/**
 * One partition's answer. OFFSET_OUT_OF_RANGE below the earliest offset and past the visible end;
 * on a replicated partition an offset between the high watermark and the log end answers no
 * records (a consumer there waits for the high watermark, docs/replication.md §9.5).
 */
async function readPartition(k: KafkaContext, served: ServedLog, fetchOffset: number, maxBytes: number, magic: 0 | 1): Promise<Omit<FetchPartitionResponse, 'partition'>> {
  const log = served.log;
  try {
    const highWatermark = k.ends.highWatermark(served);
    const end = visibleEndOf(served);
    const last = served.replica !== undefined ? log.logEndOffset : end;
    if (fetchOffset < log.earliestOffset || fetchOffset > last) {
      return { errorCode: KafkaErrorCode.OffsetOutOfRange, highWatermark, records: emptyRecords };
    }
    const start = fetchOffset >= end ? end : k.ends.firstMessageAtOrAfter(served, fetchOffset);
    if (start >= end || maxBytes === 0) return { errorCode: KafkaErrorCode.None, highWatermark, records: emptyRecords };
    const paper = served.replica === undefined;
    const framed = (paper ? k.readAhead.take(log, start, maxBytes, magic, end) : undefined) ?? (await readFramed(k, log, start, maxBytes, end, magic));
    if (framed.lastOffset !== undefined) k.ends.served(served, framed.lastOffset, framed.nextOffset);
    if (paper && framed.lastOffset !== undefined && framed.nextOffset < end) {
      const next = framed.nextOffset;
      k.readAhead.prepare(log, next, maxBytes, magic, () => {
        const now = log.visibleEnd;
        const set = readScratch(log, next, maxBytes, now);
        const first = klogMessageAt(set);
        if (first.status !== 'message') return undefined; // cut or damaged: the fetch reads it
        const ahead = plainKafkaMessageSetOf(set, next, magic);
        return ahead === undefined ? undefined : { framed: ahead, end: now };
      });
    }
    k.broker.metrics.bytesOut(log.topic, framed.records.length);
    return { errorCode: KafkaErrorCode.None, highWatermark, records: framed.records };
  } catch (err) {
    k.broker.logger.error({ topic: log.topic, partition: log.partition, fetchOffset, err }, 'Kafka fetch failed');
    return { errorCode: kafkaErrorOf(err), highWatermark: -1, records: emptyRecords };
  }
}

/** Reads and re-frames the answer of a fetch of `log` at `start` (a message boundary below `end`). */
async function readFramed(k: KafkaContext, log: ServedLog['log'], start: number, maxBytes: number, end: number, magic: 0 | 1): Promise<KafkaFraming> {
  let set = readScratch(log, start, maxBytes, end);
  const first = klogMessageAt(set);
  if (first.status === 'cut' && first.size > set.length) set = log.read(start, Math.min(first.size, end - start), end);
  // The scratch buffer is read again by the next fetch: the async path gets a copy.
  const own = (): Buffer => (set.buffer === scratch.buffer ? Buffer.from(set) : set);
  return plainKafkaMessageSetOf(set, start, magic) ?? (await kafkaMessageSetOf(own(), start, magic, k.broker.config.maxFetchBytes));
}

/** Largest read that goes through {@link scratch} (1 MiB, librdkafka's default partition max bytes); larger reads get a buffer of their own. */
const scratchMaxBytes = 1024 * 1024;
/** The buffer fetches read the log into, re-framed from at once (grown to the largest read asked for, at most {@link scratchMaxBytes}). */
let scratch = Buffer.allocUnsafeSlow(64 * 1024);

/**
 * `log.read(start, maxBytes, end)` into {@link scratch}: a view of it, valid until the next call
 * (a fetch's bytes are re-framed into its response before another read), so a fetch allocates
 * no buffer for what it reads. A read of more than {@link scratchMaxBytes} is `log.read`'s own
 * buffer, so one large fetch does not keep its size allocated for the life of the broker.
 */
function readScratch(log: ServedLog['log'], start: number, maxBytes: number, end: number): Buffer {
  const bytes = Math.min(maxBytes, end - start);
  if (bytes > scratchMaxBytes) return log.read(start, maxBytes, end);
  if (scratch.length < bytes) scratch = Buffer.allocUnsafeSlow(Math.min(scratchMaxBytes, Math.max(bytes, 2 * scratch.length)));
  return scratch.subarray(0, log.readInto(scratch, start, bytes, end));
}

/**
 * Waits until the visible end of one of `logs` moves (a flush; a replicated partition's high
 * watermark, or its leadership ending), `ms` pass, or the broker or connection closes
 * (`k.broker.closing`), through the broker's one long-poll wait (`../long-poll.ts`).
 */
export function waitForFlush(k: KafkaContext, logs: readonly ServedLog[], ms: number): Promise<void> {
  return longPoll(k.broker.closing, ms, (wake) => logs.flatMap((served) => onVisibleEndMoved(served, wake)));
}
