/**
 * Message sets: a plain concatenation of messages (SPEC §1). Producers send them, brokers
 * append them as they came, consumers receive them as stored.
 *
 * ```
 * MessageSet => [Message]   (no count, no size prefix: the enclosing request gives the size)
 * ```
 * The offset of a message is its byte position in the partition's log; the next message is at
 * `offset + 4 + length`.
 */
import { ErrorCode, ProtocolError } from './errors.js';
import { checkMessageAt, decodeMessageAt, messageSizeInBytes, writeMessage, type Message } from './message.js';

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
  for (const p of payloads) pos = writeMessage(buf, pos, p, attributes);
  return buf;
}

/**
 * Iterates the messages of a fetched message set. Stops cleanly at a trailing partial message
 * (the broker cut the set at `maxBytes`; the client fetches it again from its offset).
 * @param buf the message set bytes as received
 * @param baseOffset log offset of `buf[0]`
 * @throws ProtocolError (InvalidMessage) at a message with a bad length, magic or CRC: such a
 *   message is never yielded, nor anything after it.
 */
export function* iterateMessageSet(buf: Buffer, baseOffset = 0): Generator<MessageAndOffset> {
  let pos = 0;
  while (pos < buf.length) {
    const check = checkMessageAt(buf, pos);
    if (check.status === 'partial') return;
    if (check.status === 'invalid') {
      throw new ProtocolError(ErrorCode.InvalidMessage, `invalid message at offset ${baseOffset + pos}: ${check.reason}`);
    }
    const message = decodeMessageAt(buf, pos, pos + check.size);
    yield { message, offset: baseOffset + pos, nextOffset: baseOffset + pos + check.size };
    pos += check.size;
  }
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
 * recovery (SPEC §2) and by the broker to check produced message sets. Never throws.
 * @param maxMessageBytes when given, a larger payload stops the scan as invalid (`tooLarge`)
 */
export function scanMessageSet(buf: Buffer, end = buf.length, maxMessageBytes?: number): MessageSetScan {
  end = Math.min(end, buf.length);
  let pos = 0;
  let count = 0;
  while (pos < end) {
    const check = checkMessageAt(buf, pos, end, true, maxMessageBytes);
    if (check.status === 'valid') {
      pos += check.size;
      count++;
      continue;
    }
    const partial = check.status === 'partial';
    const reason = partial
      ? `partial message at position ${pos}: ${end - pos} bytes left${check.size === undefined ? '' : ` of ${check.size}`}`
      : `invalid message at position ${pos}: ${check.reason}`;
    return { count, validBytes: pos, stopReason: reason, partial, tooLarge: !partial && check.tooLarge === true };
  }
  return { count, validBytes: pos, partial: false, tooLarge: false };
}

/**
 * Checks that `buf` is a complete message set of valid messages, each payload at most
 * `maxMessageBytes` bytes, as a broker must before appending it (SPEC §3).
 * @returns the number of messages
 * @throws ProtocolError: MessageSizeTooLarge for an oversized payload, InvalidMessage for
 *   anything else (bad length, magic, CRC, or a partial trailing message)
 */
export function validateMessageSet(buf: Buffer, maxMessageBytes: number): number {
  const scan = scanMessageSet(buf, buf.length, maxMessageBytes);
  if (scan.stopReason === undefined) return scan.count;
  throw new ProtocolError(scan.tooLarge ? ErrorCode.MessageSizeTooLarge : ErrorCode.InvalidMessage, `invalid message set: ${scan.stopReason}`);
}
