/**
 * Shared test helpers: fixture loading, a reference CRC-32, fast-check arbitraries for every
 * request and response, and assertions about the errors decoders may throw.
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { expect } from 'vitest';
import {
  AckLevel,
  ErrorCode,
  ProtocolError,
  encodeMessageSet,
  maxTopicNameBytes,
  type ErrorCodeValue,
  type FetchRequest,
  type FetchResponse,
  type OffsetsRequest,
  type PartitionMessages,
  type ProduceAckRequest,
  type ProduceAckResult,
  type TopicMetadata,
} from '../src/index.js';

/** Reads `fixtures/<name>`: hex digits, whitespace ignored, `#` comments to the end of the line. */
export function loadHex(name: string): Buffer {
  const text = readFileSync(new URL(`../fixtures/${name}`, import.meta.url), 'utf8');
  const hex = text
    .split('\n')
    .map((line) => line.replace(/#.*/, ''))
    .join('')
    .replace(/\s+/g, '');
  if (!/^(?:[0-9a-fA-F]{2})*$/.test(hex)) throw new Error(`fixture ${name} is not whole hex bytes`);
  return Buffer.from(hex, 'hex');
}

/** Bit-at-a-time CRC-32/IEEE (reflected polynomial 0xEDB88320), independent of zlib. */
export function crc32Reference(bytes: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of bytes) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0xedb88320 : c >>> 1;
  }
  return (c ^ 0xffffffff) >>> 0;
}

const knownCodes = new Set<number>(Object.values(ErrorCode));

/** Asserts `f` throws a ProtocolError (with `code` when given) and returns it. */
export function expectProtocolError(f: () => unknown, code?: ErrorCodeValue): ProtocolError {
  let thrown: unknown;
  try {
    f();
  } catch (e) {
    thrown = e;
  }
  expect(thrown, 'expected a ProtocolError to be thrown').toBeInstanceOf(ProtocolError);
  const err = thrown as ProtocolError;
  expect(knownCodes.has(err.code)).toBe(true);
  expect(err.code).not.toBe(ErrorCode.None);
  if (code !== undefined) expect(err.code).toBe(code);
  expect(err.message.length).toBeGreaterThan(0);
  return err;
}

/** Runs `f`; if it throws, the error must be a ProtocolError with a defined, non-zero code. */
export function returnsOrProtocolError(f: () => unknown): boolean {
  try {
    f();
    return true;
  } catch (e) {
    expect(e).toBeInstanceOf(ProtocolError);
    const code = (e as ProtocolError).code;
    expect(knownCodes.has(code)).toBe(true);
    expect(code).not.toBe(ErrorCode.None);
    return false;
  }
}

/** The bytes after the 4-byte size prefix, after checking the prefix counts exactly them. */
export function unframe(frame: Buffer): Buffer {
  expect(frame.length).toBeGreaterThanOrEqual(6);
  expect(frame.readInt32BE(0)).toBe(frame.length - 4);
  return frame.subarray(4);
}

/** Deterministic filler for large payloads (generating them byte by byte is slow). */
export function pseudoRandomBytes(length: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(length);
  let x = seed | 1;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    b[i] = x & 0xff;
  }
  return b;
}

// ---- arbitraries ----

/** fc.record builds null-prototype objects by default; decoders return plain ones. */
const plain = { noNullPrototype: true } as const;

export const topicArb = fc
  .stringMatching(new RegExp(`^[A-Za-z0-9._-]{1,${maxTopicNameBytes}}$`))
  .filter((t) => t !== '.' && t !== '..');

export const partitionArb = fc.integer({ min: 0, max: 0x7fffffff });
export const offsetArb = fc.maxSafeNat();
export const nonNegInt32Arb = fc.integer({ min: 0, max: 0x7fffffff });

/** Payloads: mostly small (empty included), sometimes 64 KiB to 1 MiB. */
export const payloadArb: fc.Arbitrary<Buffer> = fc.oneof(
  { arbitrary: fc.uint8Array({ maxLength: 300 }).map((u) => Buffer.from(u)), weight: 20 },
  { arbitrary: fc.constant(Buffer.alloc(0)), weight: 3 },
  {
    arbitrary: fc
      .record({ length: fc.integer({ min: 64 * 1024, max: 1024 * 1024 }), seed: fc.integer() })
      .map(({ length, seed }) => pseudoRandomBytes(length, seed)),
    weight: 1,
  },
);

/** Small payloads only, for properties that loop over every byte position. */
export const smallPayloadArb: fc.Arbitrary<Buffer> = fc.uint8Array({ maxLength: 40 }).map((u) => Buffer.from(u));

export const messageSetArb = fc.array(smallPayloadArb, { maxLength: 6 }).map((ps) => encodeMessageSet(ps));

export const partitionMessagesArb: fc.Arbitrary<PartitionMessages> = fc.record(
  { topic: topicArb, partition: partitionArb, messages: messageSetArb },
  plain,
);

export const fetchArb: fc.Arbitrary<FetchRequest> = fc
  .record(
    {
      topic: topicArb,
      partition: partitionArb,
      offset: offsetArb,
      maxBytes: nonNegInt32Arb,
      maxWaitMs: fc.option(nonNegInt32Arb, { nil: undefined }),
    },
    plain,
  )
  .map((f) => (f.maxWaitMs === undefined ? { topic: f.topic, partition: f.partition, offset: f.offset, maxBytes: f.maxBytes } : f));

/** A fetch as a MULTIFETCH carries it: no maxWaitMs. */
export const plainFetchArb: fc.Arbitrary<FetchRequest> = fc.record(
  { topic: topicArb, partition: partitionArb, offset: offsetArb, maxBytes: nonNegInt32Arb },
  plain,
);

export const offsetsRequestArb: fc.Arbitrary<OffsetsRequest> = fc.record(
  {
    topic: topicArb,
    partition: partitionArb,
    time: fc.oneof(fc.constantFrom(-1, -2), fc.maxSafeNat()),
    maxOffsets: fc.integer({ min: 1, max: 0x7fffffff }),
  },
  plain,
);

export const produceAckRequestArb: fc.Arbitrary<ProduceAckRequest> = fc.record(
  {
    acks: fc.constantFrom(AckLevel.Appended, AckLevel.Flushed, AckLevel.All),
    partitions: fc.array(partitionMessagesArb, { minLength: 1, maxLength: 4 }),
  },
  plain,
);

export const errorCodeArb: fc.Arbitrary<ErrorCodeValue> = fc.constantFrom(...Object.values(ErrorCode));
export const nonZeroErrorCodeArb: fc.Arbitrary<ErrorCodeValue> = fc.constantFrom(
  ...Object.values(ErrorCode).filter((c) => c !== ErrorCode.None),
);

export const produceAckResultArb: fc.Arbitrary<ProduceAckResult> = fc.record(
  {
    topic: topicArb,
    partition: partitionArb,
    errorCode: errorCodeArb,
    offset: fc.integer({ min: -1, max: Number.MAX_SAFE_INTEGER }),
    nextOffset: fc.integer({ min: -1, max: Number.MAX_SAFE_INTEGER }),
  },
  plain,
);

export const topicMetadataArb: fc.Arbitrary<TopicMetadata> = fc.record(
  { topic: topicArb, errorCode: errorCodeArb, partitions: fc.integer({ min: -0x80000000, max: 0x7fffffff }) },
  plain,
);

/** Fetch responses as a MULTIFETCH response part: data, OffsetOutOfRange with its range, or a bare error. */
export const fetchResponseArb: fc.Arbitrary<FetchResponse> = fc.oneof(
  messageSetArb.map((messages) => ({ errorCode: ErrorCode.None, messages })),
  fc
    .record({ earliest: offsetArb, end: offsetArb }, plain)
    .map(({ earliest, end }) => ({ errorCode: ErrorCode.OffsetOutOfRange, messages: Buffer.alloc(0), earliest, end })),
  nonZeroErrorCodeArb
    .filter((c) => c !== ErrorCode.OffsetOutOfRange)
    .map((errorCode) => ({ errorCode, messages: Buffer.alloc(0) })),
);
