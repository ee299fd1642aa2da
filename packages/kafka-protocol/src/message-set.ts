/**
 * Kafka's message sets of magic 0 and 1 (Kafka 0.10; record batches of magic 2 are not
 * supported):
 *
 * ```
 * MessageSet => (offset int64 | message_size int32 | Message)*   no count: the enclosing bytes field gives the size
 * Message v0 => crc uint32 | magic int8 (0) | attributes int8 | key nullable_bytes | value nullable_bytes
 * Message v1 => crc uint32 | magic int8 (1) | attributes int8 | timestamp int64 | key nullable_bytes | value nullable_bytes
 *   crc         CRC-32 (IEEE) of every byte after it (magic to the end of value)
 *   attributes  bits 0-2 codec: 0 none, 1 gzip (2 snappy, 3 lz4: refused); bit 3 timestamp type
 *   timestamp   ms since the epoch, -1 for none
 * A compressed message (wrapper) has a null key and, as value, the compressed bytes of an inner
 * MessageSet of uncompressed messages. In magic 1 the inner offsets are relative (0..n-1) and the
 * wrapper carries the offset of the last inner message; in magic 0 they are absolute.
 * ```
 */
import { crc32Range, crcAddon, decompressWrapper } from '@klog/protocol';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import { KafkaErrorCode, KafkaProtocolError } from './errors.js';

const gzipAsync = promisify(gzip);

/** Bytes before a message's crc: offset and message_size. */
export const logOverheadBytes = 12;
/** Mask of the codec bits in `attributes`. */
export const kafkaCodecMask = 0x07;
/** Kafka's codec numbers. */
export const KafkaCodec = { None: 0, Gzip: 1, Snappy: 2, Lz4: 3 } as const;

/** One decoded (uncompressed) Kafka message; key and value are views of the bytes decoded. */
export interface KafkaMessage {
  /** The offset as written (for a produced set, whatever the producer put: the broker assigns its own). */
  readonly offset: number;
  readonly magic: 0 | 1;
  /** ms since the epoch; undefined for magic 0 or a timestamp of -1. */
  readonly timestamp: number | undefined;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
}

/** Bytes one message takes in a set, offset and size fields included. */
export function kafkaMessageSize(magic: 0 | 1, keyBytes: number, valueBytes: number): number {
  return logOverheadBytes + 4 + 1 + 1 + (magic === 1 ? 8 : 0) + 4 + keyBytes + 4 + valueBytes;
}

/**
 * Writes one message at `pos` of `buf` (room for {@link kafkaMessageSize} bytes must be there)
 * but for its CRC, which {@link writeKafkaCrcs} fills in afterwards, one call for a whole set.
 * @param timestamp ms since the epoch, or undefined for -1 (ignored for magic 0)
 * @returns the position after it
 */
function writeKafkaMessage(
  buf: Buffer,
  pos: number,
  offset: number,
  magic: 0 | 1,
  attributes: number,
  timestamp: number | undefined,
  key: Uint8Array | null,
  value: Uint8Array | null,
): number {
  const start = pos;
  pos = writeInt64(buf, pos, offset);
  pos += 8; // message_size (below) and crc
  pos = buf.writeInt8(magic, pos);
  pos = buf.writeInt8(attributes, pos);
  if (magic === 1) pos = writeInt64(buf, pos, timestamp ?? -1);
  pos = writeNullableBytes(buf, pos, key);
  pos = writeNullableBytes(buf, pos, value);
  buf.writeInt32BE(pos - start - logOverheadBytes, start + 8);
  return pos;
}

/**
 * Copies of byte ranges from one source buffer into a message set being written, queued and then
 * done by {@link flush} in one call into klog's addon (`copyRanges`; one `Buffer.copy` each
 * without it): re-framing a set copies each key and value, and a copy per message from
 * JavaScript costs a view and a call each.
 */
export class KafkaCopies {
  private plan = new Int32Array(3 * 1024);
  private count = 0;

  /** Queues a copy of `length` bytes from the source at `from` to the set at `to`. */
  add(from: number, to: number, length: number): void {
    const at = 3 * this.count;
    if (at + 3 > this.plan.length) {
      const bigger = new Int32Array(2 * this.plan.length);
      bigger.set(this.plan);
      this.plan = bigger;
    }
    this.plan[at] = from;
    this.plan[at + 1] = to;
    this.plan[at + 2] = length;
    this.count++;
  }

  /** Does the queued copies from `src` into `dst`, and forgets them. */
  flush(src: Buffer, dst: Buffer): void {
    if (crcAddon?.copyRanges !== undefined) crcAddon.copyRanges(src, dst, this.plan, this.count);
    else for (let i = 0; i < 3 * this.count; i += 3) src.copy(dst, this.plan[i + 1], this.plan[i], this.plan[i]! + this.plan[i + 2]!);
    this.count = 0;
  }
}

/**
 * Writes at `pos` of `buf` an uncompressed message whose key (null when `keyStart` is -1) and
 * value are bytes `[keyStart, keyEnd)` and `[valueStart, valueEnd)` of a source buffer, queued
 * on `copies` (flush them from that source), without its CRC (fill it with
 * {@link writeKafkaCrcs}, one call for a whole set): what re-framing a fetched klog message set
 * does, with no view or object per message. Room for {@link kafkaMessageSize} bytes must be there.
 * @param timestamp ms since the epoch, or -1 for none (ignored for magic 0)
 * @returns the position after it
 */
export function writeKafkaMessageOf(
  buf: Buffer,
  pos: number,
  offset: number,
  magic: 0 | 1,
  timestamp: number,
  copies: KafkaCopies,
  keyStart: number,
  keyEnd: number,
  valueStart: number,
  valueEnd: number,
): number {
  const start = pos;
  pos = writeInt64(buf, pos, offset);
  pos += 8; // message_size (below) and crc
  buf[pos++] = magic;
  buf[pos++] = 0;
  if (magic === 1) pos = writeInt64(buf, pos, timestamp);
  if (keyStart < 0) pos = writeInt32(buf, pos, -1);
  else {
    pos = writeInt32(buf, pos, keyEnd - keyStart);
    copies.add(keyStart, pos, keyEnd - keyStart);
    pos += keyEnd - keyStart;
  }
  pos = writeInt32(buf, pos, valueEnd - valueStart);
  copies.add(valueStart, pos, valueEnd - valueStart);
  pos += valueEnd - valueStart;
  writeInt32(buf, start + 8, pos - start - logOverheadBytes);
  return pos;
}

/** An int32 big-endian by byte stores (the Buffer methods check their arguments, this runs per message). */
function writeInt32(buf: Buffer, pos: number, v: number): number {
  buf[pos] = v >>> 24;
  buf[pos + 1] = v >>> 16;
  buf[pos + 2] = v >>> 8;
  buf[pos + 3] = v;
  return pos + 4;
}

/**
 * Fills the crc field of every message of the message set `buf[start, end)` (whose other
 * fields are written): one call into klog's CRC addon for the whole set where it is loaded
 * (@klog/protocol's `crcAddon.writeKafkaCrcs`), else one CRC per message in JavaScript.
 * @throws KafkaProtocolError (CorruptMessage) when the range is not a run of whole messages
 *   (the messages before the fault are written)
 */
export function writeKafkaCrcs(buf: Buffer, start: number, end: number): void {
  if (crcAddon?.writeKafkaCrcs !== undefined) {
    try {
      crcAddon.writeKafkaCrcs(buf, start, end);
    } catch (err) {
      throw corrupt((err as Error).message);
    }
    return;
  }
  let pos = start;
  while (pos < end) {
    const size = end - pos >= logOverheadBytes ? buf.readInt32BE(pos + 8) : 0;
    if (size < 14 || size > end - pos - logOverheadBytes) throw corrupt(`not a run of whole messages at byte ${pos}`);
    const next = pos + logOverheadBytes + size;
    buf.writeUInt32BE(crc32Range(buf, pos + logOverheadBytes + 4, next), pos + logOverheadBytes);
    pos = next;
  }
}

/** A safe integer as int64 without a BigInt (two int32 halves). */
function writeInt64(buf: Buffer, pos: number, v: number): number {
  const high = Math.floor(v / 0x1_0000_0000);
  writeInt32(buf, pos, high);
  return writeInt32(buf, pos + 4, v - high * 0x1_0000_0000);
}

function writeNullableBytes(buf: Buffer, pos: number, b: Uint8Array | null): number {
  if (b === null) return buf.writeInt32BE(-1, pos);
  pos = buf.writeInt32BE(b.length, pos);
  buf.set(b, pos);
  return pos + b.length;
}

/** What a message set to encode holds: messages without offsets, numbered from `baseOffset`. */
export interface KafkaMessageInput {
  readonly timestamp?: number | undefined;
  readonly key: Uint8Array | null;
  readonly value: Uint8Array | null;
}

/** Encodes uncompressed messages as a message set with offsets `baseOffset`, `baseOffset + 1`, ... */
export function encodeKafkaMessageSet(messages: readonly KafkaMessageInput[], magic: 0 | 1, baseOffset = 0): Buffer {
  let size = 0;
  for (const m of messages) size += kafkaMessageSize(magic, m.key?.length ?? 0, m.value?.length ?? 0);
  const buf = Buffer.allocUnsafe(size);
  let pos = 0;
  messages.forEach((m, i) => (pos = writeKafkaMessage(buf, pos, baseOffset + i, magic, 0, m.timestamp, m.key, m.value)));
  writeKafkaCrcs(buf, 0, pos);
  return buf;
}

/**
 * Encodes messages as one gzip wrapper (a message set of one message), as a Kafka producer of
 * magic 0 or 1 does: inner offsets 0..n-1, the wrapper at `offset`.
 */
export async function gzipKafkaMessageSet(messages: readonly KafkaMessageInput[], magic: 0 | 1, offset = messages.length - 1): Promise<Buffer> {
  const inner = encodeKafkaMessageSet(messages, magic);
  const value = await gzipAsync(inner);
  const timestamp = magic === 1 ? Math.max(-1, ...messages.map((m) => m.timestamp ?? -1)) : undefined;
  const buf = Buffer.allocUnsafe(kafkaMessageSize(magic, 0, value.length));
  writeKafkaCrcs(buf, 0, writeKafkaMessage(buf, 0, offset, magic, KafkaCodec.Gzip, timestamp === -1 ? undefined : timestamp, null, value));
  return buf;
}

/** How {@link decodeKafkaMessageSet} reads a set. */
export interface DecodeMessageSetOptions {
  /** Most bytes the inner set of one compressed message may have once decompressed. */
  readonly maxInnerBytes: number;
  /**
   * True for a fetched set, which may end in a partial message (dropped); false (default) for a
   * produced set, where a partial message is corrupt.
   */
  readonly allowPartialTail?: boolean;
}

/**
 * Decodes a message set of magic 0 or 1, decompressing gzip wrappers (inner offsets made
 * absolute). Every CRC is checked.
 * @returns the messages, in order
 * @throws KafkaProtocolError: CorruptMessage for a bad length, magic, CRC, a partial message
 *   (unless allowed), a codec other than gzip, gzip that does not inflate or an inner set over
 *   `maxInnerBytes` (RecordListTooLarge)
 */
export async function decodeKafkaMessageSet(buf: Buffer, options: DecodeMessageSetOptions): Promise<KafkaMessage[]> {
  const out: KafkaMessage[] = [];
  await walkSet(buf, options, out, false);
  return out;
}

async function walkSet(buf: Buffer, options: DecodeMessageSetOptions, out: KafkaMessage[], inner: boolean): Promise<void> {
  let pos = 0;
  while (pos < buf.length) {
    const end = kafkaMessageEnd(buf, pos, options.allowPartialTail === true && !inner);
    if (end < 0) return;
    const m = decodeOne(buf, pos, end);
    if (m.codec === KafkaCodec.None) out.push(m.message);
    else if (inner) throw corrupt(`inner message at byte ${pos} is itself compressed`);
    else if (m.codec !== KafkaCodec.Gzip) throw corrupt(`compression codec ${m.codec} is not supported (gzip only)`);
    else await inflate(m.message, options, out);
    pos = end;
  }
}

async function inflate(wrapper: KafkaMessage, options: DecodeMessageSetOptions, out: KafkaMessage[]): Promise<void> {
  if (wrapper.value === null) throw corrupt('compressed message without a value');
  let innerSet: Buffer | undefined;
  try {
    innerSet = await decompressWrapper({ attributes: 1, payload: wrapper.value }, options.maxInnerBytes);
  } catch (err) {
    throw corrupt((err as Error).message);
  }
  if (innerSet === undefined) {
    throw new KafkaProtocolError(KafkaErrorCode.RecordListTooLarge, `compressed message set inflates past ${options.maxInnerBytes} bytes`);
  }
  const first = out.length;
  await walkSet(innerSet, options, out, true);
  const count = out.length - first;
  // magic 1: relative inner offsets, the wrapper holding the last one's absolute offset.
  const base = wrapper.magic === 1 ? wrapper.offset - (count > 0 ? out[out.length - 1]!.offset : 0) : 0;
  if (wrapper.magic === 1) for (let i = first; i < out.length; i++) out[i] = { ...out[i]!, offset: base + out[i]!.offset };
}

/**
 * Where the message at `buf[pos]` of a set ends (from its size field), or -1 when the set ends
 * inside it and `partialOk`.
 * @throws KafkaProtocolError (CorruptMessage) for a size below a message's smallest, or a partial message when not `partialOk`
 */
export function kafkaMessageEnd(buf: Buffer, pos: number, partialOk = false): number {
  if (buf.length - pos < logOverheadBytes) {
    if (partialOk) return -1;
    throw corrupt(`partial message head at byte ${pos}`);
  }
  const size = buf.readInt32BE(pos + 8);
  if (size < 14) throw corrupt(`message_size ${size} at byte ${pos}`);
  const end = pos + logOverheadBytes + size;
  if (end > buf.length) {
    if (partialOk) return -1;
    throw corrupt(`message of ${size} bytes at byte ${pos} runs past the set's ${buf.length}`);
  }
  return end;
}

function decodeOne(buf: Buffer, pos: number, end: number): { message: KafkaMessage; codec: number } {
  const m = scanKafkaMessage(buf, pos, end, newKafkaMessageSpan());
  const key = m.keyStart < 0 ? null : buf.subarray(m.keyStart, m.keyEnd);
  const value = m.valueStart < 0 ? null : buf.subarray(m.valueStart, end);
  const offset = readInt64(buf, pos) ?? 0;
  const timestamp = m.timestampAt < 0 ? undefined : readInt64(buf, m.timestampAt)!;
  return { message: { offset, magic: m.magic, timestamp, key, value }, codec: m.codec };
}

/**
 * Where the fields of one message lie in its bytes ({@link scanKafkaMessage} fills it; one span is
 * reused for every message of a set).
 */
export interface KafkaMessageSpan {
  magic: 0 | 1;
  /** The codec bits of `attributes`. */
  codec: number;
  /** Position of the 8 timestamp bytes (magic 1, a timestamp other than -1), or -1 for none. */
  timestampAt: number;
  /** The key is `[keyStart, keyEnd)`; keyStart -1 for a null key. */
  keyStart: number;
  keyEnd: number;
  /** The value runs from `valueStart` to the message's end; -1 for a null value. */
  valueStart: number;
}

/** A span to pass to {@link scanKafkaMessage}. */
export function newKafkaMessageSpan(): KafkaMessageSpan {
  return { magic: 0, codec: 0, timestampAt: -1, keyStart: -1, keyEnd: -1, valueStart: -1 };
}

/**
 * Checks the message at `buf[pos, end)` (offset and size fields included, `end` from its size
 * field) and fills `span` with where its fields are.
 * @throws KafkaProtocolError (CorruptMessage) for a bad CRC, magic, timestamp or lengths
 */
export function scanKafkaMessage(buf: Buffer, pos: number, end: number, span: KafkaMessageSpan): KafkaMessageSpan {
  const crc = buf.readUInt32BE(pos + logOverheadBytes);
  const body = pos + logOverheadBytes + 4;
  if (crc32Range(buf, body, end) !== crc) throw corrupt(`CRC mismatch in the message at byte ${pos}`);
  const magic = buf.readInt8(body);
  if (magic !== 0 && magic !== 1) throw corrupt(`magic byte ${magic} at byte ${pos} (0 and 1 are supported)`);
  span.magic = magic;
  span.codec = buf.readInt8(body + 1) & kafkaCodecMask;
  let p = body + 2;
  span.timestampAt = -1;
  if (magic === 1) {
    if (end - p < 8) throw corrupt(`message at byte ${pos} too short for its timestamp`);
    const t = readInt64(buf, p);
    if (t !== undefined && t >= 0) span.timestampAt = p;
    else if (t !== -1) throw corrupt(`timestamp ${buf.readBigInt64BE(p)} at byte ${pos}`);
    p += 8;
  }
  const keyBytes = nullableLength(buf, p, end, pos);
  span.keyStart = keyBytes < 0 ? -1 : p + 4;
  p += 4 + Math.max(0, keyBytes);
  span.keyEnd = p;
  const valueBytes = nullableLength(buf, p, end, pos);
  span.valueStart = valueBytes < 0 ? -1 : p + 4;
  p += 4 + Math.max(0, valueBytes);
  if (p !== end) throw corrupt(`message at byte ${pos}: ${end - p} bytes after the value`);
  return span;
}

/** An int64 as a number without a BigInt; undefined outside ±2^53. */
function readInt64(buf: Buffer, pos: number): number | undefined {
  const high = buf.readInt32BE(pos);
  if (high > 0x1fffff || high < -0x200000) return undefined;
  return high * 0x1_0000_0000 + buf.readUInt32BE(pos + 4);
}

/** The length of the nullable bytes at `p`, checked against `end`: -1 for null. */
function nullableLength(buf: Buffer, p: number, end: number, at: number): number {
  if (end - p < 4) throw corrupt(`message at byte ${at} cut inside a length`);
  const n = buf.readInt32BE(p);
  if (n < -1 || n > end - p - 4) throw corrupt(`message at byte ${at}: length ${n} with ${end - p - 4} bytes left`);
  return n;
}

function corrupt(why: string): KafkaProtocolError {
  return new KafkaProtocolError(KafkaErrorCode.CorruptMessage, `corrupt message set: ${why}`);
}
