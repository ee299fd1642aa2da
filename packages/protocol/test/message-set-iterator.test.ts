/** The one message-set walker (message-set-iterator.ts): offsets, headers, deep reads within a budget, and why a walk stops. */
import { gzipSync } from 'node:zlib';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CompressionCodec,
  encodeMessage,
  encodeMessageSet,
  encodeMessageSetWithHeaders,
  gzipMessageSet,
  hasHeaderAttribute,
  MessageSetIterator,
  readMessageSet,
} from '../src/index.js';
import { smallPayloadArb } from './helpers.js';

const entries = [
  { value: Buffer.from('plain') },
  { value: Buffer.from('keyed'), header: { key: Buffer.from('k'), timestamp: 1_700_000_000_000, host: 'h1' } },
  { value: Buffer.from('timed'), header: { timestamp: 5 } },
];

describe('MessageSetIterator', () => {
  it('walks shallow: offsets from the base, next offset = offset + 4 + length, fields and header of each message', () => {
    fc.assert(
      fc.property(fc.array(smallPayloadArb, { maxLength: 8 }), fc.nat({ max: 1e12 }), (payloads, base) => {
        const set = encodeMessageSet(payloads);
        const it = new MessageSetIterator(set, { baseOffset: base });
        let expected = base;
        let i = 0;
        while (it.advance()) {
          expect(it.offset).toBe(expected);
          expect(it.nextOffset).toBe(expected + 10 + payloads[i]!.length);
          expect(it.payload().equals(payloads[i]!)).toBe(true);
          expect([it.magic, it.codec, it.hasHeader, it.crcValid]).toEqual([1, 0, false, true]);
          expected = it.nextOffset;
          i++;
        }
        expect(i).toBe(payloads.length);
        expect([it.count, it.validBytes, it.stop]).toEqual([payloads.length, set.length, undefined]);
      }),
    );
    const it = new MessageSetIterator(encodeMessageSetWithHeaders(entries));
    const got = [];
    while (it.advance()) got.push(it.header());
    expect(got).toEqual([
      { header: undefined, value: Buffer.from('plain') },
      { header: entries[1]!.header, value: Buffer.from('keyed') },
      { header: entries[2]!.header, value: Buffer.from('timed') },
    ]);
  });

  it('says why it stopped: a partial tail (with the size when the length was read), a bad CRC, too large, invalid', () => {
    const set = encodeMessageSet([Buffer.from('aaaa'), Buffer.from('bbbbbbbb')]);
    const cut = new MessageSetIterator(set, { baseOffset: 100, end: set.length - 3 });
    expect(cut.count).toBe(1);
    expect(cut.stop).toMatchObject({ kind: 'partial', position: 14, offset: 114, size: 18 });
    expect(new MessageSetIterator(set.subarray(0, 16)).stop).toMatchObject({ kind: 'partial', position: 14, reason: '2 bytes, too few for a length field' });
    expect(new MessageSetIterator(set.subarray(0, 16)).stop?.size).toBeUndefined();

    const damaged = Buffer.from(set);
    damaged[14 + 12]! ^= 1;
    const bad = new MessageSetIterator(damaged);
    expect(bad.stop).toMatchObject({ kind: 'badCrc', position: 14, size: 18 });
    expect(bad.stop!.reason).toMatch(/CRC mismatch/);
    // badCrc 'yield': the damaged message is handed out, marked, and the walk goes on.
    const marked = new MessageSetIterator(damaged, { badCrc: 'yield' });
    const valid: boolean[] = [];
    while (marked.advance()) valid.push(marked.crcValid);
    expect([valid, marked.stop]).toEqual([[true, false], undefined]);

    expect(new MessageSetIterator(set, { maxMessageBytes: 5 }).stop).toMatchObject({ kind: 'tooLarge', position: 14, size: 18 });
    const magic = Buffer.from(set);
    magic[14 + 4] = 9;
    expect(new MessageSetIterator(magic).stop).toMatchObject({ kind: 'invalid', position: 14, reason: 'magic byte 9, expected 1' });
  });

  it('opens a gzip wrapper: every inner message has the wrapper offset, the last one the wrapper end as next offset', async () => {
    const before = encodeMessageSet([Buffer.from('first')]);
    const wrapper = await gzipMessageSet(encodeMessageSetWithHeaders(entries));
    const set = Buffer.concat([before, wrapper]);
    const it = new MessageSetIterator(set, { baseOffset: 1000 });
    expect(it.advance() && it.advance()).toBe(true);
    expect(it.codec).toBe(CompressionCodec.Gzip);
    const inner = (await it.openWrapper(1 << 20))!;
    const seen: [number, number, string][] = [];
    while (inner.advance()) seen.push([inner.offset, inner.nextOffset, inner.header().value.toString()]);
    const end = 1000 + set.length;
    expect(seen).toEqual([
      [1015, 1015, 'plain'],
      [1015, 1015, 'keyed'],
      [1015, end, 'timed'],
    ]);
    expect(await it.openWrapper(10)).toBeUndefined();
  });

  it('refuses inner sets that end inside a message or are themselves compressed', async () => {
    const innerSet = encodeMessageSet([Buffer.from('x'), Buffer.from('y')]);
    for (const [inner, reason] of [
      [innerSet.subarray(0, innerSet.length - 1), /ends inside a message/],
      [encodeMessage(gzipSync(innerSet), CompressionCodec.Gzip), /itself compressed/],
    ] as const) {
      const it = new MessageSetIterator(encodeMessage(gzipSync(inner), CompressionCodec.Gzip));
      it.advance();
      const opened = (await it.openWrapper(1 << 20))!;
      while (opened.advance());
      expect(opened.stop).toMatchObject({ kind: 'invalid', offset: 0 });
      expect(opened.stop!.reason).toMatch(reason);
    }
  });
});

describe('readMessageSet (deep)', () => {
  it('reads values and metadata, opening wrappers, and stops before the one that goes over the budget', async () => {
    const w1 = await gzipMessageSet(encodeMessageSetWithHeaders(entries));
    const w2 = await gzipMessageSet(encodeMessageSet([Buffer.alloc(1000)]));
    const plain = encodeMessageSet([Buffer.from('after')]);
    const set = Buffer.concat([w1, w2, plain]);
    const all = await readMessageSet(set, { baseOffset: 7, maxDecompressedBytes: 1 << 20 });
    expect(all.stop).toBeUndefined();
    expect(all.nextOffset).toBe(7 + set.length);
    expect(all.messages.map((m) => [m.offset, m.payload.length === 1000 ? 'zeros' : m.payload.toString(), m.key?.toString(), m.host])).toEqual([
      [7, 'plain', undefined, undefined],
      [7, 'keyed', 'k', 'h1'],
      [7, 'timed', undefined, undefined],
      [7 + w1.length, 'zeros', undefined, undefined],
      [7 + w1.length + w2.length, 'after', undefined, undefined],
    ]);
    const part = await readMessageSet(set, { maxDecompressedBytes: 500 });
    expect(part.messages).toHaveLength(3);
    expect(part.nextOffset).toBe(w1.length);
    expect(part.stop).toMatchObject({ kind: 'overBudget', position: w1.length, offset: w1.length });
  });

  it('hands out nothing of a wrapper holding an invalid message, nor a message with a bad header, and says where', async () => {
    const good = encodeMessageSet([Buffer.from('ok')]);
    const badHeader = encodeMessage(Buffer.from([0, 9, 1]), hasHeaderAttribute);
    const r = await readMessageSet(Buffer.concat([good, badHeader]), { maxDecompressedBytes: 100 });
    expect(r.messages.map((m) => m.payload.toString())).toEqual(['ok']);
    expect(r.stop).toMatchObject({ kind: 'invalid', position: good.length, offset: good.length });
    expect(r.stop!.reason).toMatch(/bad message header/);
    const innerBad = encodeMessageSet([Buffer.from('a'), Buffer.from('b')]);
    innerBad[innerBad.length - 1]! ^= 1;
    const w = encodeMessage(gzipSync(innerBad), CompressionCodec.Gzip);
    const r2 = await readMessageSet(Buffer.concat([good, w]), { baseOffset: 50, maxDecompressedBytes: 100 });
    expect(r2.messages).toHaveLength(1);
    expect(r2.nextOffset).toBe(50 + good.length);
    expect(r2.stop).toMatchObject({ kind: 'invalid', offset: 50 + good.length });
    expect(r2.stop!.reason).toMatch(/CRC mismatch/);
  });
});
