/** CRC-32: the table and zlib paths agree with a reference; combining; checking a whole message set at once. */
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
