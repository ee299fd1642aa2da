/**
 * FETCH (type 1) and MULTIFETCH (type 2), as in Kafka 0.7, with klog's optional long poll.
 *
 * ```
 * FetchRequest  => topic partition int32 offset int64 maxBytes int32 [maxWaitMs int32]
 *   maxWaitMs (klog, optional) when the offset is the log end, wait up to this many ms for
 *             data before answering empty. Absent (as from a 0.7 client): answer at once.
 * FetchResponse => errorCode int16 | body
 *   body on errorCode 0:                  messageSet (at most maxBytes, may end in a partial message)
 *   body on OffsetOutOfRange (klog):      earliest int64 | end int64
 *   body on any other error:              empty
 * MultiFetchRequest  => count int16 | count x (topic partition offset maxBytes)
 * MultiFetchResponse => errorCode int16 | count x (size int32 | FetchResponse)
 * ```
 */
import { Decoder, type Encoder, validateTopic } from '../codec.js';
import { ErrorCode, ProtocolError, type ErrorCodeValue } from '../errors.js';
import { encodeFrame, frameSizeBytes, RequestType } from '../frame.js';
import { readCount, readPartition } from './produce.js';

/** A fetch of `(topic, partition, offset, maxBytes)`. */
export interface FetchRequest {
  readonly topic: string;
  readonly partition: number;
  /** Byte offset of the first message wanted. */
  readonly offset: number;
  /** Most bytes of message set to return. */
  readonly maxBytes: number;
  /** (klog) Most ms to wait at the log end for data; absent or 0: answer at once. */
  readonly maxWaitMs?: number;
}

/** A decoded fetch response. `messages` is a view on the response buffer. */
export interface FetchResponse {
  readonly errorCode: ErrorCodeValue;
  /** The message set; empty on error. */
  readonly messages: Buffer;
  /** On OffsetOutOfRange: the partition's earliest offset. */
  readonly earliest?: number;
  /** On OffsetOutOfRange: the partition's end offset (the next offset to be written and flushed). */
  readonly end?: number;
}

function writeFetch(e: Encoder, f: FetchRequest): void {
  validateTopic(f.topic);
  e.writeString(f.topic).writeInt32(f.partition).writeInt64(f.offset).writeInt32(f.maxBytes);
}

function readFetch(d: Decoder): Omit<FetchRequest, 'maxWaitMs'> {
  const topic = d.readTopic();
  const partition = readPartition(d);
  const offset = d.readInt64();
  const maxBytes = d.readInt32();
  if (maxBytes < 0) throw new ProtocolError(ErrorCode.InvalidFetchSize, `negative fetch size ${maxBytes}`);
  return { topic, partition, offset, maxBytes };
}

/** Encodes a framed FETCH request (with the klog long-poll field when `maxWaitMs` > 0). */
export function encodeFetchRequest(f: FetchRequest): Buffer {
  return encodeFrame(RequestType.Fetch, (e) => {
    writeFetch(e, f);
    if (f.maxWaitMs !== undefined && f.maxWaitMs > 0) e.writeInt32(f.maxWaitMs);
  });
}

/** Decodes a FETCH body (after the type). @throws ProtocolError */
export function decodeFetchRequest(d: Decoder): FetchRequest {
  const f = readFetch(d);
  if (d.remaining === 0) return f;
  const maxWaitMs = d.readInt32();
  if (maxWaitMs < 0) throw new ProtocolError(ErrorCode.InvalidRequest, `negative maxWaitMs ${maxWaitMs}`);
  d.assertDone('fetch request');
  return { ...f, maxWaitMs };
}

/** Encodes a framed MULTIFETCH request. */
export function encodeMultiFetchRequest(fs: readonly FetchRequest[]): Buffer {
  return encodeFrame(RequestType.MultiFetch, (e) => {
    e.writeInt16(fs.length);
    for (const f of fs) writeFetch(e, f);
  });
}

/** Decodes a MULTIFETCH body (after the type). @throws ProtocolError */
export function decodeMultiFetchRequest(d: Decoder): FetchRequest[] {
  const count = readCount(d, 'multifetch', 1);
  const out: FetchRequest[] = [];
  for (let i = 0; i < count; i++) out.push(readFetch(d));
  d.assertDone('multifetch request');
  return out;
}

/**
 * The 6-byte frame head of a successful FETCH response whose message set of `messageSetBytes`
 * follows separately (so the set can be sent straight from the segment file).
 */
export function encodeFetchResponseHeader(messageSetBytes: number): Buffer {
  const b = Buffer.allocUnsafe(frameSizeBytes + 2);
  b.writeInt32BE(2 + messageSetBytes, 0);
  b.writeInt16BE(ErrorCode.None, 4);
  return b;
}

/** Encodes a framed FETCH error response; OffsetOutOfRange carries `earliest` and `end`. */
export function encodeFetchErrorResponse(code: ErrorCodeValue, range?: { earliest: number; end: number }): Buffer {
  return encodeFrame(code, (e) => {
    if (code === ErrorCode.OffsetOutOfRange && range) e.writeInt64(range.earliest).writeInt64(range.end);
  });
}

/** Decodes a FETCH response body given its error code. @throws ProtocolError */
export function decodeFetchResponse(errorCode: number, d: Decoder): FetchResponse {
  const code = errorCode as ErrorCodeValue;
  if (code === ErrorCode.None) return { errorCode: code, messages: d.readBytes(d.remaining) };
  if (code === ErrorCode.OffsetOutOfRange && d.remaining >= 16) {
    return { errorCode: code, messages: Buffer.alloc(0), earliest: d.readInt64(), end: d.readInt64() };
  }
  return { errorCode: code, messages: Buffer.alloc(0) };
}

/** Decodes a MULTIFETCH response body: one FetchResponse per request, in request order. */
export function decodeMultiFetchResponse(d: Decoder): FetchResponse[] {
  const out: FetchResponse[] = [];
  while (d.remaining > 0) {
    const size = d.readInt32();
    if (size < 2) throw new ProtocolError(ErrorCode.InvalidRequest, `multifetch part size ${size} is below 2`);
    const part = d.readBytes(size, 'multifetch part');
    const errorCode = part.readInt16BE(0);
    out.push(decodeFetchResponse(errorCode, new Decoder(part, 2)));
  }
  return out;
}

/** The bytes of one part of a MULTIFETCH response, header included: `size int32 | errorCode int16 | body`. */
export function encodeMultiFetchPart(r: FetchResponse): Buffer {
  if (r.errorCode === ErrorCode.None) return Buffer.concat([encodeFetchResponseHeader(r.messages.length), r.messages]);
  return encodeFetchErrorResponse(
    r.errorCode,
    r.earliest !== undefined && r.end !== undefined ? { earliest: r.earliest, end: r.end } : undefined,
  );
}

/** The frame head of a MULTIFETCH response whose parts (see encodeMultiFetchPart) total `partsBytes`. */
export function encodeMultiFetchResponseHeader(partsBytes: number): Buffer {
  return encodeFetchResponseHeader(partsBytes);
}
