/**
 * CRC-32: the table, addon and zlib paths agree with a reference; combining; checking a whole
 * message set at once; the CRCs of a run of messages written and checked in one call.
 */
import { existsSync } from 'node:fs';
import { crc32 as zlibCrc32 } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  crc32Combine,
  crc32Extend,
  crc32Ieee,
  crc32Range,
  encodeMessageSet,
  MessageSetCrc,
  scanMessageSet,
  smallCrcBytes,
  checkMessageAt,
  crcAddon,
  crcSupport,
  firstBadMessageCrc,
  writeMessage,
  writeMessageCrcs,
} from '../src/index.js';
import { crc32Reference, pseudoRandomBytes } from './helpers.js';

/** scanMessageSet as it was before whole-set CRC checks: one CRC per message, first problem wins. */
function scanOneByOne(buf: Buffer, maxMessageBytes?: number): { count: number; validBytes: number; status: string } {
  let pos = 0;
  let count = 0;
  while (pos < buf.length) {
    const c = checkMessageAt(buf, pos, buf.length, true, maxMessageBytes);
    if (c.status !== 'valid') return { count, validBytes: pos, status: c.status };
    pos += c.size;
    count++;
  }
  return { count, validBytes: pos, status: 'valid' };
}

describe('crc32Ieee', () => {
  it('matches the reference on both sides of the table/zlib threshold', () => {
    for (let n = 0; n <= 2 * smallCrcBytes + 3; n++) {
      const b = pseudoRandomBytes(n, n + 1);
      expect(crc32Ieee(b)).toBe(crc32Reference(b));
      expect(crc32Range(b, 0, n)).toBe(crc32Reference(b));
    }
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), fc.nat(600), fc.nat(600), (u, a, b) => {
        const buf = Buffer.from(u);
        const start = Math.min(a, b, buf.length);
        const end = Math.min(Math.max(a, b), buf.length);
        expect(crc32Range(buf, start, end)).toBe(zlibCrc32(buf.subarray(start, end)) >>> 0);
      }),
      { numRuns: 200 },
    );
  });

  it('extends a CRC over more bytes as zlib does', () => {
    const b = pseudoRandomBytes(100, 7);
    expect(crc32Extend(crc32Ieee(b.subarray(0, 37)), b, 37, 100)).toBe(crc32Ieee(b));
  });
});

describe('crc32Combine', () => {
  it('gives the CRC of the concatenation from the two CRCs and the second length', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.uint8Array({ maxLength: 5000 }), (a, b) => {
        expect(crc32Combine(crc32Ieee(a), crc32Ieee(b), b.length)).toBe(crc32Ieee(Buffer.concat([a, b])));
      }),
      { numRuns: 200 },
    );
  });

  it('gives the same results before and after a length gets a table of its own, interleaved with other lengths', () => {
    const a = pseudoRandomBytes(50, 1);
    for (let i = 0; i < 60; i++) {
      for (const n of [200, 10_500 + (i % 3), 7]) {
        const b = pseudoRandomBytes(n, i + n);
        expect(crc32Combine(crc32Ieee(a), crc32Ieee(b), n)).toBe(crc32Ieee(Buffer.concat([a, b])));
      }
    }
  });
});

describe('MessageSetCrc and scanMessageSet', () => {
  /** A set of `n` messages with payload sizes from `size(i)`. */
  function set(n: number, size: (i: number) => number): Buffer {
    return encodeMessageSet(Array.from({ length: n }, (_, i) => pseudoRandomBytes(size(i), i + 1)));
  }

  function fold(buf: Buffer): MessageSetCrc {
    const f = new MessageSetCrc();
    for (let pos = 0; pos < buf.length; pos += 4 + buf.readInt32BE(pos)) f.add(buf, pos, buf.readInt32BE(pos));
    return f;
  }

  it('matches a set whose CRCs are all right, of equal and of mixed sizes', () => {
    for (const s of [set(300, () => 200), set(300, (i) => (i * 37) % 700), set(1, () => 0), set(40, (i) => i)]) {
      expect(fold(s).matches(s, 0, s.length)).toBe(true);
      expect(scanMessageSet(s)).toEqual({ count: scanOneByOne(s).count, validBytes: s.length, partial: false, tooLarge: false });
    }
  });

  it('detects one wrong stored CRC or one damaged payload byte wherever it is', () => {
    const s = set(60, (i) => (i % 3 === 0 ? 200 : 13 + i));
    const starts: number[] = [];
    for (let pos = 0; pos < s.length; pos += 4 + s.readInt32BE(pos)) starts.push(pos);
    for (const [i, pos] of starts.entries()) {
      for (const at of [pos + 6, pos + 9, pos + 10, pos + 3 + s.readInt32BE(pos)]) {
        if (at >= pos + 4 + s.readInt32BE(pos)) continue; // an empty payload has no byte to damage
        const damaged = Buffer.from(s);
        damaged[at]! ^= 0x20;
        expect(fold(damaged).matches(damaged, 0, damaged.length)).toBe(false);
        const scan = scanMessageSet(damaged);
        expect({ count: scan.count, validBytes: scan.validBytes }).toEqual({ count: i, validBytes: pos });
        expect(scan.stopReason).toMatch(/CRC mismatch/);
        expect(scan.partial).toBe(false);
      }
    }
  });

  it('reports what the one-by-one scan reports, on damaged and cut sets', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ maxLength: 300 }), { minLength: 1, maxLength: 12 }),
        fc.nat(),
        fc.integer({ min: 0, max: 255 }),
        fc.nat(),
        fc.option(fc.integer({ min: 0, max: 400 }), { nil: undefined }),
        (payloads, where, xor, cut, maxMessageBytes) => {
          const s = Buffer.from(encodeMessageSet(payloads));
          if (xor !== 0) s[where % s.length]! ^= xor;
          const buf = s.subarray(0, s.length - (cut % Math.min(s.length, 20)));
          const scan = scanMessageSet(buf, buf.length, maxMessageBytes);
          const ref = scanOneByOne(buf, maxMessageBytes);
          expect({ count: scan.count, validBytes: scan.validBytes }).toEqual({ count: ref.count, validBytes: ref.validBytes });
          expect(scan.partial).toBe(ref.status === 'partial');
          expect(scan.stopReason === undefined).toBe(ref.status === 'valid');
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('the CRC addon', () => {
  const built = existsSync(new URL('../build/Release/klog_crc32.node', import.meta.url));
  const disabled = process.env.KLOG_DISABLE_NATIVE_CRC === '1';

  it('is used exactly when it was built and not turned off', () => {
    expect(crcSupport.path).toBe(built && !disabled ? 'native' : 'js');
    expect(crcAddon !== undefined).toBe(crcSupport.path === 'native');
    if (crcSupport.path === 'js') expect(crcSupport.reason).toMatch(/./);
    // CI builds it (ISA-L installed) and says so: then it must be there.
    if (process.env.KLOG_REQUIRE_NATIVE === '1' && !disabled) expect(crcSupport.path).toBe('native');
  });

  it.runIf(crcAddon !== undefined)('computes the CRC of any range as the reference does', () => {
    const b = pseudoRandomBytes(5000, 3);
    for (let n = 0; n <= 300; n++) expect(crcAddon!.crc32(b, 7, 7 + n)).toBe(crc32Reference(b.subarray(7, 7 + n)));
    expect(crcAddon!.crc32(b, 0, b.length)).toBe(crc32Reference(b));
  });

  it.runIf(crcAddon !== undefined)('refuses arguments that do not name a range of a Uint8Array', () => {
    const b = Buffer.alloc(10);
    const call = (...args: unknown[]) => (crcAddon!.crc32 as (...a: unknown[]) => number)(...args);
    expect(() => call(b, 0)).toThrow(TypeError);
    expect(() => call('abc', 0, 1)).toThrow(TypeError);
    expect(() => call(new Uint16Array(4), 0, 1)).toThrow(TypeError);
    expect(() => call(b, 0, '1')).toThrow(TypeError);
    expect(() => call(b, 0, 11)).toThrow(RangeError);
    expect(() => call(b, 5, 4)).toThrow(RangeError);
    expect(() => call(b, -1, 4)).toThrow(RangeError);
    expect(() => call(b, 0.5, 4)).toThrow(RangeError);
    expect(() => call(b, 0, Number.NaN)).toThrow(RangeError);
  });
});

describe('writeMessageCrcs and firstBadMessageCrc', () => {
  /** `payloads` as messages written from `at` on, CRCs left unwritten (garbage). */
  function unsealed(payloads: readonly Uint8Array[], at: number): { buf: Buffer; starts: number[]; end: number } {
    const size = payloads.reduce((n, p) => n + 10 + p.length, 0);
    const buf = Buffer.alloc(at + size + 3, 0xa5);
    const starts: number[] = [];
    let pos = at;
    for (const p of payloads) {
      starts.push(pos);
      pos = writeMessage(buf, pos, p, 0, false);
    }
    return { buf, starts, end: pos };
  }

  it('write the CRCs encodeMessageSet writes, and find none wrong in them', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 400 }), { maxLength: 20 }), fc.nat(9), (payloads, at) => {
        const { buf, end } = unsealed(payloads, at);
        writeMessageCrcs(buf, at, end);
        expect(buf.subarray(at, end)).toEqual(encodeMessageSet(payloads));
        expect(firstBadMessageCrc(buf, at, end)).toBe(-1);
      }),
      { numRuns: 300 },
    );
  });

  it('name the first message whose CRC or payload was damaged, by its position in the buffer', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ minLength: 1, maxLength: 300 }), { minLength: 1, maxLength: 12 }),
        fc.nat(),
        fc.nat(),
        fc.integer({ min: 1, max: 255 }),
        fc.nat(9),
        (payloads, which, where, xor, at) => {
          const { buf, starts, end } = unsealed(payloads, at);
          writeMessageCrcs(buf, at, end);
          const i = which % payloads.length;
          const first = starts[i]! + 6; // the crc field, then the payload
          buf[first + (where % (4 + payloads[i]!.length))]! ^= xor;
          expect(firstBadMessageCrc(buf, at, end)).toBe(starts[i]);
          expect(firstBadMessageCrc(buf, at, starts[i]!)).toBe(-1);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('refuse a range that is not a run of whole messages, with a RangeError', () => {
    const s = encodeMessageSet([Buffer.alloc(20, 1), Buffer.alloc(30, 2)]);
    expect(() => firstBadMessageCrc(s, 0, s.length - 1)).toThrow(RangeError); // cut short
    expect(() => writeMessageCrcs(Buffer.from(s), 0, s.length - 1)).toThrow(RangeError);
    expect(() => firstBadMessageCrc(s, 0, 9)).toThrow(RangeError); // less than a header
    expect(() => firstBadMessageCrc(s, 1, s.length)).toThrow(RangeError); // misaligned
    const short = Buffer.from(s);
    short.writeInt32BE(5, 0); // a length below the 6 header bytes
    expect(() => firstBadMessageCrc(short, 0, short.length)).toThrow(RangeError);
    const long = Buffer.from(s);
    long.writeInt32BE(0x7fffffff, 30); // the second message claims more than there is
    expect(() => firstBadMessageCrc(long, 0, long.length)).toThrow(RangeError);
    expect(firstBadMessageCrc(s, 0, 0)).toBe(-1);
  });

  it('refuse, as crc32Range does, a range that is not within the buffer, on either path', () => {
    const s = encodeMessageSet([Buffer.alloc(20, 1)]);
    for (const [start, end] of [
      [5, 2],
      [0, s.length + 1],
      [-1, 10],
      [0.5, 10],
      [0, Number.NaN],
    ] as const) {
      expect(() => firstBadMessageCrc(s, start, end)).toThrow(RangeError);
      expect(() => writeMessageCrcs(Buffer.from(s), start, end)).toThrow(RangeError);
      expect(() => crc32Range(s, start, end)).toThrow(RangeError);
    }
    expect(() => crc32Range(s, 0, s.length + 100)).toThrow(RangeError); // over the addon's threshold too
    expect(() => crc32Range(Buffer.alloc(200), 100, 201)).toThrow(RangeError);
  });
});
