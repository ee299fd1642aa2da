/**
 * CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320): the checksum of every message's payload
 * (docs/design.md §1), and the arithmetic that checks all the CRCs of a message set with one pass over its
 * bytes.
 *
 * Two ways to compute it. Where klog's CRC addon was built (`native/crc32.cc`, by `pnpm install`
 * on Linux with ISA-L installed) it is {@link crcAddon}: ISA-L's folding CRC, and one call for
 * all the messages of a set (`writeCrcs`, `firstBadCrc`, used through message.ts). Elsewhere, or
 * with `KLOG_DISABLE_NATIVE_CRC=1`, zlib's `crc32` (node:zlib) and the lookup tables below. Which
 * one runs is {@link crcSupport}. Loading the addon is the only thing this package does outside
 * memory, once, when it is first imported.
 *
 * Costs that shaped this file (CPU time per call, 2-core AMD EPYC, Node 20; docs/benchmarks.md):
 * zlib's `crc32` spends about 220 ns in the call itself and then reads about 3 GB/s; the addon
 * about 150 ns per call, then about 30 ns per 200-byte payload; the lookup tables below (four
 * bytes at a time) have no call cost but read about 0.4 GB/s. Through the tables against zlib:
 * 16 bytes 58 against 118 ns, 50 bytes 145 against 223 ns, 100 bytes 198 against 247 ns, 127
 * bytes 286 against 249 ns, 200 bytes 463 against 266 ns. So {@link crc32Range} uses the tables
 * below {@link smallCrcBytes} and the addon or zlib above. Without the addon, a 200-byte message
 * set of 5,000 messages checked one CRC call per message costs those 250 ns per message;
 * checked as a whole ({@link MessageSetCrc}), one zlib call over the set plus a few table
 * lookups per message (about 115 ns per message in all); through the addon, one call checks
 * each message on its own in about 35 ns per message.
 *
 * Checking a whole set rests on CRC-32 being linear: the CRC of `A ‖ B` follows from the CRCs of
 * `A` and `B` and the length of `B` ({@link crc32Combine}). Folding, message by message, the
 * header bytes and the CRC each message claims for its payload gives the CRC the whole set has
 * when every claim is true; one zlib call computes the CRC it does have. A single message whose
 * claim is false always makes the two differ (the difference is that message's error times a
 * power of x, which is never 0 modulo the polynomial), as a per-message check would; errors in
 * two or more messages cancel with probability 2^-32, the same odds at which a CRC misses a
 * random error. It is a check against accidents (disk, memory, network, bugs), like the CRC
 * itself, not against a writer that crafts cancelling errors on purpose.
 */
import { createRequire } from 'node:module';
import { crc32 as zlibCrc32 } from 'node:zlib';

/**
 * What klog's CRC addon exports (native/crc32.cc). Each function works on `bytes[start, end)`
 * and throws TypeError or RangeError for arguments that do not name such a range.
 */
export interface CrcAddon {
  /** The CRC-32 (IEEE) of `bytes[start, end)`, unsigned 32-bit. */
  crc32(bytes: Uint8Array, start: number, end: number): number;
  /**
   * -1 when every message of `bytes[start, end)` holds its payload's CRC, else the position in
   * `bytes` of the first that does not.
   * @throws RangeError when the range is not a run of whole messages
   */
  firstBadCrc(bytes: Uint8Array, start: number, end: number): number;
  /**
   * Stores in each message of `bytes[start, end)` its payload's CRC.
   * @throws RangeError when the range is not a run of whole messages (messages before the fault are written)
   */
  writeCrcs(bytes: Uint8Array, start: number, end: number): void;
  /**
   * Stores in each message of the Kafka message set `bytes[start, end)` (magic 0 or 1:
   * `offset int64 | message_size int32 | crc uint32 | magic..value`) the CRC of its bytes after
   * the crc field; used by @klog/kafka-protocol to frame a fetched set with one call.
   * @throws RangeError when the range is not a run of whole Kafka messages (messages before the fault are written)
   */
  writeKafkaCrcs(bytes: Uint8Array, start: number, end: number): void;
  /**
   * For i < count, copies `plan[3i + 2]` bytes from `src` at `plan[3i]` to `dst` at
   * `plan[3i + 1]`: the keys and values of a re-framed Kafka message set in one call.
   * @throws RangeError at a range outside either buffer (the ranges before it are copied)
   */
  copyRanges(src: Uint8Array, dst: Uint8Array, plan: Int32Array, count: number): void;
  /**
   * Writes at `dst[at]` the klog message set of the uncompressed Kafka message set (magic 0 or
   * 1) `src[start, end)`, each message checked (CRC, magic, timestamp, lengths) and its key and
   * timestamp put in a metadata header (native/kafka-messages.cc): @klog/kafka-protocol's
   * Produce conversion in one call. `src` and `dst` must not overlap.
   * @returns the position in `dst` after the set, or -1 when a message is not one it converts
   *   (damaged, compressed, a header over 65535 bytes, `dst` too short): take the JavaScript path
   */
  klogOfKafka(src: Uint8Array, start: number, end: number, dst: Uint8Array, at: number): number;
  /**
   * Re-frames the uncompressed klog messages of `src[start, end)`, read from the log at byte
   * offset `baseOffset`, as Kafka messages of `magic` from `dst[at]` (native/kafka-messages.cc),
   * klog CRCs checked and Kafka CRCs filled: @klog/kafka-protocol's Fetch re-framing in one
   * call. `result` gets `[where it stopped in src, end in dst, messages written, position in src
   * of the last (-1 for none)]`. `src` and `dst` must not overlap.
   * @returns why it stopped: 0 at `end`, 1 at bytes that are not a whole message (a partial
   *   tail or damage), 2 `dst` full, 3 at a message it does not re-frame (a bad CRC, compressed,
   *   a bad metadata header)
   */
  kafkaOfKlog(src: Uint8Array, start: number, end: number, dst: Uint8Array, at: number, baseOffset: number, magic: 0 | 1, result: Float64Array): number;
}

/** How CRCs are computed: by the CRC addon (`native`) or in JavaScript (`js`), and why not natively. */
export interface CrcSupport {
  readonly path: 'native' | 'js';
  /** Why not natively, when `path` is `js` (not built, ISA-L missing at run time, turned off). */
  readonly reason?: string;
}

function loadCrcAddon(): { addon?: CrcAddon; support: CrcSupport } {
  if (process.env.KLOG_DISABLE_NATIVE_CRC === '1') return { support: { path: 'js', reason: 'KLOG_DISABLE_NATIVE_CRC=1' } };
  try {
    const addon = createRequire(import.meta.url)('../build/Release/klog_crc32.node') as CrcAddon;
    return { addon, support: { path: 'native' } };
  } catch (err) {
    return { support: { path: 'js', reason: `CRC addon not loaded: ${(err as Error).message.split('\n')[0]}` } };
  }
}

const loaded = loadCrcAddon();

/** The CRC addon when it is loaded (see the file comment), else `undefined`. */
export const crcAddon: CrcAddon | undefined = loaded.addon;

/** How this process computes CRCs: the native addon or JavaScript. */
export const crcSupport: CrcSupport = loaded.support;

/** The reflected CRC-32 (IEEE) polynomial. */
const polynomial = 0xedb88320;

/**
 * Inputs shorter than this many bytes go through the lookup tables, longer ones through the
 * addon (where the tables cost what its call does, about 56 bytes) or zlib (about 112 bytes);
 * see the file comment.
 */
export const smallCrcBytes = crcAddon === undefined ? 112 : 56;

/** Byte-at-a-time lookup table. */
const table = new Int32Array(256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? polynomial ^ (c >>> 1) : c >>> 1;
  table[n] = c;
}
/** Four-bytes-at-a-time tables ("slicing by 4"): `table4[k * 256 + b]` is byte `b` followed by `k` zero bytes. */
const table4 = new Int32Array(1024);
for (let n = 0; n < 256; n++) {
  let c = table[n]!;
  table4[n] = c;
  for (let k = 1; k < 4; k++) {
    c = table[c & 0xff]! ^ (c >>> 8);
    table4[k * 256 + n] = c;
  }
}

/**
 * CRC-32 (IEEE) of `buf[start, end)` continued from `crc` (the CRC of the bytes before them; 0
 * for none), through the lookup tables. Fast for a few bytes; use {@link crc32Ieee} for more.
 * @returns an unsigned 32-bit number
 */
export function crc32Extend(crc: number, buf: Uint8Array, start: number, end: number): number {
  let r = ~crc;
  let i = start;
  for (; i + 4 <= end; i += 4) {
    r ^= buf[i]! | (buf[i + 1]! << 8) | (buf[i + 2]! << 16) | (buf[i + 3]! << 24);
    r = table4[768 + (r & 0xff)]! ^ table4[512 + ((r >>> 8) & 0xff)]! ^ table4[256 + ((r >>> 16) & 0xff)]! ^ table4[r >>> 24]!;
  }
  for (; i < end; i++) r = table[(r ^ buf[i]!) & 0xff]! ^ (r >>> 8);
  return ~r >>> 0;
}

/** CRC-32 (IEEE) of `bytes` as an unsigned 32-bit number: the lookup tables for short inputs, the addon or zlib for longer ones. */
export function crc32Ieee(bytes: Uint8Array): number {
  if (bytes.length < smallCrcBytes) return crc32Extend(0, bytes, 0, bytes.length);
  return crcAddon !== undefined ? crcAddon.crc32(bytes, 0, bytes.length) : zlibCrc32(bytes) >>> 0;
}

/**
 * CRC-32 (IEEE) of `buf[start, end)`, without making a view of it when it is short or the addon is loaded.
 * @throws RangeError unless `0 <= start <= end <= buf.length`, in integers
 */
export function crc32Range(buf: Uint8Array, start: number, end: number): number {
  // The addon checks the range itself; the JavaScript paths check it here.
  if (crcAddon !== undefined && end - start >= smallCrcBytes) return crcAddon.crc32(buf, start, end);
  checkCrcRange(buf, start, end);
  if (end - start < smallCrcBytes) return crc32Extend(0, buf, start, end);
  return zlibCrc32(buf.subarray(start, end)) >>> 0;
}

/**
 * Checks that `[start, end)` is a range of `buf`, as the CRC addon does on its side.
 * @throws RangeError unless `0 <= start <= end <= buf.length`, in integers
 */
export function checkCrcRange(buf: Uint8Array, start: number, end: number): void {
  if (!(Number.isInteger(start) && Number.isInteger(end) && start >= 0 && start <= end && end <= buf.length)) {
    throw new RangeError(`range [${start}, ${end}) is not within the ${buf.length} bytes`);
  }
}

/** `a(x) · b(x) mod P(x)`, both in the reflected bit order of the CRC (zlib's `multmodp`). */
function multModP(a: number, b: number): number {
  if (a === 0) return 0;
  let m = 0x80000000;
  let p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) === 0) break;
    }
    m >>>= 1;
    b = b & 1 ? (b >>> 1) ^ polynomial : b >>> 1;
  }
  return p >>> 0;
}

/**
 * The lookup table that multiplies a CRC by the constant `k(x)` modulo P: 4 × 256 entries, one
 * block per byte of the CRC (multiplying is linear, so the product is the XOR of the 4 blocks'
 * entries). Built from the 32 products of `k` with single bits.
 */
function multiplierTable(k: number): Int32Array {
  const t = new Int32Array(1024);
  for (let j = 0; j < 4; j++) {
    const block = j * 256;
    for (let bit = 0; bit < 8; bit++) {
      const basis = multModP(k, (1 << (8 * j + bit)) >>> 0) | 0;
      const step = 1 << bit;
      for (let b = step; b < 2 * step; b++) t[block + b] = t[block + b - step]! ^ basis;
    }
  }
  return t;
}

function applyTable(t: Int32Array, c: number): number {
  return t[c & 0xff]! ^ t[256 + ((c >>> 8) & 0xff)]! ^ t[512 + ((c >>> 16) & 0xff)]! ^ t[768 + (c >>> 24)]!;
}

/**
 * `shiftTables[k]` multiplies by x^(8·2^k): shifting a CRC over 2^k zero bytes. Constants of the
 * polynomial (the same for every caller), built on first use.
 */
let shiftTables: Int32Array[] | undefined;

function buildShiftTables(): Int32Array[] {
  const out: Int32Array[] = [];
  let power = 0x00800000; // x^8 (x^0 is bit 31 in reflected order)
  for (let k = 0; k < 32; k++) {
    out.push(multiplierTable(power));
    power = multModP(power, power);
  }
  return out;
}

/** `crc · x^(8n) mod P` through the shift tables: 4 lookups per set bit of `n`. */
function shiftBytesSlow(crc: number, n: number): number {
  const tables = (shiftTables ??= buildShiftTables());
  let c = crc;
  for (let m = n, i = 0; m > 0; m >>>= 1, i++) if (m & 1) c = applyTable(tables[i]!, c);
  return c;
}

/** Most lengths that get a multiplier table of their own (4 KiB each), per {@link LengthShifter}. */
const maxLengthTables = 128;
/** Uses of a length, through the general path, before it gets its own table. */
const usesBeforeTable = 16;
/** Lengths counted toward a table of their own (counting stops for new lengths once this many are counted). */
const maxCountedLengths = 1024;

/**
 * `crc · x^(8n) mod P`: what the CRC of some bytes contributes to the CRC of those bytes followed
 * by `n` more. 4 table lookups for a length this shifter has seen often (it gets a table of its
 * own, see {@link usesBeforeTable}), else 4 lookups per set bit of `n`. Its caches live on the
 * instance (one per {@link MessageSetCrc}), never in module state.
 */
class LengthShifter {
  /** Multiplier tables of frequent lengths: multiply by x^(8n) with 4 lookups. Never evicted. */
  private readonly lengthTables = new Map<number, Int32Array>();
  /** Uses of lengths that have no table yet. */
  private readonly lengthUses = new Map<number, number>();
  /** The length of the last table used, and the table: message sets mostly repeat one size. */
  private lastLength = -1;
  private lastTable: Int32Array | undefined;

  shift(crc: number, n: number): number {
    if (n === this.lastLength) return applyTable(this.lastTable!, crc);
    let t = this.lengthTables.get(n);
    if (t === undefined) {
      const uses = this.lengthUses.get(n);
      if (this.lengthTables.size >= maxLengthTables || uses === undefined || uses < usesBeforeTable) {
        if (uses !== undefined) this.lengthUses.set(n, uses + 1);
        else if (this.lengthUses.size < maxCountedLengths) this.lengthUses.set(n, 1);
        return shiftBytesSlow(crc, n);
      }
      t = multiplierTable(shiftBytesSlow(0x80000000, n) >>> 0); // x^(8n): x^0 shifted over n bytes
      this.lengthTables.set(n, t);
      this.lengthUses.delete(n);
    }
    this.lastLength = n;
    this.lastTable = t;
    return applyTable(t, crc);
  }
}

/**
 * CRC-32 (IEEE) of `A ‖ B` from `crcA` = CRC(A), `crcB` = CRC(B) and the length of B in bytes
 * (zlib's `crc32_combine`).
 * @returns an unsigned 32-bit number
 */
export function crc32Combine(crcA: number, crcB: number, lengthB: number): number {
  return (shiftBytesSlow(crcA, lengthB) ^ crcB) >>> 0;
}

/**
 * Folds messages of a message set, one by one, into the CRC the bytes folded so far have if
 * every message's stored CRC is right; {@link matches} then compares it with the CRC the bytes
 * really have (one zlib call). See the file comment for why this checks every message.
 *
 * ```ts
 * const f = new MessageSetCrc();
 * for (each whole message at pos with length field `length`) f.add(buf, pos, length);
 * if (!f.matches(buf, 0, end)) { ...check message by message to find the bad one... }
 * ```
 */
export class MessageSetCrc {
  /** CRC of the folded bytes if every stored CRC is right. */
  private expected = 0;
  /** Shifts CRCs over payload lengths, with this instance's tables of the lengths it folds often. */
  private readonly shifter = new LengthShifter();

  /**
   * Folds the whole message at `buf[position]` whose length field is `length` (≥ 6): its 10
   * header bytes as they are, its payload by the CRC stored in the header.
   */
  add(buf: Uint8Array, position: number, length: number): void {
    // The 10 header bytes through the tables, four at a time (this runs once per message).
    let r = ~this.expected ^ (buf[position]! | (buf[position + 1]! << 8) | (buf[position + 2]! << 16) | (buf[position + 3]! << 24));
    r = table4[768 + (r & 0xff)]! ^ table4[512 + ((r >>> 8) & 0xff)]! ^ table4[256 + ((r >>> 16) & 0xff)]! ^ table4[r >>> 24]!;
    const b6 = buf[position + 6]!;
    const b7 = buf[position + 7]!;
    const b8 = buf[position + 8]!;
    const b9 = buf[position + 9]!;
    r ^= buf[position + 4]! | (buf[position + 5]! << 8) | (b6 << 16) | (b7 << 24);
    r = table4[768 + (r & 0xff)]! ^ table4[512 + ((r >>> 8) & 0xff)]! ^ table4[256 + ((r >>> 16) & 0xff)]! ^ table4[r >>> 24]!;
    r = table[(r ^ b8) & 0xff]! ^ (r >>> 8);
    r = table[(r ^ b9) & 0xff]! ^ (r >>> 8);
    const stored = (b6 << 24) | (b7 << 16) | (b8 << 8) | b9;
    this.expected = (this.shifter.shift(~r, length - 6) ^ stored) >>> 0;
  }

  /** The CRC the folded bytes have if every folded message's stored CRC is right. */
  get value(): number {
    return this.expected;
  }

  /**
   * True when the CRC of `buf[start, end)` (exactly the messages folded, in order) is the one
   * expected, i.e. every folded message's stored CRC is right (see the file comment).
   */
  matches(buf: Uint8Array, start: number, end: number): boolean {
    return crc32Range(buf, start, end) === this.expected;
  }
}
