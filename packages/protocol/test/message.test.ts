import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CompressionCodec,
  ErrorCode,
  checkMessageAt,
  compressionCodecMask,
  crc32Ieee,
  currentMagic,
  decodeMessageAt,
  encodeMessage,
  messageOverheadBytes,
  messageSizeInBytes,
  writeMessage,
} from '../src/index.js';
import { crc32Reference, expectProtocolError, payloadArb, smallPayloadArb } from './helpers.js';

describe('crc32Ieee', () => {
  // Published CRC-32/IEEE values (the "check" value of the catalogue and common test strings).
  const vectors: [string | Buffer, number][] = [
    ['', 0x00000000],
    ['a', 0xe8b7be43],
    ['abc', 0x352441c2],
    ['123456789', 0xcbf43926],
    ['message digest', 0x20159d7f],
    ['The quick brown fox jumps over the lazy dog', 0x414fa339],
    [Buffer.alloc(32, 0x00), 0x190a55ad],
    [Buffer.alloc(32, 0xff), 0xff6cab0b],
  ];
  it.each(vectors)('matches the known vector for %j', (input, expected) => {
    const bytes = typeof input === 'string' ? Buffer.from(input, 'latin1') : input;
    expect(crc32Ieee(bytes)).toBe(expected);
    expect(crc32Reference(bytes)).toBe(expected);
  });

  it('agrees with a bitwise reference implementation on random bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2000 }), (bytes) => {
        expect(crc32Ieee(bytes)).toBe(crc32Reference(bytes));
      }),
    );
  });

  it('is an unsigned 32-bit number', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const c = crc32Ieee(bytes);
        expect(Number.isInteger(c) && c >= 0 && c <= 0xffffffff).toBe(true);
      }),
    );
  });

  it('changes when any single bit of the input flips', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 200 }), fc.nat(), fc.nat(7), (bytes, i, bit) => {
        const flipped = Buffer.from(bytes);
        flipped[i % flipped.length]! ^= 1 << bit;
        expect(crc32Ieee(flipped)).not.toBe(crc32Ieee(bytes));
      }),
    );
  });
});

describe('encodeMessage', () => {
  it('lays out length, magic, attributes, crc and payload (docs/design.md §1)', () => {
    fc.assert(
      fc.property(payloadArb, fc.integer({ min: 0, max: 255 }), (payload, attributes) => {
        const m = encodeMessage(payload, attributes);
        expect(m.length).toBe(messageSizeInBytes(payload.length));
        expect(m.length).toBe(10 + payload.length);
        expect(m.readInt32BE(0)).toBe(6 + payload.length);
        expect(m[4]).toBe(1);
        expect(m[5]).toBe(attributes);
        expect(m.readUInt32BE(6)).toBe(crc32Reference(payload));
        expect(m.subarray(10).equals(payload)).toBe(true);
      }),
      { numRuns: 60 },
    );
  });

  it('round-trips through decodeMessageAt, attributes included', () => {
    fc.assert(
      fc.property(payloadArb, fc.integer({ min: 0, max: 255 }), (payload, attributes) => {
        const m = decodeMessageAt(encodeMessage(payload, attributes));
        expect(m.magic).toBe(currentMagic);
        expect(m.attributes).toBe(attributes);
        expect(m.crc).toBe(crc32Ieee(payload));
        expect(m.payload.equals(payload)).toBe(true);
      }),
      { numRuns: 60 },
    );
  });

  it('keeps the compression codec in attributes bits 0-1', () => {
    for (const codec of Object.values(CompressionCodec)) {
      const m = decodeMessageAt(encodeMessage(Buffer.from('x'), codec));
      expect(m.attributes & compressionCodecMask).toBe(codec);
    }
    expect(CompressionCodec).toEqual({ None: 0, Gzip: 1, Snappy: 2 });
    expect(compressionCodecMask).toBe(0b11);
  });

  it('writes a 1 MiB payload and reads it back', () => {
    const payload = Buffer.alloc(1024 * 1024, 0xab);
    const m = encodeMessage(payload);
    expect(m.readInt32BE(0)).toBe(6 + payload.length);
    expect(decodeMessageAt(m).payload.equals(payload)).toBe(true);
  });
});

describe('writeMessage', () => {
  it('writes at a position inside a larger buffer and returns the position after the message', () => {
    fc.assert(
      fc.property(smallPayloadArb, fc.nat(50), fc.nat(50), (payload, before, after) => {
        const buf = Buffer.alloc(before + messageOverheadBytes + payload.length + after, 0xee);
        const end = writeMessage(buf, before, payload);
        expect(end).toBe(before + 10 + payload.length);
        expect(buf.subarray(before, end).equals(encodeMessage(payload))).toBe(true);
        expect(buf.subarray(0, before).every((b) => b === 0xee)).toBe(true);
        expect(buf.subarray(end).every((b) => b === 0xee)).toBe(true);
        expect(decodeMessageAt(buf, before, end).payload.equals(payload)).toBe(true);
      }),
    );
  });

  it('throws RangeError when the target is too small', () => {
    expect(() => writeMessage(Buffer.alloc(12), 0, Buffer.from('hello'))).toThrow(RangeError);
  });
});

describe('checkMessageAt', () => {
  it('reports a whole message as valid with its size', () => {
    fc.assert(
      fc.property(smallPayloadArb, (payload) => {
        expect(checkMessageAt(encodeMessage(payload), 0)).toEqual({ status: 'valid', size: 10 + payload.length });
      }),
    );
  });

  it('reports every strict prefix of a message as partial', () => {
    fc.assert(
      fc.property(smallPayloadArb, (payload) => {
        const m = encodeMessage(payload);
        for (let cut = 0; cut < m.length; cut++) {
          expect(checkMessageAt(m, 0, cut).status).toBe('partial');
          expect(checkMessageAt(m.subarray(0, cut), 0).status).toBe('partial');
        }
      }),
    );
  });

  it('rejects a length below the 6-byte header, negative lengths included', () => {
    fc.assert(
      fc.property(fc.integer({ min: -0x80000000, max: 5 }), (length) => {
        const m = encodeMessage(Buffer.from('payload'));
        m.writeInt32BE(length, 0);
        const c = checkMessageAt(m, 0);
        expect(c.status).toBe('invalid');
        expectProtocolError(() => decodeMessageAt(m), ErrorCode.InvalidMessage);
      }),
    );
  });

  it('rejects any magic byte other than 1, even in a cut-short message', () => {
    fc.assert(
      fc.property(smallPayloadArb, fc.integer({ min: 0, max: 255 }).filter((b) => b !== 1), (payload, magic) => {
        const m = encodeMessage(payload);
        m[4] = magic;
        expect(checkMessageAt(m, 0).status).toBe('invalid');
        expect(checkMessageAt(m, 0, 5).status).toBe('invalid');
        const err = expectProtocolError(() => decodeMessageAt(m), ErrorCode.InvalidMessage);
        expect(err.message).toMatch(/magic/);
      }),
    );
  });

  it('rejects a flipped bit in the stored CRC or in the payload', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 100 }), fc.nat(), fc.nat(7), fc.boolean(), (p, i, bit, inCrc) => {
        const m = encodeMessage(p);
        const at = inCrc ? 6 + (i % 4) : 10 + (i % p.length);
        m[at]! ^= 1 << bit;
        const c = checkMessageAt(m, 0);
        expect(c.status).toBe('invalid');
        if (c.status === 'invalid') expect(c.reason).toMatch(/CRC/);
        expect(checkMessageAt(m, 0, m.length, false).status).toBe('valid');
        expectProtocolError(() => decodeMessageAt(m), ErrorCode.InvalidMessage);
      }),
    );
  });

  it('flags a payload over maxMessageBytes as tooLarge, and accepts one exactly at the limit', () => {
    const m = encodeMessage(Buffer.alloc(100));
    expect(checkMessageAt(m, 0, m.length, true, 100)).toEqual({ status: 'valid', size: 110 });
    const over = checkMessageAt(m, 0, m.length, true, 99);
    expect(over.status).toBe('invalid');
    expect(over.status === 'invalid' && over.tooLarge).toBe(true);
    // Only the length field is needed to know a message is too large.
    const headOnly = checkMessageAt(m, 0, 4, true, 99);
    expect(headOnly.status === 'invalid' && headOnly.tooLarge).toBe(true);
  });

  it('never throws and never reads outside the buffer, whatever the bytes and bounds', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), fc.nat(50), fc.integer({ min: -5, max: 80 }), fc.boolean(), (u, pos, end, crc) => {
        const buf = Buffer.from(u);
        const c = checkMessageAt(buf, Math.min(pos, buf.length), end, crc);
        expect(['valid', 'partial', 'invalid']).toContain(c.status);
        if (c.status === 'valid') expect(c.size).toBeLessThanOrEqual(buf.length);
      }),
    );
  });
});

describe('decodeMessageAt', () => {
  it('throws InvalidMessage for a truncated message', () => {
    const m = encodeMessage(Buffer.from('hello'));
    for (let cut = 0; cut < m.length; cut++) {
      const err = expectProtocolError(() => decodeMessageAt(m.subarray(0, cut)), ErrorCode.InvalidMessage);
      expect(err.message).toMatch(/truncated/);
    }
  });

  it('returns a view on the input, not a copy', () => {
    const m = encodeMessage(Buffer.from('hello'));
    const d = decodeMessageAt(m);
    m[10] = 0x48;
    expect(d.payload.toString()).toBe('Hello');
  });

  it('only ever throws ProtocolError on random bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 60 }), (u) => {
        const buf = Buffer.from(u);
        try {
          const m = decodeMessageAt(buf);
          expect(m.magic).toBe(1);
          expect(crc32Reference(m.payload)).toBe(m.crc);
        } catch (e) {
          expectProtocolError(() => {
            throw e;
          }, ErrorCode.InvalidMessage);
        }
      }),
    );
  });
});
