/**
 * Message sets: a plain concatenation of messages (docs/design.md §1). Producers send them, brokers
 * append them as they came, consumers receive them as stored.
 *
 * ```
 * MessageSet => [Message]   (no count, no size prefix: the enclosing request gives the size)
 * ```
 * The offset of a message is its byte position in the partition's log; the next message is at
 * `offset + 4 + length`.
 */
import { MessageSetCrc, crcAddon } from './crc32.js';
import { ErrorCode, ProtocolError } from './errors.js';
import {
  checkMessageAt,
  currentMagic,
  firstBadMessageCrc,
  lengthFieldBytes,
  messageHeaderBytes,
  messageSizeInBytes,
  writeMessage,
  writeMessageCrcs,
  type Message,
} from './message.js';

/** One message of a message set with its log offset and the offset of the message after it. */
export interface MessageAndOffset {
  readonly message: Message;
  /** Byte offset of this message in the partition's log. */
  readonly offset: number;
  /** Byte offset of the next message: `offset + 4 + length`. */
  readonly nextOffset: number;
}

/**
 * Encodes payloads as one message set in one buffer, with one allocation.
 * @param payloads message bodies
 * @param attributes attributes byte of every message (compression codec)
 */
export function encodeMessageSet(payloads: readonly Uint8Array[], attributes = 0): Buffer {
  let size = 0;
  for (const p of payloads) size += messageSizeInBytes(p.length);
  const buf = Buffer.allocUnsafe(size);
  let pos = 0;
  for (const p of payloads) pos = writeMessage(buf, pos, p, attributes, false);
  writeMessageCrcs(buf, 0, size);
  return buf;
}

/** What {@link scanMessageSet} found. */
export interface MessageSetScan {
  /** Messages that are whole and valid, from the start. */
  readonly count: number;
  /** Bytes from the start covered by those messages. */
  readonly validBytes: number;
  /** Why the scan stopped before the end, or `undefined` when every byte was valid. */
  readonly stopReason?: string;
  /** True when the scan stopped at a trailing partial message rather than an invalid one. */
  readonly partial: boolean;
  /** True when the scan stopped at a message over `maxMessageBytes`. */
  readonly tooLarge: boolean;
}

/**
 * Walks `buf[0, end)` and reports the longest prefix of whole, valid messages. Used by log
 * recovery (docs/design.md §2), by the broker to check produced message sets and by consumers to check
 * fetched ones. Never throws.
 *
 * Lengths and magic bytes are checked message by message. The CRCs: each on its own in one call
 * where the CRC addon is loaded ({@link firstBadMessageCrc}); otherwise those of all the whole
 * messages together, with one pass over their bytes ({@link MessageSetCrc}). Only when that finds
 * a mismatch are the CRCs checked one by one, to report the first bad message.
 * @param maxMessageBytes when given, a larger payload stops the scan as invalid (`tooLarge`)
 */
export function scanMessageSet(buf: Buffer, end = buf.length, maxMessageBytes?: number): MessageSetScan {
  end = Math.min(end, buf.length);
  const crc = crcAddon === undefined ? new MessageSetCrc() : undefined;
  const { count, validBytes } = walkMessageSet(buf, end, maxMessageBytes, crc);
  const crcsRight = validBytes === 0 || (crc === undefined ? firstBadMessageCrc(buf, 0, validBytes) < 0 : crc.matches(buf, 0, validBytes));
  if (!crcsRight) return scanEachCrc(buf, end, maxMessageBytes);
  if (validBytes === end) return { count, validBytes, partial: false, tooLarge: false };
  return stopAt(buf, validBytes, end, count, maxMessageBytes);
}

/** What {@link walkMessageSet} found. */
export interface MessageSetWalk {
  /** Whole messages with a sound header, from the start. */
  readonly count: number;
  /** Bytes from the start covered by those messages. */
  readonly validBytes: number;
  /** Position of the last of those messages, −1 when there is none. */
  readonly lastPosition: number;
}

/**
 * The first half of {@link scanMessageSet}: walks the messages of `buf[0, end)` checking only
 * their headers (length, magic byte, `maxMessageBytes`), and folds each whole one into `crc`,
 * when given, without reading its payload. Checking the CRCs of `buf[0, validBytes)` is the
 * other half: `crc.matches(buf, 0, validBytes)`, or {@link firstBadMessageCrc}.
 */
export function walkMessageSet(buf: Buffer, end: number, maxMessageBytes: number | undefined, crc?: MessageSetCrc): MessageSetWalk {
  end = Math.min(end, buf.length);
  const maxLength = maxMessageBytes === undefined ? Infinity : maxMessageBytes + messageHeaderBytes;
  let pos = 0;
  let count = 0;
  let lastPosition = -1;
  while (end - pos >= lengthFieldBytes + 1) {
    const length = (buf[pos]! << 24) | (buf[pos + 1]! << 16) | (buf[pos + 2]! << 8) | buf[pos + 3]!;
    if (length < messageHeaderBytes || length > maxLength || buf[pos + lengthFieldBytes] !== currentMagic) break;
    const size = lengthFieldBytes + length;
    if (end - pos < size) break;
    crc?.add(buf, pos, length);
    lastPosition = pos;
    pos += size;
    count++;
  }
  return { count, validBytes: pos, lastPosition };
}

/** The scan result for a walk that stopped at `pos` (not `end`) after `count` valid messages. */
function stopAt(buf: Buffer, pos: number, end: number, count: number, maxMessageBytes: number | undefined): MessageSetScan {
  const check = checkMessageAt(buf, pos, end, true, maxMessageBytes);
  const partial = check.status === 'partial';
  const reason =
    check.status === 'partial'
      ? `partial message at position ${pos}: ${end - pos} bytes left${check.size === undefined ? '' : ` of ${check.size}`}`
      : check.status === 'invalid'
        ? `invalid message at position ${pos}: ${check.reason}`
        : `message at position ${pos} passed its own check but not the scan`;
  const tooLarge = check.status === 'invalid' && check.tooLarge === true;
  return { count, validBytes: pos, stopReason: reason, partial, tooLarge };
}

/** {@link scanMessageSet} with one CRC call per message: finds the first message whose CRC is wrong. */
function scanEachCrc(buf: Buffer, end: number, maxMessageBytes: number | undefined): MessageSetScan {
  let pos = 0;
  let count = 0;
  while (pos < end) {
    const check = checkMessageAt(buf, pos, end, true, maxMessageBytes);
    if (check.status !== 'valid') break;
    pos += check.size;
    count++;
  }
  return pos === end ? { count, validBytes: pos, partial: false, tooLarge: false } : stopAt(buf, pos, end, count, maxMessageBytes);
}

/**
 * Checks that `buf` is a complete message set of valid messages, each payload at most
 * `maxMessageBytes` bytes, as a broker must before appending it (docs/design.md §3). Each message's CRC is
 * checked on its own: unlike the one-pass check of {@link scanMessageSet}, no set crafted so
 * that the errors of two messages cancel can pass.
 * @returns its messages and where the last one starts (an appender hands both to the log, which
 *   need not walk the set again)
 * @throws ProtocolError: MessageSizeTooLarge for an oversized payload, InvalidMessage for
 *   anything else (bad length, magic, CRC, or a partial trailing message)
 */
export function validateMessageSet(buf: Buffer, maxMessageBytes: number): MessageSetShape {
  const shape = validateMessageSetFraming(buf, maxMessageBytes);
  if (firstBadMessageCrc(buf, 0, buf.length) < 0) return shape;
  throw invalidMessageSet(buf, maxMessageBytes);
}

/** A message set found whole and valid: its messages, and the position of the last one (−1 for an empty set). */
export interface MessageSetShape {
  readonly count: number;
  readonly lastPosition: number;
}

/**
 * {@link validateMessageSet} without the CRCs, for a caller that checks the CRCs of several sets
 * laid end to end with one {@link firstBadMessageCrc} call afterwards (a broker appending a run
 * of sets), and calls validateMessageSet on a set where that finds a bad one, for the error; or
 * for a set klog's own encoder wrote, every CRC computed from the bytes it covers (the Kafka
 * listener's converted sets, docs/kafka-protocol.md "Messages"), which only `maxMessageBytes`
 * can refuse.
 * @returns as validateMessageSet
 * @throws as validateMessageSet, for anything but a CRC
 */
export function validateMessageSetFraming(buf: Buffer, maxMessageBytes: number): MessageSetShape {
  const { count, validBytes, lastPosition } = walkMessageSet(buf, buf.length, maxMessageBytes);
  if (validBytes === buf.length) return { count, lastPosition };
  throw invalidMessageSet(buf, maxMessageBytes);
}

/** The error of a set that is not a complete set of valid messages: finds the first bad message and says what. */
function invalidMessageSet(buf: Buffer, maxMessageBytes: number): ProtocolError {
  const scan = scanEachCrc(buf, buf.length, maxMessageBytes);
  return new ProtocolError(scan.tooLarge ? ErrorCode.MessageSizeTooLarge : ErrorCode.InvalidMessage, `invalid message set: ${scan.stopReason}`);
}
