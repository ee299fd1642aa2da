/**
 * Compressed message sets (SPEC §1, as Kafka 0.7): a producer may send a message set as one
 * *wrapper* message whose payload is the compressed bytes of the inner message set and whose
 * `attributes` bits 0-1 name the codec. Brokers store and serve the wrapper as it is; consumers
 * decompress it and hand out the inner messages (docs/format.md §2b).
 *
 * ```
 * Wrapper => length magic attributes crc payload
 *   attributes   codec in bits 0-1 (1 gzip); bit 2 (metadata header) is never set on a wrapper
 *   crc          CRC-32 of the compressed payload
 *   payload      gzip(inner message set)
 * InnerSet => [Message]   whole, valid, uncompressed messages (each may carry a metadata header)
 * ```
 *
 * klog implements gzip (codec 1) with node:zlib. Snappy (codec 2) is reserved and not
 * implemented: a reader refuses it as an invalid message.
 */
import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import { ErrorCode, ProtocolError } from './errors.js';
import { hasHeaderAttribute } from './message-header.js';
import { CompressionCodec, compressionCodecMask, encodeMessage, type Message } from './message.js';

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

/** Compression a producer can apply to its message sets. */
export type CompressionType = 'none' | 'gzip';

/** The codec number (attributes bits 0-1) of a compression type. */
export function compressionCodecOf(type: CompressionType): number {
  if (type === 'none') return CompressionCodec.None;
  if (type === 'gzip') return CompressionCodec.Gzip;
  throw new RangeError(`compression ${String(type)} must be 'none' or 'gzip'`);
}

/** The codec of a message: `attributes` bits 0-1. */
export function messageCodec(message: Pick<Message, 'attributes'>): number {
  return message.attributes & compressionCodecMask;
}

/**
 * Wraps a message set into one gzip wrapper message (a message set of one message), off the
 * event loop (zlib's thread pool).
 * @param innerSet a whole message set of uncompressed messages
 */
export async function gzipMessageSet(innerSet: Uint8Array): Promise<Buffer> {
  return encodeMessage(await gzipAsync(innerSet), CompressionCodec.Gzip);
}

/**
 * Decompresses a wrapper's payload, producing at most `maxBytes` bytes (the guard against
 * decompression bombs).
 * @returns the inner message set, or `undefined` when it is larger than `maxBytes`
 * @throws ProtocolError (InvalidMessage) for a codec klog does not implement (snappy, 3), a
 *   metadata bit on the wrapper, or a payload that is not valid gzip
 */
export async function decompressWrapper(wrapper: Pick<Message, 'attributes' | 'payload'>, maxBytes: number): Promise<Buffer | undefined> {
  const codec = messageCodec(wrapper);
  if (codec !== CompressionCodec.Gzip) {
    throw new ProtocolError(ErrorCode.InvalidMessage, `compression codec ${codec}${codec === CompressionCodec.Snappy ? ' (snappy)' : ''} is not supported`);
  }
  if ((wrapper.attributes & hasHeaderAttribute) !== 0) {
    throw new ProtocolError(ErrorCode.InvalidMessage, 'a compressed message may not carry a metadata header (attributes bit 2)');
  }
  try {
    return await gunzipAsync(wrapper.payload, { maxOutputLength: Math.max(1, maxBytes) });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') return undefined;
    throw new ProtocolError(ErrorCode.InvalidMessage, `compressed payload does not decompress: ${(e as Error).message}`);
  }
}
