/**
 * Big-endian primitives shared by every codec (docs/design.md §3): a growing {@link Encoder} and a
 * bounds-checked {@link Decoder} whose every read throws {@link ProtocolError} instead of
 * reading past its input.
 */
import { bufferView } from './buffer-view.js';
import { ErrorCode, ProtocolError } from './errors.js';

/** Longest topic name in bytes; topic names become directory names (docs/design.md §2). */
export const maxTopicNameBytes = 249;
const topicPattern = /^[A-Za-z0-9._-]+$/;

/**
 * Checks a topic name: 1 to 249 characters of `[A-Za-z0-9._-]`, and not `.` or `..`.
 * @throws ProtocolError (InvalidTopic) naming the problem.
 */
export function validateTopic(topic: string): void {
  if (topic.length === 0 || topic.length > maxTopicNameBytes || !topicPattern.test(topic) || topic === '.' || topic === '..') {
    throw new ProtocolError(
      ErrorCode.InvalidTopic,
      `invalid topic name ${JSON.stringify(topic.slice(0, 300))}: 1-${maxTopicNameBytes} characters of [A-Za-z0-9._-], not "." or ".."`,
    );
  }
}

/**
 * The last topic name found valid, and its bytes: a connection names one topic request after
 * request, and decoding and checking a name costs more than comparing its bytes. Each user owns
 * one (a broker connection's decoders, a producer's request writer); none is shared through
 * module state.
 */
export class TopicNameCache {
  /** The last valid name, `''` before the first. */
  private name = '';
  /** Its bytes (valid names are ASCII: one byte per character). */
  private bytes: Buffer = Buffer.alloc(0);

  /**
   * Checks `topic` with {@link validateTopic} unless it is the name last found valid.
   * @throws ProtocolError (InvalidTopic) as validateTopic
   */
  check(topic: string): void {
    if (topic === this.name && topic !== '') return;
    validateTopic(topic);
    this.remember(topic);
  }

  /** The remembered name when `buf[at, at + n)` holds its bytes, else undefined. */
  match(buf: Buffer, at: number, n: number): string | undefined {
    const bytes = this.bytes;
    if (n !== bytes.length || n === 0) return undefined;
    let k = 0;
    while (k < n && buf[at + k] === bytes[k]) k++;
    return k === n ? this.name : undefined;
  }

  /** Remembers `topic`, which the caller has found valid. */
  remember(topic: string): void {
    this.name = topic;
    this.bytes = Buffer.from(topic, 'latin1');
  }
}

/** Builds a big-endian byte sequence; grows its buffer as needed. */
export class Encoder {
  private buf: Buffer;
  private pos = 0;

  /** @param initialBytes first buffer size in bytes */
  constructor(initialBytes = 256) {
    this.buf = Buffer.allocUnsafe(initialBytes);
  }

  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  /** Bytes written so far. */
  get length(): number {
    return this.pos;
  }

  writeInt8(v: number): this {
    this.ensure(1);
    this.pos = this.buf.writeInt8(v, this.pos);
    return this;
  }

  writeInt16(v: number): this {
    this.ensure(2);
    this.pos = this.buf.writeInt16BE(v, this.pos);
    return this;
  }

  writeInt32(v: number): this {
    this.ensure(4);
    this.pos = this.buf.writeInt32BE(v, this.pos);
    return this;
  }

  /** Writes a safe-integer number as int64. */
  writeInt64(v: number): this {
    this.ensure(8);
    this.pos = this.buf.writeBigInt64BE(BigInt(v), this.pos);
    return this;
  }

  /** `int16 length | utf8 bytes`, Kafka 0.7's short string. */
  writeString(s: string): this {
    const n = Buffer.byteLength(s, 'utf8');
    this.writeInt16(n);
    this.ensure(n);
    this.pos += this.buf.write(s, this.pos, 'utf8');
    return this;
  }

  writeBytes(b: Uint8Array): this {
    this.ensure(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
    return this;
  }

  /** A view of the bytes written (not a copy). */
  toBuffer(): Buffer {
    return this.buf.subarray(0, this.pos);
  }
}

/**
 * Reads big-endian values from a buffer; every read past the end throws ProtocolError
 * (InvalidRequest). A protocol with errors of its own (the Kafka listener's reader) extends it
 * and overrides {@link failure}; `what` in every read names the field in the error.
 */
export class Decoder {
  private pos: number;

  private readonly end: number;

  /**
   * Reads `buf[offset, end)`; an `end` past the buffer is taken as its length. `topics`, when
   * given, lets {@link readTopic} skip decoding the name it last found valid.
   */
  constructor(
    private readonly buf: Buffer,
    offset = 0,
    end = buf.length,
    private readonly topics?: TopicNameCache,
  ) {
    this.pos = offset;
    this.end = Math.min(end, buf.length);
  }

  /** Current read position in the underlying buffer. */
  get offset(): number {
    return this.pos;
  }

  /** Bytes left to read. */
  get remaining(): number {
    return this.end - this.pos;
  }

  /** The error a malformed input throws, with `message` saying what was wrong: here ProtocolError (InvalidRequest). */
  protected failure(message: string): Error {
    return new ProtocolError(ErrorCode.InvalidRequest, message);
  }

  private need(n: number, what: string): void {
    if (n < 0 || this.pos + n > this.end) {
      throw this.failure(`truncated input: ${what} needs ${n} bytes at position ${this.pos}, ${this.end - this.pos} left`);
    }
  }

  readInt8(what = 'int8'): number {
    this.need(1, what);
    return this.buf.readInt8(this.pos++);
  }

  readInt16(what = 'int16'): number {
    this.need(2, what);
    const v = this.buf.readInt16BE(this.pos);
    this.pos += 2;
    return v;
  }

  readInt32(what = 'int32'): number {
    this.need(4, what);
    const v = this.buf.readInt32BE(this.pos);
    this.pos += 4;
    return v;
  }

  /** Reads an int64 as a number; throws when it is outside the safe-integer range. */
  readInt64(what = 'int64'): number {
    this.need(8, what);
    const v = this.buf.readBigInt64BE(this.pos);
    this.pos += 8;
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER)) {
      throw this.failure(`${what} ${v} is outside the supported range of ±2^53`);
    }
    return Number(v);
  }

  /** `int16 length | utf8 bytes`; a negative length throws. */
  readString(what = 'string'): string {
    const n = this.readInt16();
    if (n < 0) throw this.failure(`${what} has negative length ${n}`);
    return this.readUtf8(n, what);
  }

  /** The next `n` bytes decoded as UTF-8 (no length before them). */
  readUtf8(n: number, what = 'string'): string {
    this.need(n, what);
    const s = this.buf.toString('utf8', this.pos, this.pos + n);
    this.pos += n;
    return s;
  }

  /**
   * A topic name, checked with {@link validateTopic}. With a {@link TopicNameCache}, the same
   * bytes as the last valid name it holds give the same string without decoding and checking
   * them again.
   */
  readTopic(): string {
    const cache = this.topics;
    if (cache !== undefined) {
      const n = this.readInt16();
      if (n > 0) {
        this.need(n, 'topic');
        const hit = cache.match(this.buf, this.pos, n);
        if (hit !== undefined) {
          this.pos += n;
          return hit;
        }
      }
      this.pos -= 2;
    }
    const topic = this.readString('topic');
    validateTopic(topic);
    // Only a valid name is remembered, and valid names are ASCII: equal bytes are equal names.
    cache?.remember(topic);
    return topic;
  }

  /** A view (not a copy) of the next `n` bytes. */
  readBytes(n: number, what = 'bytes'): Buffer {
    if (n < 0) throw this.failure(`${what} has negative length ${n}`);
    this.need(n, what);
    const b = bufferView(this.buf, this.pos, this.pos + n);
    this.pos += n;
    return b;
  }

  /** Throws unless every byte has been read. */
  assertDone(what: string): void {
    if (this.pos !== this.end) {
      throw this.failure(`${what}: ${this.end - this.pos} unexpected trailing bytes`);
    }
  }
}
