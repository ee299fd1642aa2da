/**
 * The one walker of a message set (docs/format.md §2, §2a, §2b), as Kafka 0.7's
 * `ByteBufferMessageSet` iterator is: everything that reads messages out of a set's bytes (the
 * simple consumer, `klog dump-log`, the loader through the consumer, log recovery) asks it, and
 * nothing else reads a message's fields by position.
 *
 * ```
 * MessageSet => [Message]          walked shallow: each message as stored, a gzip wrapper as one message
 *   offset      baseOffset + position of the message in the set
 *   nextOffset  offset + 4 + length
 * Wrapper    => Message (codec 1)   opened (openWrapper): an iterator over its inner set, where
 *   every inner message has the wrapper's offset, and nextOffset the wrapper's offset, except the
 *   last one's, which is the wrapper's end (resuming from it never skips a message)
 * ```
 *
 * A walk ends at the end of the bytes or at the first message it cannot hand out; {@link
 * MessageSetIterator.stop} says which and why: a trailing partial message (a fetch cut at
 * `maxBytes`, a torn tail on disk), a bad CRC, a message over `maxMessageBytes`, any other
 * invalid message (bad length, magic, metadata header, inner set), or (deep reads) the next
 * wrapper decompressing past the byte budget.
 *
 * The checks are done once, when the iterator is made: lengths and magic bytes message by
 * message, the CRCs with one call for the whole set ({@link scanMessageSet}); stepping from one
 * message to the next then only reads its length.
 */
import { bufferView } from './buffer-view.js';
import { decompressWrapper } from './compression.js';
import { crc32Range } from './crc32.js';
import { ErrorCode, ProtocolError } from './errors.js';
import { hasHeaderAttribute, readMessageHeader, type MessageHeader } from './message-header.js';
import { checkMessageAt, compressionCodecMask, CompressionCodec, lengthFieldBytes, messageOverheadBytes, type Message } from './message.js';
import { scanMessageSet, walkMessageSet, type MessageAndOffset } from './message-set.js';

/** Why a walk stopped before the end of the bytes (see {@link MessageSetStop}). */
export type MessageSetStopKind =
  /** The bytes end inside a message (fewer than 4 bytes, or fewer than `4 + length`). */
  | 'partial'
  /** A whole message with a sound header whose CRC is not its payload's. */
  | 'badCrc'
  /** A message whose payload is over `maxMessageBytes`. */
  | 'tooLarge'
  /** Anything else that is not a valid message: length, magic, metadata header, a bad or nested compressed set, an unknown codec. */
  | 'invalid'
  /** (deep reads) The next wrapper decompresses to more than the bytes left of the budget. */
  | 'overBudget';

/** Where and why a walk stopped. */
export interface MessageSetStop {
  readonly kind: MessageSetStopKind;
  /** Byte position, in the walked bytes, of the message it stopped at (for an inner set: of the inner message). */
  readonly position: number;
  /** Log offset of that message (for an inner message: its wrapper's). */
  readonly offset: number;
  /** Bytes of that message, length field included, when its length field was read and is sane. */
  readonly size?: number;
  /** What was found, in words (e.g. `CRC mismatch: stored 1a2b, computed 3c4d`). */
  readonly reason: string;
}

/** Options of a {@link MessageSetIterator}. */
export interface MessageSetIteratorOptions {
  /** Log offset of `buf[0]`. Default 0. */
  readonly baseOffset?: number;
  /** Walk `buf[0, end)`. Default `buf.length`. */
  readonly end?: number;
  /** A message with a larger payload (bytes) stops the walk (`tooLarge`). Default: no limit. */
  readonly maxMessageBytes?: number;
  /**
   * `stop` (default): a bad CRC stops the walk, no such message is handed out. `yield`: every
   * message with a sound length and magic is handed out, {@link MessageSetIterator.crcValid}
   * says whether its CRC is right, and the walk goes on past it (dump tools; never a consumer).
   */
  readonly badCrc?: 'stop' | 'yield';
}

/** The wrapper an inner set came from. */
interface WrapperPlace {
  /** The wrapper's offset. */
  readonly offset: number;
  /** The offset after the wrapper. */
  readonly nextOffset: number;
}

/**
 * A cursor over the messages of `buf[0, end)`: {@link advance} moves to the next message and
 * the getters read the current one, with no allocation but the views asked for. Also an
 * iterator of {@link MessageAndOffset} (`for (const m of it)`) for callers that want objects.
 */
export class MessageSetIterator implements IterableIterator<MessageAndOffset> {
  /** The bytes walked. */
  readonly buf: Buffer;
  /** Log offset of `buf[0]`. */
  readonly baseOffset: number;
  /** Whole messages the walk hands out (with `badCrc: 'stop'`: whole and valid), from the start. */
  readonly count: number;
  /** Bytes from the start covered by those messages: where the walk ends. */
  readonly validBytes: number;
  /** Position in `buf` of the current message (after the last one: `validBytes`); -1 before the first {@link advance}. */
  position = -1;
  /** Bytes of the current message, length field included; 0 when there is none. */
  size = 0;
  #stop: MessageSetStop | undefined;
  readonly #checkEachCrc: boolean;
  readonly #wrapper: WrapperPlace | undefined;
  #decompressed = 0;

  /**
   * Checks `buf[0, end)` (never throws): lengths and magic bytes, and the CRCs unless `badCrc`
   * is `yield`.
   */
  constructor(buf: Buffer, options: MessageSetIteratorOptions = {}, wrapper?: WrapperPlace) {
    this.buf = buf;
    this.baseOffset = options.baseOffset ?? 0;
    this.#wrapper = wrapper;
    const end = Math.min(options.end ?? buf.length, buf.length);
    this.#checkEachCrc = options.badCrc === 'yield';
    if (this.#checkEachCrc) {
      const walk = walkMessageSet(buf, end, options.maxMessageBytes);
      this.count = walk.count;
      this.validBytes = walk.validBytes;
      if (walk.validBytes < end) this.#stop = this.#stopAt(walk.validBytes, end, options.maxMessageBytes, false);
    } else {
      const scan = scanMessageSet(buf, end, options.maxMessageBytes);
      this.count = scan.count;
      this.validBytes = scan.validBytes;
      if (scan.stopReason !== undefined) this.#stop = this.#stopAt(scan.validBytes, end, options.maxMessageBytes, true);
    }
    if (wrapper !== undefined && this.#stop?.kind === 'partial') {
      this.#stop = { ...this.#stop, kind: 'invalid', reason: `invalid inner message at position ${this.#stop.position}: the compressed set ends inside a message` };
    }
  }

  /** Why the walk stops before the end of the bytes; undefined when every byte is whole messages it hands out. */
  get stop(): MessageSetStop | undefined {
    return this.#stop;
  }

  /**
   * Moves to the next message.
   * @returns false at the end of the walk (then {@link stop} says why, when before the end of the bytes)
   */
  advance(): boolean {
    const next = this.position < 0 ? 0 : this.position + this.size;
    this.position = next;
    if (next >= this.validBytes) {
      this.size = 0;
      return false;
    }
    const b = this.buf;
    this.size = lengthFieldBytes + ((b[next]! << 24) | (b[next + 1]! << 16) | (b[next + 2]! << 8) | b[next + 3]!);
    if (this.#wrapper !== undefined && (b[next + 5]! & compressionCodecMask) !== CompressionCodec.None) {
      const codec = b[next + 5]! & compressionCodecMask;
      this.#stop = { kind: 'invalid', position: next, offset: this.#wrapper.offset, size: this.size, reason: `invalid inner message at position ${next}: it is itself compressed (codec ${codec})` };
      this.size = 0;
      return false;
    }
    return true;
  }

  /** Log offset of the current message (of its wrapper, for an inner message). */
  get offset(): number {
    return this.#wrapper === undefined ? this.baseOffset + this.position : this.#wrapper.offset;
  }

  /** Where to resume to get every message after the current one (see the layout at the top). */
  get nextOffset(): number {
    const w = this.#wrapper;
    if (w === undefined) return this.baseOffset + this.position + this.size;
    return this.position + this.size === this.buf.length ? w.nextOffset : w.offset;
  }

  /** Magic byte of the current message. */
  get magic(): number {
    return this.buf[this.position + 4]!;
  }

  /** Attributes byte of the current message. */
  get attributes(): number {
    return this.buf[this.position + 5]!;
  }

  /** Compression codec of the current message (attributes bits 0-1; docs/format.md §2b). */
  get codec(): number {
    return this.buf[this.position + 5]! & compressionCodecMask;
  }

  /** True when the current message carries a metadata header (attributes bit 2; docs/format.md §2a). */
  get hasHeader(): boolean {
    return (this.buf[this.position + 5]! & hasHeaderAttribute) !== 0;
  }

  /** The CRC stored in the current message. */
  get crc(): number {
    return this.buf.readUInt32BE(this.position + 6);
  }

  /** Whether the current message's CRC is right: always, unless the iterator was made with `badCrc: 'yield'`. */
  get crcValid(): boolean {
    return !this.#checkEachCrc || this.computedCrc() === this.crc;
  }

  /** The CRC-32 of the current message's payload, computed now (what {@link crc} should be). */
  computedCrc(): number {
    return crc32Range(this.buf, this.position + messageOverheadBytes, this.position + this.size);
  }

  /** The current message's payload as stored (metadata header included): a view, not a copy. */
  payload(): Buffer {
    return bufferView(this.buf, this.position + messageOverheadBytes, this.position + this.size);
  }

  /** The current message. */
  message(): Message {
    return { magic: this.magic, attributes: this.attributes, crc: this.crc, payload: this.payload() };
  }

  /**
   * The current message's metadata header and value (views), `header` undefined for a message
   * without one.
   * @throws ProtocolError (InvalidMessage) for a header that does not fit its payload
   */
  header(): { header: MessageHeader | undefined; value: Buffer } {
    return readMessageHeader({ attributes: this.attributes, payload: this.payload() });
  }

  /**
   * Decompresses the current message, a wrapper, into at most `maxBytes` bytes, off the event
   * loop, and walks its inner set: whole, valid, uncompressed messages (anything else stops the
   * inner walk as `invalid`), each with the wrapper's offset.
   * @returns the inner set's iterator, or undefined when it decompresses to more than `maxBytes`
   * @throws ProtocolError (InvalidMessage) for an unsupported codec, a metadata bit on the
   *   wrapper, or bytes that do not decompress
   */
  async openWrapper(maxBytes: number): Promise<MessageSetIterator | undefined> {
    const inner = await decompressWrapper({ attributes: this.attributes, payload: this.payload() }, maxBytes);
    if (inner === undefined) return undefined;
    this.#decompressed = inner.length;
    return new MessageSetIterator(inner, {}, { offset: this.offset, nextOffset: this.nextOffset });
  }

  /**
   * Makes the message at `position` (`size` bytes) the current one: for {@link readMessageSet},
   * which steps over plain messages itself. `position` must be a message boundary below
   * {@link validBytes}.
   */
  moveTo(position: number, size: number): this {
    this.position = position;
    this.size = size;
    return this;
  }

  /** Bytes the last {@link openWrapper} decompressed (0 before any). */
  get decompressedBytes(): number {
    return this.#decompressed;
  }

  /** Stops the walk at the current message (a caller that found it invalid: a bad header, a wrapper that does not open). */
  stopHere(kind: MessageSetStopKind, reason: string): MessageSetStop {
    this.#stop = { kind, position: this.position, offset: this.offset, size: this.size, reason };
    return this.#stop;
  }

  [Symbol.iterator](): this {
    return this;
  }

  /** The next message as an object (the iterator protocol). */
  next(): IteratorResult<MessageAndOffset, undefined> {
    if (!this.advance()) return { done: true, value: undefined };
    return { done: false, value: { message: this.message(), offset: this.offset, nextOffset: this.nextOffset } };
  }

  #stopAt(position: number, end: number, maxMessageBytes: number | undefined, verifyCrc: boolean): MessageSetStop {
    const offset = this.#wrapper?.offset ?? this.baseOffset + position;
    const check = checkMessageAt(this.buf, position, end, verifyCrc, maxMessageBytes);
    if (check.status === 'partial') {
      const left = end - position;
      const reason = check.size === undefined ? `${left} bytes, too few for a length field` : `${left} bytes of a ${check.size}-byte message`;
      return check.size === undefined ? { kind: 'partial', position, offset, reason } : { kind: 'partial', position, offset, size: check.size, reason };
    }
    if (check.status === 'valid') return { kind: 'invalid', position, offset, size: check.size, reason: 'message passed its own check but not the scan' };
    const kind = check.tooLarge === true ? 'tooLarge' : check.badCrc === true ? 'badCrc' : 'invalid';
    const length = end - position >= lengthFieldBytes ? this.buf.readInt32BE(position) : -1;
    return length >= 6 ? { kind, position, offset, size: lengthFieldBytes + length, reason: check.reason } : { kind, position, offset, reason: check.reason };
  }
}

/** One message as the application wrote it: its value, metadata split off, and where it is. */
export interface LogMessage {
  /** Byte offset of the message in its partition (of its wrapper, for a message of a compressed set). */
  readonly offset: number;
  /** Where to resume to get every message after this one (see {@link MessageSetIterator.nextOffset}). */
  readonly nextOffset: number;
  /** The application's bytes (any metadata header split off): a view on the set or decompressed bytes, not a copy. */
  readonly payload: Buffer;
  /** The key stored in the message's metadata header, if any. */
  readonly key?: Buffer;
  /** The creation time (ms since the epoch) stored in the message's metadata header, if any. */
  readonly timestamp?: number;
  /** The producing host stored in the message's metadata header, if any. */
  readonly host?: string;
}

/** What {@link readMessageSet} read. */
export interface MessageSetRead {
  /** The messages, in log order, wrappers opened. */
  readonly messages: LogMessage[];
  /** Offset after the last whole message (or wrapper) read: where the next read starts. */
  readonly nextOffset: number;
  /** Why the read stopped before the end of the bytes, undefined when it read them all. */
  readonly stop?: MessageSetStop;
}

/** Options of {@link readMessageSet}. */
export interface ReadMessageSetOptions {
  /** Log offset of `buf[0]`. Default 0. */
  readonly baseOffset?: number;
  /** Most bytes the set's wrappers may decompress to, together (the guard against decompression bombs). */
  readonly maxDecompressedBytes: number;
}

/**
 * The deep walk of a message set: every message as the application wrote it, gzip wrappers
 * decompressed within `maxDecompressedBytes` (a read stops before a wrapper that would go over:
 * `overBudget`), metadata headers split off. None of a wrapper whose inner set holds an invalid
 * message is read. Never throws: what stops the read is in `stop`.
 */
export async function readMessageSet(buf: Buffer, options: ReadMessageSetOptions): Promise<MessageSetRead> {
  const it = new MessageSetIterator(buf, { baseOffset: options.baseOffset });
  const base = it.baseOffset;
  const end = it.validBytes;
  const messages: LogMessage[] = [];
  let budget = options.maxDecompressedBytes;
  let pos = 0;
  // The hot path, a plain message, is stepped here without the cursor; the cursor is moved to a
  // message with a header or a wrapper, to read it.
  while (pos < end) {
    const size = lengthFieldBytes + ((buf[pos]! << 24) | (buf[pos + 1]! << 16) | (buf[pos + 2]! << 8) | buf[pos + 3]!);
    if ((buf[pos + 5]! & (hasHeaderAttribute | compressionCodecMask)) === 0) {
      messages.push({ offset: base + pos, nextOffset: base + pos + size, payload: bufferView(buf, pos + messageOverheadBytes, pos + size) });
    } else if (!(await readOne(it.moveTo(pos, size), messages, budget))) {
      break;
    } else if (it.codec !== CompressionCodec.None) {
      budget -= it.decompressedBytes;
    }
    pos += size;
  }
  const nextOffset = base + pos;
  return it.stop === undefined ? { messages, nextOffset } : { messages, nextOffset, stop: it.stop };
}

/**
 * Reads the current message of `it`, a message with a metadata header or a wrapper, into
 * `messages`; for a wrapper, all of its inner messages or none.
 * @returns false, with the walk stopped there, when it cannot be read
 */
async function readOne(it: MessageSetIterator, messages: LogMessage[], budget: number): Promise<boolean> {
  if (it.codec === CompressionCodec.None) {
    const m = logMessage(it);
    if (m !== undefined) messages.push(m);
    return m !== undefined;
  }
  let inner: MessageSetIterator | undefined;
  try {
    inner = await it.openWrapper(budget);
  } catch (e) {
    if (!(e instanceof ProtocolError)) throw e;
    it.stopHere('invalid', e.message);
    return false;
  }
  if (inner === undefined) {
    it.stopHere('overBudget', `the compressed set decompresses to more than the ${budget} bytes left of maxDecompressedBytes`);
    return false;
  }
  const whole = messages.length;
  while (inner.advance()) {
    const m = logMessage(inner);
    if (m === undefined) break;
    messages.push(m);
  }
  if (inner.stop !== undefined) {
    messages.length = whole;
    it.stopHere('invalid', inner.stop.reason);
    return false;
  }
  return true;
}

/** The current message of `it` as a {@link LogMessage}; undefined, with the walk stopped there, for a bad metadata header. */
function logMessage(it: MessageSetIterator): LogMessage | undefined {
  let split;
  try {
    split = it.header();
  } catch (e) {
    if (!(e instanceof ProtocolError)) throw e;
    it.stopHere('invalid', e.message);
    return undefined;
  }
  const { header, value } = split;
  if (header === undefined) return { offset: it.offset, nextOffset: it.nextOffset, payload: value };
  return { offset: it.offset, nextOffset: it.nextOffset, payload: value, ...header };
}

/**
 * The messages of a fetched message set, shallow (wrappers as stored). Stops cleanly at a
 * trailing partial message (the broker cut the set at `maxBytes`; the client fetches it again
 * from its offset).
 * @param buf the message set bytes as received
 * @param baseOffset log offset of `buf[0]`
 * @throws ProtocolError (InvalidMessage) at a message with a bad length, magic or CRC: such a
 *   message is never yielded, nor anything after it.
 */
export function* iterateMessageSet(buf: Buffer, baseOffset = 0): Generator<MessageAndOffset> {
  const it = new MessageSetIterator(buf, { baseOffset });
  yield* it;
  const stop = it.stop;
  if (stop !== undefined && stop.kind !== 'partial') {
    throw new ProtocolError(ErrorCode.InvalidMessage, `invalid message at offset ${stop.offset}: ${stop.reason}`);
  }
}

/**
 * The messages of a decompressed inner set, in order, with `position` their byte position in
 * the inner set. Unlike a fetched set, an inner set must be whole: a partial trailing message is
 * invalid, and so is a compressed inner message (klog does not nest compression).
 * @throws ProtocolError (InvalidMessage) at the first message that fails its checks
 */
export function* iterateInnerMessageSet(inner: Buffer): Generator<Message & { readonly position: number }> {
  const it = new MessageSetIterator(inner, {}, { offset: 0, nextOffset: 0 });
  while (it.advance()) yield { ...it.message(), position: it.position };
  const stop = it.stop;
  if (stop !== undefined) throw new ProtocolError(ErrorCode.InvalidMessage, stop.reason.startsWith('invalid inner') ? stop.reason : `invalid inner message at position ${stop.position}: ${stop.reason}`);
}
