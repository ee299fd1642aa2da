import { describe, expect, it } from 'vitest';
import { crc32Range, crcAddon, crcSupport, encodeMessage, encodeMessageSet, gzipMessageSet, hasHeaderAttribute } from '@klog/protocol';
import {
  KafkaErrorCode,
  KafkaCopies,
  KafkaProtocolError,
  decodeKafkaMessageSet,
  encodeKafkaMessageSet,
  kafkaMessageSetOf,
  klogMessageSetOf,
  writeKafkaCrcs,
} from '../src/index.js';

// Re-framing fetched klog message sets as Kafka ones in one buffer, with every CRC filled by one
// call (the addon's writeKafkaCrcs, or JavaScript without it: see vitest.config.ts).
const opts = { maxInnerBytes: 1 << 20 };

/** The CRC-32 Kafka puts in each message of `set`, computed here one by one. */
function expectedCrcs(set: Buffer): number[] {
  const out: number[] = [];
  for (let pos = 0; pos < set.length; ) {
    const size = set.readInt32BE(pos + 8);
    out.push(crc32Range(set, pos + 16, pos + 12 + size));
    pos += 12 + size;
  }
  return out;
}

function storedCrcs(set: Buffer): number[] {
  const out: number[] = [];
  for (let pos = 0; pos < set.length; pos += 12 + set.readInt32BE(pos + 8)) out.push(set.readUInt32BE(pos + 12));
  return out;
}

describe('writeKafkaCrcs', () => {
  it(`fills every CRC of a set as one message at a time does (${crcSupport.path})`, () => {
    const msgs = Array.from({ length: 300 }, (_, i) => ({ key: i % 3 === 0 ? null : Buffer.alloc(i % 7, i), value: Buffer.alloc(i, 255 - i), timestamp: i }));
    for (const magic of [0, 1] as const) {
      const set = encodeKafkaMessageSet(msgs, magic);
      const want = expectedCrcs(set);
      for (let pos = 0; pos < set.length; pos += 12 + set.readInt32BE(pos + 8)) set.writeUInt32BE(0, pos + 12);
      writeKafkaCrcs(set, 0, set.length);
      expect(storedCrcs(set)).toEqual(want);
    }
  });

  it('refuses a range that is not whole messages, having written those before', () => {
    const set = encodeKafkaMessageSet([{ key: null, value: Buffer.from('a') }, { key: null, value: Buffer.from('bb') }], 1);
    const first = set.readInt32BE(8) + 12;
    set.writeUInt32BE(0, 12);
    expect(() => writeKafkaCrcs(set, 0, set.length - 1)).toThrow(KafkaProtocolError);
    expect(set.readUInt32BE(12)).toBe(expectedCrcs(set.subarray(0, first))[0]);
    expect(() => writeKafkaCrcs(set, 0, 5)).toThrow(KafkaProtocolError);
    const tiny = Buffer.from(set.subarray(0, first));
    tiny.writeInt32BE(13, 8); // below the smallest message_size
    expect(() => writeKafkaCrcs(tiny, 0, tiny.length)).toThrow(KafkaProtocolError);
  });

  it.runIf(crcAddon !== undefined)('the addon refuses what does not name a range', () => {
    const call = (...args: unknown[]) => (crcAddon!.writeKafkaCrcs as (...a: unknown[]) => void)(...args);
    expect(() => call(Buffer.alloc(20), 0, 21)).toThrow(RangeError);
    expect(() => call('x', 0, 0)).toThrow(TypeError);
  });
});

describe('KafkaCopies', () => {
  it('copies every queued range, past its first plan size', () => {
    const src = Buffer.from(Array.from({ length: 5000 }, (_, i) => i & 0xff));
    const dst = Buffer.alloc(5000);
    const copies = new KafkaCopies();
    for (let i = 0; i < 2500; i++) copies.add(4998 - 2 * i, 2 * i, 2);
    copies.flush(src, dst);
    for (let i = 0; i < 2500; i++) expect([dst[2 * i], dst[2 * i + 1]]).toEqual([src[4998 - 2 * i], src[4999 - 2 * i]]);
  });

  it.runIf(crcAddon !== undefined)('the addon refuses a range outside either buffer', () => {
    const plan = new Int32Array([0, 0, 4, 2, 0, 9]);
    expect(() => crcAddon!.copyRanges(Buffer.alloc(10), Buffer.alloc(10), plan, 2)).toThrow(RangeError);
    expect(() => crcAddon!.copyRanges(Buffer.alloc(10), Buffer.alloc(10), plan, 3)).toThrow(RangeError);
    expect(() => crcAddon!.copyRanges(Buffer.alloc(10), Buffer.alloc(3), plan, 1)).toThrow(RangeError);
    expect(() => (crcAddon!.copyRanges as (...a: unknown[]) => void)(Buffer.alloc(10), Buffer.alloc(10), [0, 0, 1], 1)).toThrow(TypeError);
  });
});

describe('kafkaMessageSetOf', () => {
  it('re-frames thousands of messages with keys and timestamps byte for byte', async () => {
    const msgs = Array.from({ length: 5000 }, (_, i) => ({ key: i % 2 ? Buffer.from(`k${i}`) : null, value: Buffer.from(`value ${i} `.repeat(i % 40)), timestamp: i % 3 ? 1_700_000_000_000 + i : undefined }));
    const klog = klogMessageSetOf(await decodeKafkaMessageSet(encodeKafkaMessageSet(msgs, 1), opts));
    for (const magic of [0, 1] as const) {
      const framed = await kafkaMessageSetOf(klog, 7, magic, 1 << 20);
      expect(framed.count).toBe(5000);
      expect(framed.nextOffset).toBe(7 + klog.length);
      expect(storedCrcs(framed.records)).toEqual(expectedCrcs(framed.records));
      const back = await decodeKafkaMessageSet(framed.records, opts);
      expect(back.map((m) => [m.key?.toString() ?? null, m.value?.toString(), m.timestamp])).toEqual(
        msgs.map((m) => [m.key?.toString() ?? null, m.value.toString(), magic === 1 ? m.timestamp : undefined]),
      );
    }
  });

  it('serves the messages of a gzip wrapper at its offset, between plain ones', async () => {
    const plain = encodeMessageSet([Buffer.from('before')]);
    const wrapper = await gzipMessageSet(encodeMessageSet([Buffer.from('in 1'), Buffer.from('in 2')]));
    const after = encodeMessageSet([Buffer.from('after')]);
    const framed = await kafkaMessageSetOf(Buffer.concat([plain, wrapper, after]), 100, 1, 1 << 20);
    const back = await decodeKafkaMessageSet(framed.records, opts);
    expect(back.map((m) => [m.offset, m.value?.toString()])).toEqual([
      [100, 'before'],
      [100 + plain.length, 'in 1'],
      [100 + plain.length, 'in 2'],
      [100 + plain.length + wrapper.length, 'after'],
    ]);
    expect(framed.lastOffset).toBe(100 + plain.length + wrapper.length);
  });

  it('a damaged metadata header ends the set before its message; first, it is CorruptMessage', async () => {
    const good = encodeMessageSet([Buffer.from('one'), Buffer.from('two')]);
    const bad = encodeMessage(Buffer.from([0, 50, 1]), hasHeaderAttribute); // a header longer than the payload, a right CRC
    const framed = await kafkaMessageSetOf(Buffer.concat([good, bad, good]), 0, 1, 1 << 20);
    expect(framed.count).toBe(2);
    expect(framed.lastOffset).toBe(good.length / 2);
    expect(framed.nextOffset).toBe(good.length);
    expect((await decodeKafkaMessageSet(framed.records, opts)).map((m) => m.value?.toString())).toEqual(['one', 'two']);
    await expect(kafkaMessageSetOf(Buffer.concat([bad, good]), 0, 1, 1 << 20)).rejects.toMatchObject({ code: KafkaErrorCode.CorruptMessage });
  });

  it('a wrapper with a damaged inner header is served whole or not at all', async () => {
    const good = encodeMessageSet([Buffer.from('one')]);
    const wrapper = await gzipMessageSet(Buffer.concat([encodeMessageSet([Buffer.from('in')]), encodeMessage(Buffer.from([0, 50, 1]), hasHeaderAttribute)]));
    const framed = await kafkaMessageSetOf(Buffer.concat([good, wrapper, good]), 0, 1, 1 << 20);
    expect(framed.count).toBe(1);
    expect(framed.nextOffset).toBe(good.length);
    expect((await decodeKafkaMessageSet(framed.records, opts)).map((m) => m.value?.toString())).toEqual(['one']);
  });

  it('a bad CRC after good messages ends the set; first, it is CorruptMessage', async () => {
    const set = encodeMessageSet([Buffer.from('one'), Buffer.from('two')]);
    const second = set.length / 2;
    set[set.length - 1]! ^= 1;
    const framed = await kafkaMessageSetOf(set, 0, 1, 1 << 20);
    expect([framed.count, framed.lastOffset, framed.nextOffset]).toEqual([1, 0, second]);
    await expect(kafkaMessageSetOf(set.subarray(second), second, 1, 1 << 20)).rejects.toMatchObject({ code: KafkaErrorCode.CorruptMessage });
  });
});
