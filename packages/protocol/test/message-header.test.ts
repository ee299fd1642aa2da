import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  ErrorCode,
  decodeMessageAt,
  encodeMessageSet,
  encodeMessageSetWithHeaders,
  entrySizeInBytes,
  hasHeaderAttribute,
  iterateMessageSet,
  readMessageHeader,
  type MessageEntry,
} from '../src/index.js';
import { crc32Reference, expectProtocolError, loadHex } from './helpers.js';

const entry = fc.record({
  value: fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)),
  header: fc.option(
    fc.record(
      {
        key: fc.uint8Array({ maxLength: 100 }).map((a) => Buffer.from(a)),
        timestamp: fc.integer({ min: 0, max: 2 ** 52 }),
        host: fc.string({ maxLength: 40 }),
      },
      { requiredKeys: [] },
    ),
    { nil: undefined },
  ),
});

describe('message metadata (klog header)', () => {
  it('matches the golden bytes', () => {
    const golden = loadHex('message-with-header.hex');
    const encoded = encodeMessageSetWithHeaders([{ value: Buffer.from('hi'), header: { key: Buffer.from('k1'), timestamp: 1_700_000_000_000, host: 'h' } }]);
    expect(encoded.toString('hex')).toBe(golden.toString('hex'));
    const m = decodeMessageAt(golden);
    expect(m.attributes).toBe(hasHeaderAttribute);
    expect(m.crc).toBe(crc32Reference(m.payload));
    const { header, value } = readMessageHeader(m);
    expect(header).toEqual({ key: Buffer.from('k1'), timestamp: 1_700_000_000_000, host: 'h' });
    expect(value.toString()).toBe('hi');
  });

  it('round-trips any values and metadata through a message set', () => {
    fc.assert(
      fc.property(fc.array(entry, { maxLength: 20 }), (entries: MessageEntry[]) => {
        const set = encodeMessageSetWithHeaders(entries);
        expect(set.length).toBe(entries.reduce((n, e) => n + entrySizeInBytes(e), 0));
        const got = [...iterateMessageSet(set)].map(({ message }) => readMessageHeader(message));
        expect(got).toHaveLength(entries.length);
        got.forEach((g, i) => {
          const want = entries[i]!;
          expect(g.value.equals(Buffer.from(want.value))).toBe(true);
          const h = want.header;
          if (h === undefined || Object.keys(h).length === 0) expect(g.header).toBeUndefined();
          else expect(g.header).toEqual(h);
        });
      }),
    );
  });

  it('leaves messages without metadata byte-identical to plain messages', () => {
    const values = [Buffer.from('a'), Buffer.from(''), Buffer.alloc(100, 7)];
    expect(encodeMessageSetWithHeaders(values.map((value) => ({ value })))).toEqual(encodeMessageSet(values));
    expect(encodeMessageSetWithHeaders([{ value: values[0]!, header: {} }])).toEqual(encodeMessageSet([values[0]!]));
    // A plain message's whole payload is its value, even one that looks like a header.
    const [plain] = [...iterateMessageSet(encodeMessageSet([Buffer.from([0, 3, 1, 0, 0])]))];
    expect(readMessageHeader(plain!.message)).toEqual({ header: undefined, value: Buffer.from([0, 3, 1, 0, 0]) });
  });

  it('keeps the compression codec bits it is given', () => {
    const [m] = [...iterateMessageSet(encodeMessageSetWithHeaders([{ value: Buffer.from('x'), header: { host: 'h' } }], 0x01))];
    expect(m!.message.attributes).toBe(0x05);
  });

  it('skips fields with unknown tags', () => {
    const payload = Buffer.from([0, 9, 9, 0, 2, 0xaa, 0xbb, 3, 0, 1, 0x68, 0x76]);
    expect(readMessageHeader({ attributes: hasHeaderAttribute, payload })).toEqual({ header: { host: 'h' }, value: Buffer.from('v') });
  });

  it('throws ProtocolError (InvalidMessage) for a header that does not fit', () => {
    const cases = [
      Buffer.from([0]), // no room for headerBytes
      Buffer.from([0, 10, 1, 0, 2]), // header longer than the payload
      Buffer.from([0, 2, 1, 0]), // field head cut
      Buffer.from([0, 4, 1, 0, 9, 0]), // field longer than the header
      Buffer.from([0, 7, 2, 0, 4, 0, 0, 0, 0]), // timestamp of 4 bytes
      Buffer.from([0, 11, 2, 0, 8, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]), // timestamp past 2^53
    ];
    for (const payload of cases) expectProtocolError(() => readMessageHeader({ attributes: hasHeaderAttribute, payload }), ErrorCode.InvalidMessage);
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        try {
          readMessageHeader({ attributes: hasHeaderAttribute, payload: Buffer.from(bytes) });
        } catch (err) {
          expectProtocolError(() => {
            throw err;
          }, ErrorCode.InvalidMessage);
        }
      }),
    );
  });

  it('refuses a key over 65535 bytes', () => {
    expectProtocolError(() => encodeMessageSetWithHeaders([{ value: Buffer.alloc(1), header: { key: Buffer.alloc(70_000) } }]), ErrorCode.InvalidMessage);
  });
});
