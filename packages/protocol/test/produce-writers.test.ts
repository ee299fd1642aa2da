/** Produce requests written in place from payloads: the same bytes as from encoded message sets. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  AckLevel,
  encodeMessageSet,
  encodeMessageSetWithHeaders,
  encodeMultiProduceRequest,
  encodeProduceAckRequest,
  entrySizeInBytes,
  ErrorCode,
  messageSizeInBytes,
  multiProduceRequestBytes,
  produceAckRequestBytes,
  singleSetMultiProduceRequestBytes,
  TopicNameCache,
  writeMultiProduceMessageRequest,
  writeMultiProduceRequest,
  writeProduceAckRequest,
  type MessageHeader,
  type PartitionPayloads,
} from '../src/index.js';
import { expectProtocolError, payloadArb, topicArb } from './helpers.js';

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
  const messages =
    b.headers === undefined ? encodeMessageSet(b.payloads) : encodeMessageSetWithHeaders(b.payloads.map((value, i) => ({ value, header: b.headers![i] })));
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

/** A topic name of `n` characters over the whole alphabet (so a byte copied wrong shows). */
function topicOf(n: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-';
  return Array.from({ length: n }, (_, i) => alphabet[(i * 7) % alphabet.length]).join('');
}

/** The size of one message, as a producer counts it. */
function sizeOf(payload: Buffer, header: MessageHeader | undefined): number {
  return header === undefined ? messageSizeInBytes(payload.length) : entrySizeInBytes({ value: payload, header });
}

/** writeMultiProduceMessageRequest at `at` of a buffer filled with 0xee, with its size from singleSetMultiProduceRequestBytes. */
function writeOne(
  topic: string,
  partition: number,
  payload: Buffer,
  header: MessageHeader | undefined,
  at: number,
): { target: Buffer; size: number; end: number } {
  const setBytes = sizeOf(payload, header);
  const size = singleSetMultiProduceRequestBytes(topic, setBytes);
  const target = Buffer.alloc(at + size + 5, 0xee);
  const end = writeMultiProduceMessageRequest(target, at, topic, partition, payload, header, setBytes);
  return { target, size, end };
}

/** The request writeMultiProduceRequest writes for the one block, and the size multiProduceRequestBytes gives it. */
function reference(topic: string, partition: number, payload: Buffer, header: MessageHeader | undefined): { bytes: Buffer; size: number } {
  const blocks = [{ topic, partition, payloads: [payload], ...(header === undefined ? {} : { headers: [header] }) }];
  const setBytes: number[] = [];
  const size = multiProduceRequestBytes(blocks, setBytes);
  const bytes = Buffer.alloc(size);
  writeMultiProduceRequest(bytes, 0, blocks, setBytes);
  return { bytes, size };
}

describe('MULTIPRODUCE request of one message (writeMultiProduceMessageRequest)', () => {
  const topics = [1, 32, 33, 249].map(topicOf);
  const headers: Array<MessageHeader | undefined> = [undefined, { timestamp: 1_700_000_000_123, host: 'host-a' }, { key: Buffer.from('key'), timestamp: 0, host: '' }];
  for (const topic of topics) {
    for (const partition of [0, 2 ** 31 - 1]) {
      for (const payloadBytes of [0, 1000]) {
        for (const [h, header] of headers.entries()) {
          it(`topic of ${topic.length} chars, partition ${partition}, payload ${payloadBytes} B, header ${h}: the bytes and size of writeMultiProduceRequest for the one block`, () => {
            const payload = Buffer.alloc(payloadBytes);
            for (let i = 0; i < payloadBytes; i++) payload[i] = (i * 13 + 7) & 0xff;
            const ref = reference(topic, partition, payload, header);
            const { target, size, end } = writeOne(topic, partition, payload, header, 3);
            expect(size).toBe(ref.size);
            expect(end).toBe(3 + size);
            expect(target.subarray(3, end).equals(ref.bytes)).toBe(true);
            // Nothing written outside the frame.
            expect(target.subarray(0, 3).every((b) => b === 0xee)).toBe(true);
            expect(target.subarray(end).every((b) => b === 0xee)).toBe(true);
          });
        }
      }
    }
  }

  it('any topic, partition, payload and header: the bytes and size of writeMultiProduceRequest, at any position', () => {
    fc.assert(
      fc.property(topicArb, fc.integer({ min: 0, max: 0x7fffffff }), payloadArb, headerArb, fc.nat(40), (topic, partition, payload, header, at) => {
        const ref = reference(topic, partition, payload, header);
        const { target, size, end } = writeOne(topic, partition, payload, header, at);
        expect(size).toBe(ref.size);
        expect(end).toBe(at + size);
        expect(target.subarray(at, end).equals(ref.bytes)).toBe(true);
        expect(target.subarray(0, at).every((b) => b === 0xee)).toBe(true);
        expect(target.subarray(end).every((b) => b === 0xee)).toBe(true);
      }),
      { numRuns: 200 },
    );
  });

  it('singleSetMultiProduceRequestBytes throws InvalidTopic for a bad name, also right after a valid one, with and without a cache', () => {
    for (const topics of [undefined, new TopicNameCache()]) {
      for (const bad of ['', '.', '..', 'a b', 'tópico', 'x'.repeat(250), 'a/b']) {
        expect(singleSetMultiProduceRequestBytes('good', 10, topics)).toBeGreaterThan(0); // the valid topic is the one last checked
        expectProtocolError(() => singleSetMultiProduceRequestBytes(bad, 10, topics), ErrorCode.InvalidTopic);
        // And still after the failure: a bad name is never remembered as valid.
        expectProtocolError(() => singleSetMultiProduceRequestBytes(bad, 10, topics), ErrorCode.InvalidTopic);
      }
      expect(singleSetMultiProduceRequestBytes(topicOf(249), 10, topics)).toBe(reference(topicOf(249), 0, Buffer.alloc(0), undefined).size);
    }
  });

  it('a target too small, or a position past its end, is a RangeError and nothing is written', () => {
    const payload = Buffer.alloc(100, 1);
    const setBytes = messageSizeInBytes(payload.length);
    const size = singleSetMultiProduceRequestBytes('topic', setBytes);
    for (const topic of ['topic', topicOf(40)]) {
      const need = singleSetMultiProduceRequestBytes(topic, setBytes);
      const small = Buffer.alloc(need - 1, 0xee);
      expect(() => writeMultiProduceMessageRequest(small, 0, topic, 0, payload, undefined, setBytes)).toThrow(RangeError);
      expect(small.every((b) => b === 0xee)).toBe(true);
    }
    const target = Buffer.alloc(size + 10, 0xee);
    expect(() => writeMultiProduceMessageRequest(target, 11, 'topic', 0, payload, undefined, setBytes)).toThrow(RangeError);
    expect(() => writeMultiProduceMessageRequest(target, -1, 'topic', 0, payload, undefined, setBytes)).toThrow(RangeError);
    expect(target.every((b) => b === 0xee)).toBe(true);
  });

  it('a setBytes that is not the message\'s size is a RangeError', () => {
    const payload = Buffer.alloc(100, 1);
    const header: MessageHeader = { timestamp: 5, host: 'h' };
    for (const h of [undefined, header]) {
      const right = sizeOf(payload, h);
      for (const wrong of [right - 1, right + 1, 0, right + 100]) {
        const target = Buffer.alloc(singleSetMultiProduceRequestBytes('t', right) + 200);
        expect(() => writeMultiProduceMessageRequest(target, 0, 't', 0, payload, h, wrong)).toThrow(RangeError);
      }
      // The header counted but not given, and the other way round.
      const target = Buffer.alloc(singleSetMultiProduceRequestBytes('t', sizeOf(payload, header)) + 200);
      expect(() => writeMultiProduceMessageRequest(target, 0, 't', 0, payload, undefined, sizeOf(payload, header))).toThrow(RangeError);
      expect(() => writeMultiProduceMessageRequest(target, 0, 't', 0, payload, header, messageSizeInBytes(payload.length))).toThrow(RangeError);
    }
  });
});
