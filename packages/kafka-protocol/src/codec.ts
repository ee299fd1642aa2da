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
import { Decoder, Encoder } from '@klog/protocol';
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

/**
 * Reads Kafka's primitive types from `buf[offset, end)`: @klog/protocol's bounds-checked
 * {@link Decoder} under Kafka's type names, with nullable strings and bytes and arrays; every
 * malformed input throws KafkaProtocolError (InvalidRequest).
 */
export class KafkaReader extends Decoder {
  protected override failure(message: string): Error {
    return new KafkaProtocolError(KafkaErrorCode.InvalidRequest, message);
  }

  int8(what = 'int8'): number {
    return this.readInt8(what);
  }

  int16(what = 'int16'): number {
    return this.readInt16(what);
  }

  int32(what = 'int32'): number {
    return this.readInt32(what);
  }

  /** An int64 as a number. @throws KafkaProtocolError (InvalidRequest) outside ±2^53 */
  int64(what = 'int64'): number {
    return this.readInt64(what);
  }

  boolean(what = 'boolean'): boolean {
    return this.readInt8(what) !== 0;
  }

  /** A `string`. @throws KafkaProtocolError for a negative length */
  string(what = 'string'): string {
    const s = this.nullableString(what);
    if (s === null) throw this.failure(`${what} is null`);
    return s;
  }

  /** A `nullable_string`: null for length -1. */
  nullableString(what = 'string'): string | null {
    const n = this.readInt16(what);
    if (n === -1) return null;
    if (n < 0) throw this.failure(`${what} has length ${n}`);
    return this.readUtf8(n, what);
  }

  /** A `nullable_bytes` as a view (not a copy): null for length -1. */
  nullableBytes(what = 'bytes'): Buffer | null {
    const n = this.readInt32(what);
    if (n === -1) return null;
    if (n < 0) throw this.failure(`${what} has length ${n}`);
    return this.readBytes(n, what);
  }

  /** A `bytes` as a view. */
  bytes(what = 'bytes'): Buffer {
    const b = this.nullableBytes(what);
    if (b === null) throw this.failure(`${what} is null`);
    return b;
  }

  /** The next `n` bytes as a view. */
  raw(n: number, what = 'bytes'): Buffer {
    return this.readBytes(n, what);
  }

  /**
   * `[T]`: the count, then `read` that many times. A count above the bytes left (every item
   * takes at least one byte) is refused before anything is read, so a hostile count allocates
   * nothing.
   */
  array<T>(read: (r: this) => T, what = 'array'): T[] {
    const items = this.nullableArray(read, what);
    if (items === null) throw this.failure(`${what} is null`);
    return items;
  }

  /** `[T]` where count -1 is null. */
  nullableArray<T>(read: (r: this) => T, what = 'array'): T[] | null {
    const n = this.readInt32(`${what} count`);
    if (n === -1) return null;
    if (n < 0 || n > this.remaining) throw this.failure(`${what} count ${n} with ${this.remaining} bytes left`);
    const out: T[] = [];
    for (let i = 0; i < n; i++) out.push(read(this));
    return out;
  }

  /** @throws KafkaProtocolError (InvalidRequest) unless every byte has been read */
  done(what: string): void {
    this.assertDone(what);
  }
}
