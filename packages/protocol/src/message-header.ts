/**
 * (klog, docs/design.md §1) Message metadata: a producer may put a key, the creation time and the
 * producing host in a message, so that mirroring keeps key partitioning and the audit can count
 * messages by creation time. A message that carries metadata sets `attributes` bit 2 and its
 * payload starts with a header; the application's bytes (the value) follow it. The CRC covers
 * the whole payload, header included. A message without bit 2 (every plain magic-1 message) has
 * no metadata and its whole payload is the value.
 *
 * ```
 * payload        => headerBytes uint16 | field* | value
 *   headerBytes     bytes of the fields that follow (not counting itself)
 *   field        => tag uint8 | length uint16 | bytes
 *     tag 1 key        the key bytes
 *     tag 2 timestamp  int64 BE, ms since the epoch (length 8)
 *     tag 3 host       UTF-8 host name
 *   other tags are skipped, so later fields can be added without breaking readers
 * ```
 */
import { ErrorCode, ProtocolError } from './errors.js';
import { crc32Range } from './crc32.js';
import { currentMagic, messageOverheadBytes, writeMessageCrcs, type Message } from './message.js';

/** `attributes` bit that marks a payload starting with a metadata header. */
export const hasHeaderAttribute = 0x04;
/** Largest key, host or header in bytes (uint16 lengths). */
export const maxHeaderFieldBytes = 0xffff;

/** Tags of the header's fields (the layout above). */
export const headerTagKey = 1;
export const headerTagTimestamp = 2;
export const headerTagHost = 3;

/** Metadata of one message; every field is optional. */
export interface MessageHeader {
  /** The key the producer partitioned by. */
  readonly key?: Buffer;
  /** Creation time, ms since the epoch. */
  readonly timestamp?: number;
  /** The host that created the message. */
  readonly host?: string;
}

/** A value to send, with optional metadata. */
export interface MessageEntry {
  readonly value: Uint8Array;
  readonly header?: MessageHeader;
}

function headerFieldsBytes(h: MessageHeader): number {
  let n = 0;
  if (h.key !== undefined) n += 3 + h.key.length;
  if (h.timestamp !== undefined) n += 3 + 8;
  if (h.host !== undefined) n += 3 + Buffer.byteLength(h.host, 'utf8');
  return n;
}

function isEmpty(h: MessageHeader | undefined): h is undefined {
  return h === undefined || (h.key === undefined && h.timestamp === undefined && h.host === undefined);
}

/**
 * Bytes one message with this value and header takes in a message set (length field included).
 * @throws ProtocolError (InvalidMessage) when the key, host or header is over 65535 bytes
 */
export function entrySizeInBytes(e: MessageEntry): number {
  if (isEmpty(e.header)) return messageOverheadBytes + e.value.length;
  const fields = headerFieldsBytes(e.header);
  if (fields > maxHeaderFieldBytes) {
    throw new ProtocolError(ErrorCode.InvalidMessage, `message header of ${fields} bytes is over ${maxHeaderFieldBytes}`);
  }
  return messageOverheadBytes + 2 + fields + e.value.length;
}

/**
 * Encodes values with optional metadata as one message set in one buffer: each payload is
 * written straight into the set, then the CRCs of all computed in place. A message whose header is
 * absent or empty is a plain message.
 * @param attributes attributes of every message (compression codec bits); bit 2 is set per message as needed
 * @throws ProtocolError (InvalidMessage) for a header over 65535 bytes
 */
export function encodeMessageSetWithHeaders(entries: readonly MessageEntry[], attributes = 0): Buffer {
  let size = 0;
  for (const e of entries) size += entrySizeInBytes(e);
  const buf = Buffer.allocUnsafe(size);
  let pos = 0;
  for (const e of entries) pos = writeMessageWithHeader(buf, pos, e.value, e.header, attributes, false);
  writeMessageCrcs(buf, 0, size);
  return buf;
}

/**
 * Writes one message with `value` and, when `header` is given and not empty, its metadata
 * header (attributes bit 2) into `target` at `position`: the payload goes straight into
 * `target` and its CRC is computed there. Takes {@link entrySizeInBytes} bytes.
 * @param attributes compression codec bits; bit 2 is set or cleared here
 * @param computeCrc false leaves the crc field unwritten, for a writer of many messages that
 *   fills them all with one `writeMessageCrcs` call afterwards
 * @returns the position just past the message
 * @throws RangeError when `target` is too small; ProtocolError (InvalidMessage) for a header over 65535 bytes
 */
export function writeMessageWithHeader(
  target: Buffer,
  position: number,
  value: Uint8Array,
  header: MessageHeader | undefined,
  attributes = 0,
  computeCrc = true,
): number {
  const buf = target;
  const start = position;
  const withHeader = !isEmpty(header);
  let pos = start + messageOverheadBytes;
  const payloadStart = pos;
  if (withHeader) {
    const fields = headerFieldsBytes(header);
    if (fields > maxHeaderFieldBytes) {
      throw new ProtocolError(ErrorCode.InvalidMessage, `message header of ${fields} bytes is over ${maxHeaderFieldBytes}`);
    }
    pos = buf.writeUInt16BE(fields, pos);
    if (header.key !== undefined) pos = writeField(buf, pos, headerTagKey, header.key);
    if (header.timestamp !== undefined) {
      pos = buf.writeUInt8(headerTagTimestamp, pos);
      pos = buf.writeUInt16BE(8, pos);
      pos = buf.writeBigInt64BE(BigInt(Math.trunc(header.timestamp)), pos);
    }
    if (header.host !== undefined) pos = writeField(buf, pos, headerTagHost, Buffer.from(header.host, 'utf8'));
  }
  if (pos + value.length > buf.length) throw new RangeError(`message of ${pos + value.length - start} bytes does not fit at position ${start} of ${buf.length}`);
  buf.set(value, pos);
  pos += value.length;
  buf.writeInt32BE(pos - start - 4, start);
  buf[start + 4] = currentMagic;
  buf[start + 5] = (attributes & ~hasHeaderAttribute & 0xff) | (withHeader ? hasHeaderAttribute : 0);
  if (computeCrc) buf.writeUInt32BE(crc32Range(buf, payloadStart, pos), start + 6);
  return pos;
}

function writeField(buf: Buffer, pos: number, tag: number, bytes: Uint8Array): number {
  pos = buf.writeUInt8(tag, pos);
  pos = buf.writeUInt16BE(bytes.length, pos);
  buf.set(bytes, pos);
  return pos + bytes.length;
}

/**
 * Where the metadata of one message lies in the bytes that hold it, as {@link scanMessageHeader}
 * fills it in place (one object reused over a whole message set, so reading a set allocates
 * nothing per message). Positions are in the buffer scanned.
 */
export interface MessageHeaderSpan {
  /** The key is bytes [keyStart, keyEnd); keyStart is -1 when there is no key. */
  keyStart: number;
  keyEnd: number;
  /** Creation time, ms since the epoch, or -1 for none (the header keeps only times ≥ 0 in practice, but any safe integer reads back). */
  timestamp: number;
  /** Whether a timestamp field was there (a timestamp of -1 is still one). */
  hasTimestamp: boolean;
  /** The host is bytes [hostStart, hostEnd) as UTF-8; hostStart is -1 when there is no host. */
  hostStart: number;
  hostEnd: number;
  /** Where the value starts (it runs to the end of the payload). */
  valueStart: number;
}

/** A {@link MessageHeaderSpan} to pass to {@link scanMessageHeader}. */
export function newMessageHeaderSpan(): MessageHeaderSpan {
  return { keyStart: -1, keyEnd: -1, timestamp: -1, hasTimestamp: false, hostStart: -1, hostEnd: -1, valueStart: 0 };
}

/**
 * Reads the metadata header of the message whose payload is `buf[start, end)` and whose
 * attributes are `attributes` into `out` (every field set), without making views or objects. A
 * message without `attributes` bit 2 has no metadata: its value starts at `start`.
 * @throws ProtocolError (InvalidMessage) when the header runs past the payload or a field's
 *   length does not fit
 */
export function scanMessageHeader(buf: Buffer, start: number, end: number, attributes: number, out: MessageHeaderSpan): void {
  out.keyStart = out.keyEnd = out.hostStart = out.hostEnd = -1;
  out.timestamp = -1;
  out.hasTimestamp = false;
  if ((attributes & hasHeaderAttribute) === 0) {
    out.valueStart = start;
    return;
  }
  if (end - start < 2) throw badHeader('payload shorter than the header size field');
  const headerEnd = start + 2 + buf.readUInt16BE(start);
  if (headerEnd > end) throw badHeader(`header of ${headerEnd - start - 2} bytes in a payload of ${end - start}`);
  let pos = start + 2;
  while (pos < headerEnd) {
    if (headerEnd - pos < 3) throw badHeader(`field head cut at position ${pos - start}`);
    const tag = buf[pos]!;
    const length = (buf[pos + 1]! << 8) | buf[pos + 2]!;
    pos += 3;
    if (headerEnd - pos < length) throw badHeader(`field ${tag} of ${length} bytes runs past the header`);
    if (tag === headerTagKey) {
      out.keyStart = pos;
      out.keyEnd = pos + length;
    } else if (tag === headerTagHost) {
      out.hostStart = pos;
      out.hostEnd = pos + length;
    } else if (tag === headerTagTimestamp) {
      if (length !== 8) throw badHeader(`timestamp field of ${length} bytes`);
      // An int64 without a BigInt: outside ±(2^53 - 1) it is refused.
      const high = buf.readInt32BE(pos);
      const t = high * 0x1_0000_0000 + buf.readUInt32BE(pos + 4);
      if (high > 0x1fffff || high < -0x200000 || !Number.isSafeInteger(t)) throw badHeader(`timestamp ${buf.readBigInt64BE(pos)} out of range`);
      out.timestamp = t;
      out.hasTimestamp = true;
    }
    pos += length;
  }
  out.valueStart = headerEnd;
}

function badHeader(why: string): ProtocolError {
  return new ProtocolError(ErrorCode.InvalidMessage, `bad message header: ${why}`);
}

/**
 * Splits a message's payload into its metadata and its value (views, not copies). A message
 * without `attributes` bit 2 has no metadata: `{ header: undefined, value: payload }`.
 * @throws ProtocolError (InvalidMessage) when the header runs past the payload or a field's
 *   length does not fit
 */
export function readMessageHeader(message: Pick<Message, 'attributes' | 'payload'>): { header: MessageHeader | undefined; value: Buffer } {
  const p = message.payload;
  if ((message.attributes & hasHeaderAttribute) === 0) return { header: undefined, value: p };
  const s = newMessageHeaderSpan();
  scanMessageHeader(p, 0, p.length, message.attributes, s);
  const header: MessageHeader = {
    ...(s.keyStart >= 0 && { key: p.subarray(s.keyStart, s.keyEnd) }),
    ...(s.hasTimestamp && { timestamp: s.timestamp }),
    ...(s.hostStart >= 0 && { host: p.toString('utf8', s.hostStart, s.hostEnd) }),
  };
  return { header, value: p.subarray(s.valueStart) };
}
