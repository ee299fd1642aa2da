/**
 * The two conversions of the Kafka listener (klogMessageSetOfKafka for Produce, kafkaMessageSetOf
 * for Fetch) against references built from the decoders, message by message, on generated and
 * mutated sets: with klog's CRC addon they are one call into it (crcAddon.klogOfKafka,
 * crcAddon.kafkaOfKlog), without it JavaScript (vitest.config.ts runs both), and both must give
 * the same bytes, the same prefix of a damaged set and the same errors.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkMessageAt, compressionCodecMask, crc32Range, crcAddon, crcSupport, decodeMessageAt, encodeMessageSetWithHeaders, readMessageHeader, type MessageEntry } from '@klog/protocol';
import {
  KafkaErrorCode,
  decodeKafkaMessageSet,
  encodeKafkaMessageSet,
  gzipKafkaMessageSet,
  kafkaMessageSetOf,
  klogMessageSetOf,
  klogMessageSetOfKafka,
  plainKlogMessageSetOfKafka,
} from '../src/index.js';

const opts = { maxInnerBytes: 1 << 20 };
const magics = fc.constantFrom(0 as const, 1 as const);
const bytes = (max: number) => fc.uint8Array({ maxLength: max }).map((a) => Buffer.from(a));
const kafkaMessage = fc.record({
  key: fc.option(bytes(40), { nil: null }),
  value: fc.option(bytes(300), { nil: null }),
  timestamp: fc.option(fc.integer({ min: 0, max: 2 ** 53 - 1 }), { nil: undefined }),
});
const klogEntry: fc.Arbitrary<MessageEntry> = fc.record({
  value: bytes(300),
  header: fc.option(
    fc.record(
      { key: bytes(40), timestamp: fc.integer({ min: -(2 ** 53 - 1), max: 2 ** 53 - 1 }), host: fc.string({ maxLength: 20 }) },
      { requiredKeys: [] },
    ),
    { nil: undefined },
  ),
});

/** A produced set's klog set, the reference way: decoded to objects, then encoded. */
async function slowProduce(set: Buffer): Promise<Buffer> {
  return klogMessageSetOf(await decodeKafkaMessageSet(set, opts));
}

/** What a conversion gives: the bytes, or the error's name and Kafka (or klog) code. */
async function outcome(f: () => Promise<Buffer>): Promise<Buffer | { error: string; code: unknown }> {
  try {
    return await f();
  } catch (err) {
    return { error: (err as Error).name, code: (err as { code?: unknown }).code };
  }
}

type Served = [offset: number, key: string | null, value: string | null, timestamp: number | undefined];

/**
 * What a fetch of the klog set `set` read at `base` must serve, message by message: the sound
 * uncompressed messages up to the first that is not (a partial tail ends it quietly), or
 * 'corrupt' when the first is damaged.
 */
function slowFetch(set: Buffer, base: number, magic: 0 | 1): { served: Served[]; next: number } | 'corrupt' {
  const served: Served[] = [];
  let pos = 0;
  while (pos < set.length) {
    const c = checkMessageAt(set, pos);
    if (c.status === 'partial') break;
    let one: Served | undefined;
    const size = c.status === 'valid' ? c.size : 0;
    if (c.status === 'valid') {
      const m = decodeMessageAt(set, pos);
      try {
        const { header, value } = readMessageHeader(m);
        if ((m.attributes & compressionCodecMask) === 0) {
          one = [base + pos, header?.key?.toString('hex') ?? null, value.toString('hex'), magic === 1 ? (header?.timestamp ?? -1) : undefined];
        }
      } catch {
        // a bad metadata header: damage
      }
    }
    if (one === undefined) {
      if (served.length === 0) return 'corrupt';
      break;
    }
    served.push(one);
    pos += size;
  }
  return { served, next: base + pos };
}

/**
 * The messages of a Kafka set as served, read field by field, every CRC checked (a timestamp
 * below -1, which a klog header may hold, is read as it is: decodeKafkaMessageSet refuses it).
 */
function readKafkaSet(set: Buffer, magic: 0 | 1): Served[] {
  const out: Served[] = [];
  for (let pos = 0; pos < set.length; ) {
    const end = pos + 12 + set.readInt32BE(pos + 8);
    expect(set.readUInt32BE(pos + 12)).toBe(crc32Range(set, pos + 16, end));
    expect([set[pos + 16], set[pos + 17]]).toEqual([magic, 0]);
    let p = pos + 18;
    const timestamp = magic === 1 ? Number(set.readBigInt64BE(p)) : undefined;
    if (magic === 1) p += 8;
    const keyBytes = set.readInt32BE(p);
    const key = keyBytes < 0 ? null : set.toString('hex', p + 4, p + 4 + keyBytes);
    p += 4 + Math.max(0, keyBytes);
    const valueBytes = set.readInt32BE(p);
    expect(p + 4 + valueBytes).toBe(end);
    out.push([Number(set.readBigInt64BE(pos)), key, set.toString('hex', p + 4, end), timestamp]);
    pos = end;
  }
  return out;
}

async function fetchOutcome(set: Buffer, base: number, magic: 0 | 1): Promise<{ served: Served[]; next: number } | 'corrupt'> {
  try {
    const f = await kafkaMessageSetOf(set, base, magic, 1 << 20);
    const served = readKafkaSet(f.records, magic);
    expect(f.count).toBe(served.length);
    expect(f.lastOffset).toBe(served.length === 0 ? undefined : served[served.length - 1]![0]);
    return { served, next: f.nextOffset };
  } catch (err) {
    expect(err).toMatchObject({ code: KafkaErrorCode.CorruptMessage });
    return 'corrupt';
  }
}

describe(`Produce: a Kafka message set as a klog one (${crcSupport.path})`, () => {
  it('gives the bytes of the reference for generated sets of magic 0 and 1', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(kafkaMessage, { maxLength: 40 }), magics, async (msgs, magic) => {
        const set = encodeKafkaMessageSet(msgs, magic);
        expect((await klogMessageSetOfKafka(set, opts)).equals(await slowProduce(set))).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('gives the reference bytes or its error for mutated and cut sets', async () => {
    const set = encodeKafkaMessageSet(
      [
        { key: Buffer.from('key'), value: Buffer.from('value one'), timestamp: 1_700_000_000_000 },
        { key: null, value: null },
        { key: Buffer.alloc(0), value: Buffer.from('three') },
      ],
      1,
    );
    await fc.assert(
      fc.asyncProperty(fc.nat(set.length - 1), fc.integer({ min: 0, max: 255 }), fc.nat(set.length), async (at, byte, cut) => {
        const m = Buffer.from(set);
        m[at] = byte;
        for (const s of [m, m.subarray(0, cut)]) expect(await outcome(() => klogMessageSetOfKafka(s, opts))).toEqual(await outcome(() => slowProduce(s)));
      }),
      { numRuns: 1000 },
    );
  });
});

describe(`Produce into a buffer used again (${crcSupport.path})`, () => {
  it('gives the reference bytes into the start of a buffer holding earlier conversions, for generated sets', async () => {
    const shared = Buffer.alloc(1 << 16, 0xa5);
    await fc.assert(
      fc.asyncProperty(fc.array(kafkaMessage, { maxLength: 40 }), magics, async (msgs, magic) => {
        const set = encodeKafkaMessageSet(msgs, magic);
        const converted = plainKlogMessageSetOfKafka(set, shared);
        expect(converted).toBeDefined();
        expect(converted!.buffer).toBe(shared.buffer);
        expect(converted!.equals(await slowProduce(set))).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('leaves a gzip set to klogMessageSetOfKafka, and refuses a buffer shorter than the set', async () => {
    const gzipped = await gzipKafkaMessageSet([{ key: null, value: Buffer.from('inside') }], 1);
    expect(plainKlogMessageSetOfKafka(gzipped, Buffer.alloc(gzipped.length))).toBeUndefined();
    const set = encodeKafkaMessageSet([{ key: null, value: Buffer.from('value') }], 1);
    expect(() => plainKlogMessageSetOfKafka(set, Buffer.alloc(set.length - 1))).toThrow(RangeError);
  });
});

describe(`Fetch: a klog message set as a Kafka one (${crcSupport.path})`, () => {
  it('serves what the reference serves for generated sets, cut anywhere', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(klogEntry, { maxLength: 30 }), fc.nat(), fc.nat(1 << 30), magics, async (entries, cut, base, magic) => {
        const full = encodeMessageSetWithHeaders(entries);
        const set = full.subarray(0, full.length === 0 ? 0 : cut % (full.length + 1));
        expect(await fetchOutcome(set, base, magic)).toEqual(slowFetch(set, base, magic));
      }),
      { numRuns: 300 },
    );
  });

  it('serves what the reference serves for mutated sets, or CorruptMessage when it does', async () => {
    const set = encodeMessageSetWithHeaders([
      { value: Buffer.from('plain') },
      { value: Buffer.from('with a key'), header: { key: Buffer.from('k'), timestamp: 1_700_000_000_000 } },
      { value: Buffer.from('with a host'), header: { host: 'h', timestamp: -5 } },
    ]);
    await fc.assert(
      fc.asyncProperty(fc.nat(set.length - 1), fc.integer({ min: 0, max: 255 }), magics, async (at, byte, magic) => {
        const m = Buffer.from(set);
        m[at] = byte;
        expect(await fetchOutcome(m, 1000, magic)).toEqual(slowFetch(m, 1000, magic));
      }),
      { numRuns: 1000 },
    );
  });

  it('serves a set of messages that grow more than a quarter in part, and the rest from where it ended', async () => {
    // Empty payloads: 10 klog bytes become 34 Kafka ones; one fetch may end early, never out of order.
    const set = encodeMessageSetWithHeaders(Array.from({ length: 2000 }, () => ({ value: Buffer.alloc(0) })));
    const want = slowFetch(set, 0, 1);
    const got: Served[] = [];
    for (let next = 0; next < set.length; ) {
      const part = await fetchOutcome(set.subarray(next), next, 1);
      if (part === 'corrupt' || part.served.length === 0) throw new Error(`nothing served at ${next}`);
      got.push(...part.served);
      next = part.next;
    }
    expect(want).not.toBe('corrupt');
    expect(got).toEqual(want !== 'corrupt' && want.served);
  });
});

describe.runIf(crcAddon !== undefined)('the addon', () => {
  it('refuses arguments that do not name ranges of its buffers', () => {
    const a = crcAddon!;
    const r = new Float64Array(4);
    expect(() => a.klogOfKafka(Buffer.alloc(10), 0, 11, Buffer.alloc(10), 0)).toThrow(RangeError);
    expect(() => a.klogOfKafka(Buffer.alloc(10), 5, 4, Buffer.alloc(10), 0)).toThrow(RangeError);
    expect(() => a.klogOfKafka(Buffer.alloc(10), 0, 10, Buffer.alloc(10), 11)).toThrow(RangeError);
    expect(() => (a.klogOfKafka as (...x: unknown[]) => number)('x', 0, 0, Buffer.alloc(1), 0)).toThrow(TypeError);
    expect(() => a.kafkaOfKlog(Buffer.alloc(10), 0, 10, Buffer.alloc(10), 0, -1, 1, r)).toThrow(RangeError);
    expect(() => a.kafkaOfKlog(Buffer.alloc(10), 0, 10, Buffer.alloc(10), 0, 0, 2 as 1, r)).toThrow(RangeError);
    expect(() => a.kafkaOfKlog(Buffer.alloc(10), 0, 10, Buffer.alloc(10), 0, 0.5, 1, r)).toThrow(RangeError);
    expect(() => a.kafkaOfKlog(Buffer.alloc(10), 0, 10, Buffer.alloc(10), 0, 0, 1, new Float64Array(3))).toThrow(TypeError);
  });

  it('stops at a dst too short, having written nothing past it', () => {
    const set = encodeKafkaMessageSet([{ key: null, value: Buffer.from('value') }], 1);
    const dst = Buffer.alloc(set.length);
    expect(crcAddon!.klogOfKafka(set, 0, set.length, dst, set.length - 10)).toBe(-1);
    expect(dst.equals(Buffer.alloc(set.length))).toBe(true);
  });
});
