/**
 * One message, as it is on disk and on the wire (docs/design.md §1, the paper §3.1):
 *
 * ```
 * Message => length magic attributes crc payload
 *   length     int32  bytes that follow this field (6 + payload bytes)
 *   magic      int8   format version, 1
 *   attributes int8   bits 0-1: compression codec (0 none, 1 gzip, 2 snappy)
 *   crc        uint32 CRC-32 (IEEE) of the payload
 *   payload    bytes  length - 6 bytes
 * ```
 */
import { bufferView } from './buffer-view.js';
import { checkCrcRange, crc32Ieee, crc32Range, crcAddon } from './crc32.js';
import { ErrorCode, ProtocolError } from './errors.js';

/** Bytes of the length field. */
export const lengthFieldBytes = 4;
/** Bytes after the length field and before the payload: magic, attributes, crc. */
export const messageHeaderBytes = 6;
/** Bytes a message takes beyond its payload (length + header): 10. */
export const messageOverheadBytes = lengthFieldBytes + messageHeaderBytes;
/** The only magic byte klog writes and accepts. */
export const currentMagic = 1;
/** Mask of the compression codec bits in `attributes`. */
export const compressionCodecMask = 0x03;

/** Compression codec numbers stored in `attributes` bits 0-1. */
export const CompressionCodec = { None: 0, Gzip: 1, Snappy: 2 } as const;

/** A decoded message; `payload` is a view on the buffer it was decoded from, not a copy. */
export interface Message {
  /** Format version (always 1). */
  readonly magic: number;
  /** Raw attributes byte. */
  readonly attributes: number;
  /** CRC-32 (IEEE) of the payload, as stored. */
  readonly crc: number;
  /** The message body. */
  readonly payload: Buffer;
}

/** Bytes one message with a payload of `payloadBytes` takes on disk. */
export function messageSizeInBytes(payloadBytes: number): number {
  return messageOverheadBytes + payloadBytes;
}

/**
 * Writes one message with `payload` into `target` at `position`.
 * @param computeCrc false leaves the crc field unwritten, for a writer of many messages that
 *   fills them all with one {@link writeMessageCrcs} call afterwards
 * @returns the position just past the message.
 * @throws RangeError when `target` is too small.
 */
export function writeMessage(target: Buffer, position: number, payload: Uint8Array, attributes = 0, computeCrc = true): number {
  const end = position + messageOverheadBytes + payload.length;
  if (!(position >= 0 && end <= target.length)) {
    throw new RangeError(`message of ${end - position} bytes does not fit at position ${position} of ${target.length}`);
  }
  const length = messageHeaderBytes + payload.length;
  target[position] = length >>> 24;
  target[position + 1] = length >>> 16;
  target[position + 2] = length >>> 8;
  target[position + 3] = length;
  target[position + 4] = currentMagic;
  target[position + 5] = attributes;
  if (computeCrc) writeCrc(target, position, crc32Ieee(payload));
  target.set(payload, position + messageOverheadBytes);
  return end;
}

function writeCrc(target: Uint8Array, position: number, crc: number): void {
  target[position + 6] = crc >>> 24;
  target[position + 7] = crc >>> 16;
  target[position + 8] = crc >>> 8;
  target[position + 9] = crc;
}

/**
 * Stores in each message of `buf[start, end)` the CRC of its payload: one call into the CRC
 * addon for them all where it is loaded (crc32.ts), one CRC per message otherwise.
 * @throws RangeError when `buf[start, end)` is not a run of whole messages (lengths checked only;
 *   the messages before the fault are written) or not a range of `buf`
 */
export function writeMessageCrcs(buf: Buffer, start: number, end: number): void {
  if (crcAddon !== undefined) return crcAddon.writeCrcs(buf, start, end);
  checkCrcRange(buf, start, end);
  for (let pos = start; pos < end; ) {
    const size = wholeMessageSize(buf, pos, end);
    writeCrc(buf, pos, crc32Range(buf, pos + messageOverheadBytes, pos + size));
    pos += size;
  }
}

/**
 * The first message of `buf[start, end)` whose crc field is not its payload's CRC, each message
 * checked on its own: one call into the CRC addon where it is loaded (crc32.ts), one CRC per
 * message otherwise. It stops there: the lengths of the messages after it are not looked at.
 * @returns its position in `buf`, or -1 when every message's CRC is right
 * @throws RangeError when `buf[start, end)` is not a run of whole messages (lengths checked only)
 *   or not a range of `buf`
 */
export function firstBadMessageCrc(buf: Buffer, start: number, end: number): number {
  if (crcAddon !== undefined) return crcAddon.firstBadCrc(buf, start, end);
  checkCrcRange(buf, start, end);
  for (let pos = start; pos < end; ) {
    const size = wholeMessageSize(buf, pos, end);
    if (crc32Range(buf, pos + messageOverheadBytes, pos + size) !== buf.readUInt32BE(pos + 6)) return pos;
    pos += size;
  }
  return -1;
}

/** Bytes of the whole message at `pos` of `buf[, end)`, length field included. @throws RangeError when there is none */
function wholeMessageSize(buf: Buffer, pos: number, end: number): number {
  const length = end - pos >= messageOverheadBytes ? buf.readInt32BE(pos) : 0;
  if (length < messageHeaderBytes || length > end - pos - lengthFieldBytes) throw new RangeError(`not a run of whole messages at byte ${pos}`);
  return lengthFieldBytes + length;
}

/** Encodes one message into a new buffer of `10 + payload.length` bytes. */
export function encodeMessage(payload: Uint8Array, attributes = 0): Buffer {
  const buf = Buffer.allocUnsafe(messageSizeInBytes(payload.length));
  writeMessage(buf, 0, payload, attributes);
  return buf;
}

/** What {@link checkMessageAt} found at a position. */
export type MessageCheck =
  /** A whole valid message of `size` bytes (length field included). */
  | { readonly status: 'valid'; readonly size: number }
  /** The bytes end before the message does: fewer than 4 bytes, or fewer than `4 + length`. */
  | { readonly status: 'partial'; readonly size?: number }
  /**
   * The bytes cannot be a message: bad length or magic, a bad CRC (`badCrc`: a whole message
   * with a plausible header, damaged), or (`tooLarge`) over the size limit.
   */
  | { readonly status: 'invalid'; readonly reason: string; readonly tooLarge?: boolean; readonly badCrc?: boolean };

/**
 * Checks the message that starts at `position` of `buf[0, end)` without allocating: length,
 * magic and, when `verifyCrc`, the CRC. A length below 6, a length above `maxMessageBytes + 6`
 * when given, or an unknown magic byte is invalid even when the bytes are cut short.
 */
export function checkMessageAt(
  buf: Buffer,
  position: number,
  end = buf.length,
  verifyCrc = true,
  maxMessageBytes?: number,
): MessageCheck {
  end = Math.min(end, buf.length);
  if (end - position < lengthFieldBytes) return { status: 'partial' };
  const length = buf.readInt32BE(position);
  if (length < messageHeaderBytes) {
    return { status: 'invalid', reason: `length ${length} is below the ${messageHeaderBytes}-byte header` };
  }
  if (maxMessageBytes !== undefined && length - messageHeaderBytes > maxMessageBytes) {
    return {
      status: 'invalid',
      reason: `payload of ${length - messageHeaderBytes} bytes is over max.message.bytes ${maxMessageBytes}`,
      tooLarge: true,
    };
  }
  if (end - position >= lengthFieldBytes + 1) {
    const magic = buf[position + lengthFieldBytes];
    if (magic !== currentMagic) return { status: 'invalid', reason: `magic byte ${magic}, expected ${currentMagic}` };
  }
  const size = lengthFieldBytes + length;
  if (end - position < size) return { status: 'partial', size };
  if (verifyCrc) {
    const stored = buf.readUInt32BE(position + 6);
    const actual = crc32Range(buf, position + messageOverheadBytes, position + size);
    if (stored !== actual) {
      return { status: 'invalid', reason: `CRC mismatch: stored ${stored.toString(16)}, computed ${actual.toString(16)}`, badCrc: true };
    }
  }
  return { status: 'valid', size };
}

/**
 * Decodes the whole, valid message at `position` (a view, not a copy).
 * @throws ProtocolError (InvalidMessage) when the bytes there are not one whole valid message.
 */
export function decodeMessageAt(buf: Buffer, position = 0, end = buf.length): Message {
  const check = checkMessageAt(buf, position, end);
  if (check.status !== 'valid') {
    const why = check.status === 'partial' ? 'message is truncated' : check.reason;
    throw new ProtocolError(ErrorCode.InvalidMessage, `invalid message at position ${position}: ${why}`);
  }
  return {
    magic: buf[position + 4]!,
    attributes: buf[position + 5]!,
    crc: buf.readUInt32BE(position + 6),
    payload: bufferView(buf, position + messageOverheadBytes, position + check.size),
  };
}
