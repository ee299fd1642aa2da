/**
 * The primitive types of Kafka's (non-flexible) wire protocol, big-endian:
 *
 * ```
 * int8 int16 int32 int64     two's complement
 * boolean                    int8, 0 false, anything else true
 * string                     int16 length N (>= 0), N bytes of UTF-8
 * nullable_string            int16 length N, -1 for null
 * bytes                      int32 length N (>= 0), N bytes
 * nullable_bytes             int32 length N, -1 for null
 * [T] (array)                int32 count N, N times T; -1 for a null array where allowed
 * ```
 */
import { KafkaErrorCode, KafkaProtocolError } from './errors.js';

/** Builds a byte sequence; grows its buffer as needed. */
export class KafkaWriter {
  private buf: Buffer;
  private pos = 0;

  /** @param initialBytes first buffer size in bytes */
  constructor(initialBytes = 256) {
    this.buf = Buffer.allocUnsafe(Math.max(16, initialBytes));
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

  int8(v: number): this {
    this.ensure(1);
    this.pos = this.buf.writeInt8(v, this.pos);
    return this;
  }

  int16(v: number): this {
    this.ensure(2);
    this.pos = this.buf.writeInt16BE(v, this.pos);
    return this;
  }

  int32(v: number): this {
    this.ensure(4);
    this.pos = this.buf.writeInt32BE(v, this.pos);
    return this;
  }

  /** A safe integer as int64. */
  int64(v: number): this {
    this.ensure(8);
    this.pos = this.buf.writeBigInt64BE(BigInt(v), this.pos);
    return this;
  }

  boolean(v: boolean): this {
    return this.int8(v ? 1 : 0);
  }

  /** `string`, or `nullable_string` with null written as length -1. */
  string(s: string | null): this {
    if (s === null) return this.int16(-1);
    const n = Buffer.byteLength(s, 'utf8');
    this.int16(n);
    this.ensure(n);
    this.pos += this.buf.write(s, this.pos, 'utf8');
    return this;
  }

  /** `bytes`, or `nullable_bytes` with null written as length -1. */
  bytes(b: Uint8Array | null): this {
    if (b === null) return this.int32(-1);
    this.int32(b.length);
    return this.raw(b);
  }

  /** Bytes as they are, no length. */
  raw(b: Uint8Array): this {
    this.ensure(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
    return this;
  }

  /** `[T]`: the count, then `write` for each item; null writes count -1. */
  array<T>(items: readonly T[] | null, write: (w: this, item: T) => void): this {
    if (items === null) return this.int32(-1);
    this.int32(items.length);
    for (const item of items) write(this, item);
    return this;
  }

  /** Overwrites an int32 at `position` (a size field written before its contents were known). */
  patchInt32(position: number, v: number): this {
    this.buf.writeInt32BE(v, position);
    return this;
  }

  /** A view of the bytes written (not a copy). */
  toBuffer(): Buffer {
    return this.buf.subarray(0, this.pos);
  }
}

/** Reads Kafka's primitive types from `buf[offset, end)`; every read past the end throws. */
export class KafkaReader {
  private pos: number;
  private readonly end: number;

  constructor(
    private readonly buf: Buffer,
    offset = 0,
    end = buf.length,
  ) {
    this.pos = offset;
    this.end = Math.min(end, buf.length);
  }

  /** Current position in the underlying buffer. */
  get offset(): number {
    return this.pos;
  }

  /** Bytes left. */
  get remaining(): number {
    return this.end - this.pos;
  }

  private need(n: number, what: string): void {
    if (n < 0 || this.pos + n > this.end) {
      throw new KafkaProtocolError(KafkaErrorCode.InvalidRequest, `truncated input: ${what} needs ${n} bytes at position ${this.pos}, ${this.end - this.pos} left`);
    }
  }

  int8(what = 'int8'): number {
    this.need(1, what);
    return this.buf.readInt8(this.pos++);
  }

  int16(what = 'int16'): number {
    this.need(2, what);
    const v = this.buf.readInt16BE(this.pos);
    this.pos += 2;
    return v;
  }

  int32(what = 'int32'): number {
    this.need(4, what);
    const v = this.buf.readInt32BE(this.pos);
    this.pos += 4;
    return v;
  }

  /** An int64 as a number. @throws KafkaProtocolError (InvalidRequest) outside ±2^53 */
  int64(what = 'int64'): number {
    this.need(8, what);
    const v = this.buf.readBigInt64BE(this.pos);
    this.pos += 8;
    if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER)) {
      throw new KafkaProtocolError(KafkaErrorCode.InvalidRequest, `${what} ${v} is outside ±2^53`);
    }
    return Number(v);
  }

  boolean(what = 'boolean'): boolean {
    return this.int8(what) !== 0;
  }

  /** A `string`. @throws KafkaProtocolError for a negative length */
  string(what = 'string'): string {
    const s = this.nullableString(what);
    if (s === null) throw new KafkaProtocolError(KafkaErrorCode.InvalidRequest, `${what} is null`);
    return s;
  }

  /** A `nullable_string`: null for length -1. */
  nullableString(what = 'string'): string | null {
    const n = this.int16(what);
    if (n === -1) return null;
    if (n < 0) throw new KafkaProtocolError(KafkaErrorCode.InvalidRequest, `${what} has length ${n}`);
    this.need(n, what);
    const s = this.buf.toString('utf8', this.pos, this.pos + n);
    this.pos += n;
    return s;
  }

  /** A `nullable_bytes` as a view (not a copy): null for length -1. */
  nullableBytes(what = 'bytes'): Buffer | null {
    const n = this.int32(what);
    if (n === -1) return null;
    if (n < 0) throw new KafkaProtocolError(KafkaErrorCode.InvalidRequest, `${what} has length ${n}`);
    return this.raw(n, what);
  }

  /** A `bytes` as a view. */
  bytes(what = 'bytes'): Buffer {
    const b = this.nullableBytes(what);
    if (b === null) throw new KafkaProtocolError(KafkaErrorCode.InvalidRequest, `${what} is null`);
    return b;
  }

  /** The next `n` bytes as a view. */
  raw(n: number, what = 'bytes'): Buffer {
    this.need(n, what);
    const b = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }

  /**
   * `[T]`: the count, then `read` that many times. A count above the bytes left (every item
   * takes at least one byte) is refused before anything is read, so a hostile count allocates
   * nothing.
   */
  array<T>(read: (r: this) => T, what = 'array'): T[] {
    const items = this.nullableArray(read, what);
    if (items === null) throw new KafkaProtocolError(KafkaErrorCode.InvalidRequest, `${what} is null`);
    return items;
  }

  /** `[T]` where count -1 is null. */
  nullableArray<T>(read: (r: this) => T, what = 'array'): T[] | null {
    const n = this.int32(`${what} count`);
    if (n === -1) return null;
    if (n < 0 || n > this.remaining) {
      throw new KafkaProtocolError(KafkaErrorCode.InvalidRequest, `${what} count ${n} with ${this.remaining} bytes left`);
    }
    const out: T[] = [];
    for (let i = 0; i < n; i++) out.push(read(this));
    return out;
  }

  /** @throws KafkaProtocolError (InvalidRequest) unless every byte has been read */
  done(what: string): void {
    if (this.pos !== this.end) {
      throw new KafkaProtocolError(KafkaErrorCode.InvalidRequest, `${what}: ${this.end - this.pos} trailing bytes`);
    }
  }
}
