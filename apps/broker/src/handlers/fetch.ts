/**
 * FETCH and MULTIFETCH (the paper §3.1, SPEC §3): the bytes of the log from `offset`, at most
 * `maxBytes`, never past the flushed end. The first message of the answer is checked so that
 * an offset that is not a message boundary is reported (InvalidMessageOffset), never served as
 * data. A FETCH at the log end with klog's `maxWaitMs` waits for the next flush (long poll).
 */
import {
  ErrorCode,
  errorCodeName,
  checkMessageAt,
  encodeFetchErrorResponse,
  encodeFetchResponseHeader,
  encodeMultiFetchPart,
  encodeMultiFetchResponseHeader,
  type FetchRequest,
  type FetchResponse,
} from '@klog/protocol';
import { OffsetOutOfRangeError, type Log } from '@klog/storage';
import type { BrokerContext } from './context.js';
import { errorCodeOf } from './produce.js';

/**
 * Reads one fetch's answer without waiting.
 * @returns the message set (a fresh buffer) or the error to answer with; never throws
 */
export function readFetch(ctx: BrokerContext, f: FetchRequest): FetchResponse {
  const empty = Buffer.alloc(0);
  if (f.maxBytes < 0 || f.maxBytes > ctx.config.maxFetchBytes) return { errorCode: ErrorCode.InvalidFetchSize, messages: empty };
  const count = ctx.logs.partitionCount(f.topic);
  if (count === undefined) {
    // A topic nobody has produced to yet is an empty log at offset 0.
    if (f.offset === 0) return { errorCode: ErrorCode.None, messages: empty };
    return { errorCode: ErrorCode.OffsetOutOfRange, messages: empty, earliest: 0, end: 0 };
  }
  if (f.partition >= count) return { errorCode: ErrorCode.WrongPartition, messages: empty };
  const log = ctx.logs.getOrCreateLog(f.topic, f.partition);
  try {
    const messages = log.read(f.offset, f.maxBytes);
    if (!startsAtMessage(messages, f.maxBytes)) return { errorCode: ErrorCode.InvalidMessageOffset, messages: empty };
    ctx.metrics.bytesOut += messages.length;
    return { errorCode: ErrorCode.None, messages };
  } catch (err) {
    if (err instanceof OffsetOutOfRangeError) {
      return { errorCode: ErrorCode.OffsetOutOfRange, messages: empty, earliest: err.earliest, end: err.end };
    }
    ctx.logger.error({ topic: f.topic, partition: f.partition, offset: f.offset, err }, 'fetch failed');
    return { errorCode: errorCodeOf(err), messages: empty };
  }
}

/**
 * True when `bytes` (read from a message boundary, or not) begins with a valid message, or with
 * the head of a message too large for `maxBytes`. Segments hold whole messages, so a partial
 * first message in a read shorter than `maxBytes` means the offset was not a boundary.
 */
function startsAtMessage(bytes: Buffer, maxBytes: number): boolean {
  if (bytes.length === 0) return true;
  const check = checkMessageAt(bytes, 0);
  if (check.status === 'valid') return true;
  return check.status === 'partial' && bytes.length === maxBytes;
}

/**
 * Waits until the partition has flushed data past `offset`, `ms` have passed, or the broker
 * closes. A partition that does not exist yet is looked for every 100 ms until it does.
 */
async function waitForData(ctx: BrokerContext, f: FetchRequest, ms: number): Promise<void> {
  const signal = AbortSignal.any([AbortSignal.timeout(ms), ctx.closing]);
  const aborted = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
  let log: Log | undefined;
  while (!signal.aborted && (log = existingLog(ctx, f)) === undefined) {
    await Promise.race([aborted, new Promise((resolve) => setTimeout(resolve, 100))]);
  }
  if (log === undefined || log.visibleEnd > f.offset) return;
  let unsubscribe = (): void => {};
  const flushed = new Promise<void>((resolve) => {
    unsubscribe = log.onFlush((visibleEnd) => {
      if (visibleEnd > f.offset) resolve();
    });
  });
  await Promise.race([aborted, flushed]);
  unsubscribe();
}

function existingLog(ctx: BrokerContext, f: FetchRequest): Log | undefined {
  const count = ctx.logs.partitionCount(f.topic);
  return count !== undefined && f.partition < count ? ctx.logs.getLog(f.topic, f.partition) : undefined;
}

/** FETCH: the framed response as buffers to write in order (header, then the message set). */
export async function handleFetch(ctx: BrokerContext, f: FetchRequest): Promise<Buffer[]> {
  let r = readFetch(ctx, f);
  if (r.errorCode === ErrorCode.None && r.messages.length === 0 && (f.maxWaitMs ?? 0) > 0) {
    await waitForData(ctx, f, f.maxWaitMs!);
    r = readFetch(ctx, f);
  }
  return fetchResponseBuffers(ctx, r);
}

function fetchResponseBuffers(ctx: BrokerContext, r: FetchResponse): Buffer[] {
  if (r.errorCode !== ErrorCode.None) {
    ctx.metrics.error(errorCodeName(r.errorCode));
    return [encodeFetchErrorResponse(r.errorCode, r.earliest !== undefined ? { earliest: r.earliest, end: r.end ?? 0 } : undefined)];
  }
  return [encodeFetchResponseHeader(r.messages.length), r.messages];
}

/** MULTIFETCH: one part per fetch, in request order; no waiting. */
export function handleMultiFetch(ctx: BrokerContext, fetches: readonly FetchRequest[]): Buffer[] {
  const parts = fetches.map((f) => encodeMultiFetchPart(readFetch(ctx, f)));
  const total = parts.reduce((n, p) => n + p.length, 0);
  return [encodeMultiFetchResponseHeader(total), ...parts];
}

