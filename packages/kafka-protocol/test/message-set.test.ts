import { describe, expect, it } from 'vitest';
import { iterateMessageSet, readMessageHeader } from '@klog/protocol';
import {
  KafkaErrorCode,
  KafkaProtocolError,
  decodeKafkaMessageSet,
  encodeKafkaMessageSet,
  gzipKafkaMessageSet,
  kafkaMessageSetOf,
  klogMessageSetOf,
  klogMessageSetOfKafka,
} from '../src/index.js';

const opts = { maxInnerBytes: 1 << 20 };
const msgs = [
  { key: Buffer.from('k1'), value: Buffer.from('v1'), timestamp: 1_700_000_000_000 },
  { key: null, value: Buffer.from('no key') },
  { key: Buffer.alloc(0), value: null, timestamp: 5 },
];

describe('Kafka message sets', () => {
  for (const magic of [0, 1] as const) {
    it(`magic ${magic}: encode then decode gives the messages back`, async () => {
      const set = encodeKafkaMessageSet(msgs, magic, 100);
      const out = await decodeKafkaMessageSet(set, opts);
      expect(out.map((m) => [m.offset, m.key?.toString() ?? null, m.value?.toString() ?? null, m.timestamp])).toEqual([
        [100, 'k1', 'v1', magic === 1 ? 1_700_000_000_000 : undefined],
        [101, null, 'no key', undefined],
        [102, '', null, magic === 1 ? 5 : undefined],
      ]);
    });

    it(`magic ${magic}: a gzip wrapper gives its inner messages with absolute offsets`, async () => {
      const set = await gzipKafkaMessageSet(msgs, magic, 42);
      const out = await decodeKafkaMessageSet(set, opts);
      expect(out.map((m) => m.value?.toString() ?? null)).toEqual(['v1', 'no key', null]);
      expect(out.map((m) => m.offset)).toEqual(magic === 1 ? [40, 41, 42] : [0, 1, 2]);
    });
  }

  it('a flipped bit is CorruptMessage; a partial tail only where allowed', async () => {
    const set = encodeKafkaMessageSet(msgs, 1);
    const bad = Buffer.from(set);
    bad[30] = bad[30]! ^ 1;
    await expect(decodeKafkaMessageSet(bad, opts)).rejects.toMatchObject({ code: KafkaErrorCode.CorruptMessage });
    const cut = set.subarray(0, set.length - 3);
    await expect(decodeKafkaMessageSet(cut, opts)).rejects.toBeInstanceOf(KafkaProtocolError);
    expect(await decodeKafkaMessageSet(cut, { ...opts, allowPartialTail: true })).toHaveLength(2);
  });

  it('a gzip bomb is RecordListTooLarge', async () => {
    const big = [{ key: null, value: Buffer.alloc(2 << 20) }];
    const set = await gzipKafkaMessageSet(big, 1);
    await expect(decodeKafkaMessageSet(set, opts)).rejects.toMatchObject({ code: KafkaErrorCode.RecordListTooLarge });
  });
});

describe('Kafka messages as klog messages and back', () => {
  it('key and timestamp go into the metadata header; a message with neither is plain', async () => {
    const kafka = await decodeKafkaMessageSet(encodeKafkaMessageSet(msgs, 1), opts);
    const klog = klogMessageSetOf(kafka);
    const stored = [...iterateMessageSet(klog, 1000)];
    expect(stored).toHaveLength(3);
    expect(stored[1]!.message.attributes).toBe(0);
    const h0 = readMessageHeader(stored[0]!.message);
    expect(h0.header?.key?.toString()).toBe('k1');
    expect(h0.header?.timestamp).toBe(1_700_000_000_000);
    expect(h0.value.toString()).toBe('v1');

    const framed = await kafkaMessageSetOf(klog, 1000, 1, 1 << 20);
    expect(framed.count).toBe(3);
    expect(framed.lastOffset).toBe(stored[2]!.offset);
    expect(framed.nextOffset).toBe(1000 + klog.length);
    const back = await decodeKafkaMessageSet(framed.records, opts);
    expect(back.map((m) => [m.offset, m.key?.toString() ?? null, m.value?.toString(), m.timestamp])).toEqual([
      [stored[0]!.offset, 'k1', 'v1', 1_700_000_000_000],
      [stored[1]!.offset, null, 'no key', undefined],
      [stored[2]!.offset, '', '', 5],
    ]);
  });

  it('a partial klog message at the end is left for the next read', async () => {
    const klog = klogMessageSetOf(await decodeKafkaMessageSet(encodeKafkaMessageSet(msgs, 0), opts));
    const framed = await kafkaMessageSetOf(klog.subarray(0, klog.length - 2), 0, 0, 1 << 20);
    expect(framed.count).toBe(2);
    expect(framed.nextOffset).toBe(framed.lastOffset! + (klog.length - framed.lastOffset!) - (klog.length - framed.nextOffset));
    expect((await decodeKafkaMessageSet(framed.records, opts)).map((m) => m.magic)).toEqual([0, 0]);
  });
});

describe('int64 fields without BigInt', () => {
  it('offsets up to 2^53 and timestamp -1 survive encode and decode', async () => {
    const big = 2 ** 52 + 12345;
    const set = encodeKafkaMessageSet([{ key: null, value: Buffer.from('x') }, { key: null, value: Buffer.from('y'), timestamp: big }], 1, big);
    expect(set.readBigInt64BE(0)).toBe(BigInt(big));
    const out = await decodeKafkaMessageSet(set, opts);
    expect(out.map((m) => [m.offset, m.timestamp])).toEqual([
      [big, undefined],
      [big + 1, big],
    ]);
    expect(set.readBigInt64BE(12 + 4 + 2)).toBe(-1n);
  });
});

describe('a produced Kafka set converted in one pass', () => {
  const slow = async (set: Buffer): Promise<Buffer> => klogMessageSetOf(await decodeKafkaMessageSet(set, opts));
  it('gives the bytes klogMessageSetOf gives of its decoded messages', async () => {
    const many = Array.from({ length: 500 }, (_, i) => ({
      key: i % 3 === 0 ? null : Buffer.from(`key-${i}`.repeat(i % 7)),
      value: i % 11 === 0 ? null : Buffer.alloc(i % 300, i),
      ...(i % 2 === 0 ? { timestamp: 1_700_000_000_000 + i } : {}),
    }));
    const sets = [...[msgs, many].flatMap((m) => [encodeKafkaMessageSet(m, 1), encodeKafkaMessageSet(m, 0)]), Buffer.alloc(0)];
    for (const set of sets) {
      expect((await klogMessageSetOfKafka(set, opts)).equals(await slow(set))).toBe(true);
    }
    // A set with a gzip wrapper is decoded and converted the same way.
    const gz = Buffer.concat([encodeKafkaMessageSet(msgs, 1), await gzipKafkaMessageSet(many, 1, 600)]);
    expect((await klogMessageSetOfKafka(gz, opts)).equals(await slow(gz))).toBe(true);
  });

  it('refuses what decodeKafkaMessageSet refuses: a bad CRC, a cut message, a key over 65535 bytes', async () => {
    const bad = Buffer.from(encodeKafkaMessageSet(msgs, 1));
    bad[bad.length - 1]! ^= 0xff;
    await expect(klogMessageSetOfKafka(bad, opts)).rejects.toMatchObject({ code: KafkaErrorCode.CorruptMessage });
    const set = encodeKafkaMessageSet(msgs, 1);
    await expect(klogMessageSetOfKafka(set.subarray(0, set.length - 3), opts)).rejects.toBeInstanceOf(KafkaProtocolError);
    await expect(klogMessageSetOfKafka(set.subarray(0, 5), opts)).rejects.toBeInstanceOf(KafkaProtocolError);
    const huge = encodeKafkaMessageSet([{ key: Buffer.alloc(70_000), value: Buffer.from('v') }], 1);
    await expect(klogMessageSetOfKafka(huge, opts)).rejects.toThrow(/over 65535/);
    await expect(slow(huge)).rejects.toThrow(/over 65535/);
  });
});
