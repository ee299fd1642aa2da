/**
 * FETCH and MULTIFETCH (the paper §3.1, docs/design.md §3): the bytes of the log from `offset`, at most
 * `maxBytes`, never past the flushed end (on a replicated partition: its leader only, never past
 * the high watermark, docs/replication.md §9.5). The first message of the answer is read and checked
 * so that an offset that is not a message boundary is reported (InvalidMessageOffset), never
 * served as data. The rest is not read here: the answer carries a pinned {@link FileRegion}
 * of the segment file, which the connection sends after the response header with sendfile(2)
 * or the read-and-write fallback (docs/design.md §3 read path). A FETCH at the log end with klog's
 * `maxWaitMs` waits for the next flush (long poll); on a replicated partition, for the high
 * watermark to pass the offset.
 */
import {
  ErrorCode,
  errorCodeName,
  checkMessageAt,
  encodeErrorResponse,
  encodeFetchErrorResponse,
  encodeFetchResponseHeader,
  encodeMultiFetchResponseHeader,
  type ErrorCodeValue,
  type FetchRequest,
} from '@klog/protocol';
import { FileRegion, LogOffsetOutOfRangeError, inlineRegionMaxBytes, type Log } from '@klog/storage';
import type { BrokerContext, ResponsePart } from './context.js';
import { errorCodeOf } from './produce.js';
import { longPoll, type Unsubscribe } from '../long-poll.js';

/** One fetch's answer: the region to send, or the error to answer with. */
export type FetchAnswer =
  | { readonly errorCode: typeof ErrorCode.None; readonly region: FileRegion }
  | { readonly errorCode: ErrorCodeValue; readonly region?: undefined; readonly earliest?: number; readonly end?: number };

/**
 * How many bytes of a region larger than {@link inlineRegionMaxBytes} are read first to check
 * its first message; more only for a larger first message. A region the connection copies into
 * its response (at most {@link inlineRegionMaxBytes}) is read whole here, and the connection
 * sends those same bytes ({@link FileRegion.read} keeps them): one read of the file per fetch.
 */
const firstReadBytes = 4096;

/**
 * Finds one fetch's answer without waiting. On success the region is pinned: whoever gets it
 * must release it (the connection does, once sent or dropped).
 * @returns the region (possibly empty) or the error to answer with; never throws
 */
export function readFetch(ctx: BrokerContext, f: FetchRequest): FetchAnswer {
  if (f.maxBytes < 0 || f.maxBytes > ctx.config.maxFetchBytes) return { errorCode: ErrorCode.InvalidFetchSize };
  if (ctx.replicas.isReplicatedTopic(f.topic)) return readReplicated(ctx, f);
  const count = ctx.logs.partitionCount(f.topic);
  if (count === undefined) {
    // A topic nobody has produced to yet is an empty log at offset 0.
    if (f.offset === 0) return { errorCode: ErrorCode.None, region: FileRegion.empty(0) };
    return { errorCode: ErrorCode.OffsetOutOfRange, earliest: 0, end: 0 };
  }
  const log = ctx.logs.getLog(f.topic, f.partition);
  if (log === undefined) return { errorCode: ErrorCode.WrongPartition };
  return readLog(ctx, f, log, log.visibleEnd);
}

/**
 * A consumer's FETCH of a replicated partition (docs/replication.md §9.5): the leader only
 * (NotLeaderForPartition elsewhere), within `[earliest, highWatermark)`; an offset between the
 * high watermark and the log end answers an empty set, one past the log end OffsetOutOfRange.
 */
function readReplicated(ctx: BrokerContext, f: FetchRequest): FetchAnswer {
  const p = ctx.replicas.get(f.topic, f.partition);
  const log = p?.log;
  if (p === undefined || !p.isLeader || log === undefined) return { errorCode: ErrorCode.NotLeaderForPartition };
  const hw = p.highWatermark;
  if (f.offset >= hw && f.offset <= log.logEndOffset && f.offset >= log.earliestOffset) {
    return { errorCode: ErrorCode.None, region: FileRegion.empty(f.offset) };
  }
  if (f.offset > log.logEndOffset) return { errorCode: ErrorCode.OffsetOutOfRange, earliest: log.earliestOffset, end: hw };
  return readLog(ctx, f, log, hw);
}

/** Reads `f` from `log` up to `upTo` (the flushed end, or a high watermark) and checks its first message. */
function readLog(ctx: BrokerContext, f: FetchRequest, log: Log, upTo: number): FetchAnswer {
  let region: FileRegion | undefined;
  try {
    region = log.readRange(f.offset, f.maxBytes, upTo);
    const bad = firstMessageError(region, f.maxBytes);
    if (bad !== undefined) {
      region.release();
      return { errorCode: bad };
    }
    ctx.metrics.bytesOut(f.topic, region.length);
    return { errorCode: ErrorCode.None, region };
  } catch (err) {
    region?.release();
    if (err instanceof LogOffsetOutOfRangeError) return { errorCode: ErrorCode.OffsetOutOfRange, earliest: err.earliest, end: err.end };
    ctx.logger.error({ topic: f.topic, partition: f.partition, offset: f.offset, err }, 'fetch failed');
    return { errorCode: errorCodeOf(err) };
  }
}

/**
 * Checks that the region (read from a message boundary, or not) begins with a valid message, or
 * with the head of a message too large for `maxBytes`. Segments hold whole messages, so a
 * partial first message in a region shorter than `maxBytes` means the offset was not a
 * boundary. Reads a small region whole, of a larger one only the first message (its first 4 KiB,
 * then the rest of it if larger).
 * @returns undefined when it does; InvalidMessage for a whole message whose CRC is wrong (damage
 *   on disk: never served); InvalidMessageOffset for anything else (not a message boundary)
 */
function firstMessageError(region: FileRegion, maxBytes: number): ErrorCodeValue | undefined {
  if (region.length === 0) return undefined;
  let head = region.read(0, region.length <= inlineRegionMaxBytes ? region.length : firstReadBytes);
  let check = checkMessageAt(head, 0);
  if (check.status === 'partial' && check.size !== undefined && head.length < region.length && check.size > head.length) {
    head = region.read(0, check.size);
    check = checkMessageAt(head, 0);
  }
  if (check.status === 'valid' || (check.status === 'partial' && region.length === maxBytes)) return undefined;
  return check.status === 'invalid' && check.badCrc === true ? ErrorCode.InvalidMessage : ErrorCode.InvalidMessageOffset;
}

/**
 * Waits until the partition has flushed data past `offset`, `ms` have passed, or the broker or
 * the request's connection closes (`ctx.closing`). A partition that does not exist yet is looked
 * for every 100 ms until it does. Counted in `klog_long_polls_waiting` while it waits.
 */
async function waitForData(ctx: BrokerContext, f: FetchRequest, ms: number): Promise<void> {
  ctx.metrics.longPollWaiting(1);
  try {
    await waitUntilFlushedPast(ctx, f, ms);
  } finally {
    ctx.metrics.longPollWaiting(-1);
  }
}

function waitUntilFlushedPast(ctx: BrokerContext, f: FetchRequest, ms: number): Promise<void> {
  return longPoll(ctx.closing, ms, (wake) => {
    const replicated = ctx.replicas.get(f.topic, f.partition);
    if (replicated !== undefined) {
      // A replicated partition: the high watermark passing the offset, or leading ending (docs/replication.md §9.5).
      if (!replicated.isLeader || replicated.highWatermark > f.offset) {
        wake();
        return [];
      }
      return [replicated.onHighWatermark((hw) => hw > f.offset && wake()), replicated.onAppend(() => !replicated.isLeader && wake())];
    }
    let offFlush: Unsubscribe = () => {};
    const watch = (log: Log): void => {
      if (log.visibleEnd > f.offset) wake();
      else offFlush = log.onFlush((visibleEnd) => visibleEnd > f.offset && wake());
    };
    const log = existingLog(ctx, f);
    if (log !== undefined) {
      watch(log);
      return [() => offFlush()];
    }
    const lookFor = setInterval(() => {
      const created = existingLog(ctx, f);
      if (created === undefined) return;
      clearInterval(lookFor);
      watch(created);
    }, 100);
    return [() => clearInterval(lookFor), () => offFlush()];
  });
}

function existingLog(ctx: BrokerContext, f: FetchRequest): Log | undefined {
  const count = ctx.logs.partitionCount(f.topic);
  return count !== undefined && f.partition < count ? ctx.logs.getLog(f.topic, f.partition) : undefined;
}

/** FETCH: the framed response as parts to send in order (header, then the segment region). */
export async function handleFetch(ctx: BrokerContext, f: FetchRequest): Promise<ResponsePart[]> {
  let r = readFetch(ctx, f);
  if (r.errorCode === ErrorCode.None && r.region!.length === 0 && (f.maxWaitMs ?? 0) > 0) {
    await waitForData(ctx, f, f.maxWaitMs!);
    r = readFetch(ctx, f);
  }
  return fetchParts(ctx, r);
}

/** `int32 size | int16 errorCode | messageSet` as a header buffer and the region, or an error frame. */
function fetchParts(ctx: BrokerContext, r: FetchAnswer): ResponsePart[] {
  if (r.region === undefined) {
    ctx.metrics.error(errorCodeName(r.errorCode));
    return [encodeFetchErrorResponse(r.errorCode, r.earliest !== undefined ? { earliest: r.earliest, end: r.end ?? 0 } : undefined)];
  }
  return r.region.length === 0 ? [encodeFetchResponseHeader(0)] : [encodeFetchResponseHeader(r.region.length), r.region];
}

/** Most bytes after the size field of one response frame: its `int32 size` (docs/format.md §5). */
export const maxResponseFrameBytes = 0x7fffffff;
/** Most bytes of one MULTIFETCH part besides its message set: `size int32 | errorCode int16 | earliest int64 | end int64`. */
const multiFetchPartOverheadBytes = 4 + 2 + 16;

/**
 * MULTIFETCH: one part per fetch (each framed as a FETCH response), in request order; no
 * waiting. The fetches' `maxBytes` together (with each part's framing) must fit one response
 * frame, 2^31 − 1 bytes: that is checked before any segment is pinned, and a request past it is
 * answered InvalidFetchSize as a whole (docs/format.md §9). The regions pinned are released if
 * building the response fails.
 */
export function handleMultiFetch(ctx: BrokerContext, fetches: readonly FetchRequest[]): ResponsePart[] {
  let most = 2;
  for (const f of fetches) most += multiFetchPartOverheadBytes + Math.max(0, f.maxBytes);
  if (most > maxResponseFrameBytes) {
    ctx.metrics.error(errorCodeName(ErrorCode.InvalidFetchSize));
    ctx.logger.warn({ fetches: fetches.length, maxBytes: most, limit: maxResponseFrameBytes }, 'multifetch asks for more than one response can carry');
    return [encodeErrorResponse(ErrorCode.InvalidFetchSize)];
  }
  const parts: ResponsePart[] = [];
  try {
    for (const f of fetches) parts.push(...fetchParts(ctx, readFetch(ctx, f)));
    const total = parts.reduce((n, p) => n + p.length, 0);
    return [encodeMultiFetchResponseHeader(total), ...parts];
  } catch (err) {
    for (const p of parts) if (!Buffer.isBuffer(p)) p.release();
    throw err;
  }
}
