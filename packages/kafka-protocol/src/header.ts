/**
 * Request and response headers (Kafka's request header v1, response header v0), inside the
 * frame every Kafka request and response has:
 *
 * ```
 * Frame          => size int32 | bytes        size counts the bytes after it
 * RequestHeader  => api_key int16 api_version int16 correlation_id int32 client_id nullable_string
 * ResponseHeader => correlation_id int32
 * ```
 *
 * A flexible request (ApiVersions v3) has a tagged-field section after client_id; the header's
 * first four fields are read the same way, which is all that is needed to refuse it.
 */
import { KafkaReader, KafkaWriter } from './codec.js';

/** A decoded request header and a reader over the body that follows it. */
export interface RequestHeader {
  readonly apiKey: number;
  readonly apiVersion: number;
  readonly correlationId: number;
  readonly clientId: string | null;
}

/**
 * Reads the request header at the start of a frame (the bytes after the size field).
 * @returns the header and a reader positioned at the body
 * @throws KafkaProtocolError (InvalidRequest) when the frame is shorter than a header
 */
export function decodeRequestHeader(frame: Buffer): { header: RequestHeader; body: KafkaReader } {
  const r = new KafkaReader(frame);
  const apiKey = r.int16('api_key');
  const apiVersion = r.int16('api_version');
  const correlationId = r.int32('correlation_id');
  const clientId = r.nullableString('client_id');
  return { header: { apiKey, apiVersion, correlationId, clientId }, body: r };
}

/** Writes a request frame (size, header v1, then what `writeBody` writes); for clients and tests. */
export function encodeRequest(header: RequestHeader, writeBody: (w: KafkaWriter) => void): Buffer {
  const w = new KafkaWriter(64);
  w.int32(0).int16(header.apiKey).int16(header.apiVersion).int32(header.correlationId).string(header.clientId);
  writeBody(w);
  return w.patchInt32(0, w.length - 4).toBuffer();
}

/**
 * Starts a response frame: a writer holding the size placeholder and the correlation id;
 * {@link finishResponse} fills in the size.
 */
export function startResponse(correlationId: number, initialBytes = 64): KafkaWriter {
  return new KafkaWriter(initialBytes).int32(0).int32(correlationId);
}

/**
 * The frame of a writer begun with {@link startResponse}, its size filled in.
 * @param laterBytes bytes of the frame sent after the writer's (records sent as they are)
 */
export function finishResponse(w: KafkaWriter, laterBytes = 0): Buffer {
  return w.patchInt32(0, w.length - 4 + laterBytes).toBuffer();
}
