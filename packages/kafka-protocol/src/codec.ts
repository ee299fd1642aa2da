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
import { Encoder } from '@klog/protocol';
import { KafkaErrorCode, KafkaProtocolError } from './errors.js';

/**
 * Builds a byte sequence: @klog/protocol's growing {@link Encoder} (whose `string` is Kafka's
 * `string` too), with Kafka's nullable strings and bytes, arrays, and a size field patched in
 * afterwards.
 */
export class KafkaWriter extends Encoder {
  int8(v: number): this {
    return this.writeInt8(v);
  }

  int16(v: number): this {
    return this.writeInt16(v);
  }

  int32(v: number): this {
    return this.writeInt32(v);
  }

  /** A safe integer as int64. */
  int64(v: number): this {
    return this.writeInt64(v);
  }

  boolean(v: boolean): this {
    return this.writeInt8(v ? 1 : 0);
  }

  /** `string`, or `nullable_string` with null written as length -1. */
  string(s: string | null): this {
    return s === null ? this.writeInt16(-1) : this.writeString(s);
  }

  /** `bytes`, or `nullable_bytes` with null written as length -1. */
  bytes(b: Uint8Array | null): this {
    return b === null ? this.writeInt32(-1) : this.writeInt32(b.length).writeBytes(b);
  }

  /** Bytes as they are, no length. */
  raw(b: Uint8Array): this {
    return this.writeBytes(b);
  }

  /** `[T]`: the count, then `write` for each item; null writes count -1. */
  array<T>(items: readonly T[] | null, write: (w: this, item: T) => void): this {
    if (items === null) return this.writeInt32(-1);
    this.writeInt32(items.length);
    for (const item of items) write(this, item);
    return this;
  }

  /** Overwrites an int32 at `position` (a size field written before its contents were known). */
  patchInt32(position: number, v: number): this {
    this.toBuffer().writeInt32BE(v, position);
    return this;
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
