import { crc32 } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ErrorCode,
  MessageSetCrc,
  crcAddon,
  encodeMessage,
  encodeMessageSet,
  iterateMessageSet,
  scanMessageSet,
  validateMessageSet,
  walkMessageSet,
  type MessageAndOffset,
} from '../src/index.js';
import { expectProtocolError, payloadArb, smallPayloadArb } from './helpers.js';

/** Byte position just past each message of a set built from `payloads`. */
function messageEnds(payloads: readonly Uint8Array[]): number[] {
  const ends: number[] = [];
  let pos = 0;
  for (const p of payloads) ends.push((pos += 10 + p.length));
  return ends;
}

/** Collects what the iterator yields before it ends or throws. */
function drain(buf: Buffer, base = 0): { items: MessageAndOffset[]; error?: unknown } {
  const items: MessageAndOffset[] = [];
  try {
    for (const m of iterateMessageSet(buf, base)) items.push(m);
    return { items };
  } catch (error) {
    return { items, error };
  }
}

describe('encodeMessageSet', () => {
  it('is the plain concatenation of the messages', () => {
    fc.assert(
      fc.property(fc.array(payloadArb, { maxLength: 4 }), fc.integer({ min: 0, max: 255 }), (payloads, attributes) => {
        const set = encodeMessageSet(payloads, attributes);
        expect(set.equals(Buffer.concat(payloads.map((p) => encodeMessage(p, attributes))))).toBe(true);
      }),
      { numRuns: 40 },
    );
  });

  it('encodes no payloads as zero bytes', () => {
    expect(encodeMessageSet([]).length).toBe(0);
    expect([...iterateMessageSet(Buffer.alloc(0))]).toEqual([]);
  });
});

describe('iterateMessageSet', () => {
  it('yields every message with offset and nextOffset = offset + 4 + length', () => {
    fc.assert(
      fc.property(fc.array(payloadArb, { maxLength: 5 }), fc.maxSafeNat(), (payloads, base) => {
        fc.pre(base + 6 * 1024 * 1024 <= Number.MAX_SAFE_INTEGER);
        const set = encodeMessageSet(payloads);
        const items = [...iterateMessageSet(set, base)];
        expect(items.length).toBe(payloads.length);
        let expectedOffset = base;
        items.forEach((item, i) => {
          const length = set.readInt32BE(item.offset - base);
          expect(item.offset).toBe(expectedOffset);
          expect(item.nextOffset).toBe(item.offset + 4 + length);
          expect(item.message.payload.equals(payloads[i]!)).toBe(true);
          expectedOffset = item.nextOffset;
        });
        expect(expectedOffset).toBe(base + set.length);
      }),
      { numRuns: 60 },
    );
  });

  it('yields exactly the whole messages before any truncation point', () => {
    fc.assert(
      fc.property(fc.array(smallPayloadArb, { maxLength: 6 }), fc.nat(1000), (payloads, base) => {
        const set = encodeMessageSet(payloads);
        const ends = messageEnds(payloads);
        for (let cut = 0; cut <= set.length; cut++) {
          const { items, error } = drain(set.subarray(0, cut), base);
          expect(error).toBeUndefined();
          const whole = ends.filter((e) => e <= cut).length;
          expect(items.length).toBe(whole);
          items.forEach((item, i) => {
            expect(item.message.payload.equals(payloads[i]!)).toBe(true);
            expect(item.nextOffset).toBe(base + ends[i]!);
          });
        }
      }),
    );
  });

  it('throws InvalidMessage at a corrupt message after yielding the messages before it', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ minLength: 1, maxLength: 30 }), { minLength: 1, maxLength: 6 }),
        fc.nat(),
        fc.nat(),
        fc.constantFrom('crc', 'payload', 'magic', 'length'),
        (payloads, which, at, how) => {
          const set = encodeMessageSet(payloads);
          const k = which % payloads.length;
          const start = k === 0 ? 0 : messageEnds(payloads)[k - 1]!;
          if (how === 'crc') set[start + 6 + (at % 4)]! ^= 0x01;
          if (how === 'payload') set[start + 10 + (at % payloads[k]!.length)]! ^= 0x80;
          if (how === 'magic') set[start + 4] = 2 + (at % 254);
          if (how === 'length') set.writeInt32BE(-1 - (at % 1000), start);
          const { items, error } = drain(set, 100);
          expect(items.length).toBe(k);
          expectProtocolError(() => {
            throw error;
          }, ErrorCode.InvalidMessage);
          expect((error as Error).message).toContain(`offset ${100 + start}`);
        },
      ),
    );
  });

  it('only ever throws ProtocolError (InvalidMessage) on random bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (u) => {
        const { items, error } = drain(Buffer.from(u));
        if (error !== undefined) {
          expectProtocolError(() => {
            throw error as Error;
          }, ErrorCode.InvalidMessage);
        }
        for (const item of items) expect(item.nextOffset).toBeLessThanOrEqual(u.length);
      }),
    );
  });
});

describe('scanMessageSet', () => {
  it('covers a whole valid set', () => {
    fc.assert(
      fc.property(fc.array(smallPayloadArb, { maxLength: 6 }), (payloads) => {
        const set = encodeMessageSet(payloads);
        expect(scanMessageSet(set)).toEqual({ count: payloads.length, validBytes: set.length, partial: false, tooLarge: false });
      }),
    );
  });

  it('stops at a trailing partial message of any truncation', () => {
    fc.assert(
      fc.property(fc.array(smallPayloadArb, { minLength: 1, maxLength: 6 }), (payloads) => {
        const set = encodeMessageSet(payloads);
        const ends = [0, ...messageEnds(payloads)];
        for (let cut = 0; cut <= set.length; cut++) {
          const whole = ends.filter((e) => e <= cut);
          const validBytes = whole[whole.length - 1]!;
          for (const s of [scanMessageSet(set, cut), scanMessageSet(set.subarray(0, cut))]) {
            expect(s.count).toBe(whole.length - 1);
            expect(s.validBytes).toBe(validBytes);
            expect(s.partial).toBe(validBytes !== cut);
            expect(s.tooLarge).toBe(false);
            expect(s.stopReason === undefined).toBe(validBytes === cut);
          }
        }
      }),
    );
  });

  it('stops before a corrupt message and says why', () => {
    const set = encodeMessageSet([Buffer.from('a'), Buffer.from('abc'), Buffer.from('xyz')]);
    set[11 + 10]! ^= 0xff; // first payload byte of the second message
    const s = scanMessageSet(set);
    expect(s).toMatchObject({ count: 1, validBytes: 11, partial: false, tooLarge: false });
    expect(s.stopReason).toMatch(/CRC mismatch/);
  });

  it('stops at a payload over maxMessageBytes with tooLarge', () => {
    const set = encodeMessageSet([Buffer.alloc(10), Buffer.alloc(11)]);
    expect(scanMessageSet(set, set.length, 11).stopReason).toBeUndefined();
    expect(scanMessageSet(set, set.length, 10)).toMatchObject({ count: 1, validBytes: 20, partial: false, tooLarge: true });
  });

  it('never throws on random bytes and bounds, and its valid prefix scans clean', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.uint8Array({ maxLength: 200 }).map((u) => Buffer.from(u)),
          fc
            .tuple(fc.array(smallPayloadArb, { maxLength: 4 }), fc.uint8Array({ maxLength: 30 }))
            .map(([ps, junk]) => Buffer.concat([encodeMessageSet(ps), junk])),
        ),
        fc.option(fc.integer({ min: -10, max: 400 }), { nil: undefined }),
        fc.option(fc.integer({ min: 0, max: 100 }), { nil: undefined }),
        (buf, end, max) => {
          const s = scanMessageSet(buf, end, max);
          expect(s.validBytes).toBeGreaterThanOrEqual(0);
          expect(s.validBytes).toBeLessThanOrEqual(buf.length);
          const again = scanMessageSet(buf.subarray(0, s.validBytes));
          expect(again.count).toBe(s.count);
          expect(again.stopReason).toBeUndefined();
        },
      ),
    );
  });
});

describe('validateMessageSet', () => {
  it('returns the message count of a valid set and where its last message starts', () => {
    fc.assert(
      fc.property(fc.array(smallPayloadArb, { maxLength: 6 }), (payloads) => {
        const last = payloads.length === 0 ? -1 : encodeMessageSet(payloads.slice(0, -1)).length;
        expect(validateMessageSet(encodeMessageSet(payloads), 40)).toEqual({ count: payloads.length, lastPosition: last });
      }),
    );
  });

  it('throws MessageSizeTooLarge for a payload over the limit, and accepts one at the limit', () => {
    fc.assert(
      fc.property(fc.array(smallPayloadArb, { maxLength: 4 }), fc.integer({ min: 0, max: 2000 }), fc.nat(3), (before, max, extra) => {
        const ok = encodeMessageSet([...before.filter((p) => p.length <= max), Buffer.alloc(max)]);
        expect(() => validateMessageSet(ok, max)).not.toThrow();
        const set = encodeMessageSet([...before.filter((p) => p.length <= max), Buffer.alloc(max + 1 + extra)]);
        const err = expectProtocolError(() => validateMessageSet(set, max), ErrorCode.MessageSizeTooLarge);
        expect(err.message).toContain(String(max));
      }),
    );
  });

  it('throws InvalidMessage for a bad CRC, bad magic, bad length or a partial trailing message', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ minLength: 1, maxLength: 30 }), { minLength: 1, maxLength: 5 }),
        fc.nat(),
        fc.constantFrom('crc', 'magic', 'short-length', 'truncate'),
        (payloads, at, how) => {
          const set = encodeMessageSet(payloads);
          const last = set.length - 10 - payloads[payloads.length - 1]!.length;
          let buf = set;
          if (how === 'crc') set[last + 6 + (at % 4)]! ^= 1 << at % 8;
          if (how === 'magic') set[last + 4] = at % 256 === 1 ? 0 : at % 256;
          if (how === 'short-length') set.writeInt32BE((at % 12) - 6, last);
          if (how === 'truncate') buf = set.subarray(0, last + 1 + (at % (set.length - last - 1)));
          expectProtocolError(() => validateMessageSet(buf, 1000), ErrorCode.InvalidMessage);
        },
      ),
    );
  });

  it('only ever throws ProtocolError on random bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.nat(300), (u, max) => {
        try {
          validateMessageSet(Buffer.from(u), max);
        } catch (e) {
          const err = expectProtocolError(() => {
            throw e;
          });
          expect([ErrorCode.InvalidMessage, ErrorCode.MessageSizeTooLarge]).toContain(err.code);
        }
      }),
    );
  });
});

describe('a message set crafted so that two CRC errors cancel', () => {
  /** The linear part of CRC-32 of `bytes`: crc(x ^ d) = crc(x) ^ linear(d) for equal lengths. */
  const linear = (bytes: Buffer): number => (crc32(bytes) ^ crc32(Buffer.alloc(bytes.length))) >>> 0;
  /** `length` zero bytes with the 4 bytes of `word` (big-endian) at `at`. */
  const delta = (length: number, at: number, word: number): Buffer => {
    const d = Buffer.alloc(length);
    d.writeUInt32BE(word >>> 0, at);
    return d;
  };
  /** The 4-byte word w at `at` with linear(delta(length, at, w)) === target (Gaussian elimination over GF(2)). */
  function solve(length: number, at: number, target: number): number {
    const rows = Array.from({ length: 32 }, (_, bit) => ({ image: linear(delta(length, at, 2 ** bit)), word: 2 ** bit }));
    let t = { image: target, word: 0 };
    for (let b = 31; b >= 0; b--) {
      const mask = 2 ** b;
      const i = rows.findIndex((r, k) => k >= 31 - b && (r.image & mask) !== 0);
      if (i < 0) continue;
      const [pivot] = rows.splice(i, 1);
      rows.splice(31 - b, 0, pivot!);
      for (const r of rows) if (r !== pivot && (r.image & mask) !== 0) [r.image, r.word] = [(r.image ^ pivot!.image) >>> 0, (r.word ^ pivot!.word) >>> 0];
      if ((t.image & mask) !== 0) t = { image: (t.image ^ pivot!.image) >>> 0, word: (t.word ^ pivot!.word) >>> 0 };
    }
    expect(t.image).toBe(0);
    return t.word;
  }

  it('passes the one-pass check readers use without the CRC addon, and is refused by validateMessageSet, as a broker refuses it', () => {
    const set = encodeMessageSet([Buffer.alloc(40, 1), Buffer.alloc(40, 2)]);
    const payloadA = 10;
    const payloadB = 10 + 40 + 10;
    const u = 0xdeadbeef;
    const v = solve(set.length, payloadB, linear(delta(set.length, payloadA, u)));
    const crafted = Buffer.from(set);
    crafted.writeUInt32BE((crafted.readUInt32BE(payloadA) ^ u) >>> 0, payloadA);
    crafted.writeUInt32BE((crafted.readUInt32BE(payloadB) ^ v) >>> 0, payloadB);
    expect(crc32(crafted)).toBe(crc32(set)); // the errors cancel over the whole set
    const fold = new MessageSetCrc();
    const walk = walkMessageSet(crafted, crafted.length, undefined, fold);
    expect(fold.matches(crafted, 0, walk.validBytes)).toBe(true);
    // Readers fold only without the addon; with it they check each message and see the damage.
    expect(scanMessageSet(crafted).stopReason === undefined).toBe(crcAddon === undefined);
    expectProtocolError(() => validateMessageSet(crafted, 1000), ErrorCode.InvalidMessage);
  });
});
