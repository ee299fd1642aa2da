/** Produce requests written in place from payloads: the same bytes as from encoded message sets. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  AckLevel,
  encodeMessageSet,
  encodeMessageSetWithHeaders,
  encodeMultiProduceRequest,
  encodeProduceAckRequest,
  multiProduceRequestBytes,
  produceAckRequestBytes,
  writeMultiProduceRequest,
  writeProduceAckRequest,
  type MessageHeader,
  type PartitionPayloads,
} from '../src/index.js';
import { payloadArb, topicArb } from './helpers.js';

const headerArb: fc.Arbitrary<MessageHeader | undefined> = fc.option(
  fc.record(
    { key: fc.uint8Array({ maxLength: 20 }).map((u) => Buffer.from(u)), timestamp: fc.integer({ min: 0, max: 2 ** 45 }), host: fc.string({ maxLength: 10 }) },
    { requiredKeys: [] },
  ),
  { nil: undefined },
);

const blockArb: fc.Arbitrary<PartitionPayloads> = fc
  .record({
    topic: topicArb,
    partition: fc.integer({ min: 0, max: 1000 }),
    entries: fc.array(fc.tuple(payloadArb, headerArb), { maxLength: 5 }),
    withHeaders: fc.boolean(),
  })
  .map(({ topic, partition, entries, withHeaders }) => ({
    topic,
    partition,
    payloads: entries.map(([p]) => p),
    ...(withHeaders ? { headers: entries.map(([, h]) => h) } : {}),
  }));

/** The same block as an encoded message set. */
function encoded(b: PartitionPayloads): { topic: string; partition: number; messages: Buffer } {
  const messages = b.headers === undefined ? encodeMessageSet(b.payloads) : encodeMessageSetWithHeaders(b.payloads.map((value, i) => ({ value, header: b.headers![i] })));
  return { topic: b.topic, partition: b.partition, messages };
}

describe('produce requests written from payloads', () => {
  it('MULTIPRODUCE: the bytes of the request built from encoded sets, at any position of a larger buffer', () => {
    fc.assert(
      fc.property(fc.array(blockArb, { minLength: 1, maxLength: 3 }), fc.nat(40), (blocks, at) => {
        const setBytes: number[] = [];
        const size = multiProduceRequestBytes(blocks, setBytes);
        const target = Buffer.alloc(at + size + 7, 0xee);
        expect(writeMultiProduceRequest(target, at, blocks, setBytes)).toBe(at + size);
        expect(target.subarray(at, at + size).equals(encodeMultiProduceRequest(blocks.map(encoded)))).toBe(true);
        expect(target.subarray(at + size).every((b) => b === 0xee)).toBe(true);
      }),
      { numRuns: 100 },
    );
  });

  it('PRODUCE_ACK: the bytes of the request built from encoded sets', () => {
    fc.assert(
      fc.property(fc.array(blockArb, { minLength: 1, maxLength: 3 }), fc.constantFrom(AckLevel.Appended, AckLevel.Flushed), (blocks, acks) => {
        const setBytes: number[] = [];
        const target = Buffer.alloc(produceAckRequestBytes(blocks, setBytes));
        writeProduceAckRequest(target, 0, acks, blocks, setBytes);
        expect(target.equals(encodeProduceAckRequest({ acks, partitions: blocks.map(encoded) }))).toBe(true);
      }),
      { numRuns: 100 },
    );
  });

  it('a request of no partitions, or of more than 32767, is a RangeError', () => {
    expect(() => multiProduceRequestBytes([], [])).toThrow(RangeError);
    const many = Array.from({ length: 32768 }, () => ({ topic: 't', partition: 0, payloads: [] }));
    expect(() => encodeMultiProduceRequest(many.map((b) => ({ ...b, messages: Buffer.alloc(0) })))).toThrow(RangeError);
  });

  it('a target too small is a RangeError', () => {
    const blocks = [{ topic: 't', partition: 0, payloads: [Buffer.alloc(100)] }];
    const setBytes: number[] = [];
    const size = multiProduceRequestBytes(blocks, setBytes);
    expect(() => writeMultiProduceRequest(Buffer.alloc(size - 1), 0, blocks, setBytes)).toThrow(RangeError);
  });
});
