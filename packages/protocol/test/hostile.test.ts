/**
 * Hostile input: decoders must only ever throw ProtocolError with a meaningful code, never a
 * RangeError or TypeError, and never hang (docs/design.md §3: a malformed request never crashes a broker).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  Decoder,
  ErrorCode,
  RequestType,
  decodeFetchResponse,
  decodeMetadataResponse,
  decodeMultiFetchResponse,
  decodeOffsetsResponse,
  decodeProduceAckResponse,
  decodeRequest,
  encodeFetchRequest,
  encodeMetadataRequest,
  encodeMetadataResponse,
  encodeMultiFetchPart,
  encodeMultiFetchRequest,
  encodeMultiProduceRequest,
  encodeOffsetsRequest,
  encodeOffsetsResponse,
  encodeProduceAckRequest,
  encodeProduceAckResponse,
  encodeProduceRequest,
  openFrame,
  readFrameSize,
} from '../src/index.js';
import {
  expectProtocolError,
  fetchArb,
  fetchResponseArb,
  offsetsRequestArb,
  partitionMessagesArb,
  plainFetchArb,
  produceAckRequestArb,
  produceAckResultArb,
  returnsOrProtocolError,
  topicArb,
  topicMetadataArb,
  unframe,
} from './helpers.js';
import { itBadTopicsRefused, itRandomRequestBodies, itRequestLayout, itResponseDecodersOnRandomBytes, itResponseLayout, itStrictPrefixesRefused, type ResponseDecoders, type ResponseLayout } from './hostile-suites.js';
import { build, i16, i32, i64, I32, raw, set, topic, withField, type Field } from './field-layouts.js';

const responseDecoders: ResponseDecoders = {
  fetch: (b, code) => decodeFetchResponse(code, new Decoder(b)),
  multifetch: (b) => decodeMultiFetchResponse(new Decoder(b)),
  offsets: (b) => decodeOffsetsResponse(new Decoder(b)),
  'produce-ack': (b) => decodeProduceAckResponse(new Decoder(b)),
  metadata: (b) => decodeMetadataResponse(new Decoder(b)),
};

/** Any valid request frame, without its size prefix. */
const requestBodyArb: fc.Arbitrary<{ body: Buffer; fetchWithWait: boolean }> = fc.oneof(
  partitionMessagesArb.map((p) => ({ body: unframe(encodeProduceRequest(p)), fetchWithWait: false })),
  fc.array(partitionMessagesArb, { minLength: 1, maxLength: 3 }).map((ps) => ({ body: unframe(encodeMultiProduceRequest(ps)), fetchWithWait: false })),
  fetchArb.map((f) => ({ body: unframe(encodeFetchRequest(f)), fetchWithWait: (f.maxWaitMs ?? 0) > 0 })),
  fc.array(plainFetchArb, { minLength: 1, maxLength: 3 }).map((fs) => ({ body: unframe(encodeMultiFetchRequest(fs)), fetchWithWait: false })),
  offsetsRequestArb.map((r) => ({ body: unframe(encodeOffsetsRequest(r)), fetchWithWait: false })),
  produceAckRequestArb.map((r) => ({ body: unframe(encodeProduceAckRequest(r)), fetchWithWait: false })),
  fc.array(topicArb, { minLength: 1, maxLength: 4 }).map((ts) => ({ body: unframe(encodeMetadataRequest(ts)), fetchWithWait: false })),
);

describe('random bytes', () => {
  it('decodeRequest only ever throws ProtocolError', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (u) => {
        returnsOrProtocolError(() => decodeRequest(Buffer.from(u)));
      }),
      { numRuns: 2000 },
    );
  });

  itRandomRequestBodies('decodeRequest only ever throws ProtocolError for a known type with a random body', 0, 6);

  itResponseDecodersOnRandomBytes(responseDecoders);

  it('readFrameSize returns a size in [2, max], undefined, or throws ProtocolError', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 8 }), fc.integer({ min: 2, max: 0x7fffffff }), (u, max) => {
        try {
          const size = readFrameSize(Buffer.from(u), 0, max);
          if (u.length < 4) expect(size).toBeUndefined();
          else expect(size! >= 2 && size! <= max).toBe(true);
        } catch (e) {
          expectProtocolError(() => {
            throw e;
          }, ErrorCode.InvalidRequest);
        }
      }),
    );
  });
});

describe('truncated frames', () => {
  itStrictPrefixesRefused(
    'every strict prefix of a request frame is rejected with a ProtocolError',
    requestBodyArb,
    (body) => decodeRequest(body),
    // A FETCH cut just before its optional maxWaitMs is a valid 0.7 FETCH.
    ({ body, fetchWithWait }, cut) => {
      if (!fetchWithWait || cut !== body.length - 4) return false;
      const r = decodeRequest(body.subarray(0, cut));
      expect(r.type === RequestType.Fetch && r.fetch.maxWaitMs).toBeUndefined();
      return true;
    },
  );

  itStrictPrefixesRefused(
    'every strict prefix of an OFFSETS, PRODUCE_ACK or METADATA response body is rejected',
    fc.oneof(
      fc.array(fc.maxSafeInteger(), { maxLength: 6 }).map((o) => ({ body: unframe(encodeOffsetsResponse(o)).subarray(2), name: 'offsets' })),
      fc.array(produceAckResultArb, { maxLength: 4 }).map((r) => ({ body: unframe(encodeProduceAckResponse(r)).subarray(2), name: 'produce-ack' })),
      fc.array(topicMetadataArb, { maxLength: 4 }).map((t) => ({ body: unframe(encodeMetadataResponse(t)).subarray(2), name: 'metadata' })),
    ),
    (body, { name }) => responseDecoders[name]!(body, 0),
  );

  it('every prefix of a MULTIFETCH response body decodes to whole parts or throws ProtocolError', () => {
    fc.assert(
      fc.property(fc.array(fetchResponseArb, { minLength: 1, maxLength: 4 }), (parts) => {
        const encoded = parts.map(encodeMultiFetchPart);
        const body = Buffer.concat(encoded);
        const boundaries = encoded.reduce<number[]>((acc, p) => [...acc, acc[acc.length - 1]! + p.length], [0]);
        for (let cut = 0; cut < body.length; cut++) {
          const ok = returnsOrProtocolError(() => decodeMultiFetchResponse(new Decoder(body.subarray(0, cut))));
          expect(ok).toBe(boundaries.includes(cut));
        }
      }),
      { numRuns: 100 },
    );
  }, 30_000);
});

// ---- field by field: a layout per request and response (test/field-layouts.ts) ----

const fetchFields = (t: string, withWait: boolean): Field[] => [
  ...topic('topic', t),
  i32('partition', 1, 'partition'),
  i64('offset', 24),
  i32('maxBytes', 4096, 'maxBytes'),
  ...(withWait ? [i32('maxWaitMs', 100, 'maxWaitMs')] : []),
];

/** Request layouts: `type | body`, as decodeRequest receives them. */
const requestLayouts: Record<string, Field[]> = {
  PRODUCE: [i16('type', 0), ...topic('topic', 'events'), i32('partition', 0, 'partition'), i32('messageSetSize', set.length, 'size'), raw('messageSet', set)],
  MULTIPRODUCE: [
    i16('type', 3),
    i16('count', 2, 'count'),
    ...topic('topic 1', 'events'),
    i32('partition 1', 0, 'partition'),
    i32('messageSetSize 1', set.length, 'size'),
    raw('messageSet 1', set),
    ...topic('topic 2', 'clicks'),
    i32('partition 2', 3, 'partition'),
    i32('messageSetSize 2', set.length, 'size'),
    raw('messageSet 2', set),
  ],
  FETCH: [i16('type', 1), ...fetchFields('events', false)],
  'FETCH long poll': [i16('type', 1), ...fetchFields('events', true)],
  MULTIFETCH: [i16('type', 2), i16('count', 2, 'count'), ...fetchFields('events', false), ...fetchFields('clicks', false)],
  OFFSETS: [i16('type', 4), ...topic('topic', 'events'), i32('partition', 2, 'partition'), i64('time', -1, 'time'), i32('maxOffsets', 10, 'maxOffsets')],
  PRODUCE_ACK: [
    i16('type', 5),
    i16('acks', 1, 'acks'),
    i16('count', 1, 'count'),
    ...topic('topic', 'events'),
    i32('partition', 0, 'partition'),
    i32('messageSetSize', set.length, 'size'),
    raw('messageSet', set),
  ],
  METADATA: [i16('type', 6), i16('count', 2, 'count'), ...topic('topic 1', 'events'), ...topic('topic 2', 'clicks')],
};

/** Response body layouts (after the error code), with the decoder for each. */
const responseLayouts: Record<string, ResponseLayout> = {
  'FETCH OffsetOutOfRange': {
    fields: [i64('earliest', 0), i64('end', 34)],
    errorCode: ErrorCode.OffsetOutOfRange,
    decode: responseDecoders.fetch!,
  },
  MULTIFETCH: {
    fields: [i32('part size', 2 + set.length, 'size'), i16('part errorCode', 0), raw('part messages', set), i32('part size', 18, 'size'), i16('part errorCode', 1), i64('earliest', 0), i64('end', 34)],
    errorCode: ErrorCode.None,
    decode: responseDecoders.multifetch!,
  },
  OFFSETS: {
    fields: [i32('count', 2, 'size'), i64('offset 1', 536870912), i64('offset 2', 0)],
    errorCode: ErrorCode.None,
    decode: responseDecoders.offsets!,
  },
  PRODUCE_ACK: {
    fields: [i16('count', 1, 'count'), ...topic('topic', 'events'), i32('partition', 0, 'partition'), i16('errorCode', 0), i64('offset', 0), i64('nextOffset', 34)],
    errorCode: ErrorCode.None,
    decode: responseDecoders['produce-ack']!,
  },
  METADATA: {
    fields: [i16('count', 2, 'count'), ...topic('topic 1', 'events'), i16('errorCode 1', 0), i32('partitions 1', 4), ...topic('topic 2', 'clicks'), i16('errorCode 2', 0), i32('partitions 2', 1)],
    errorCode: ErrorCode.None,
    decode: responseDecoders.metadata!,
  },
};

describe('hostile values in every length, count, size and number field', () => {
  for (const [name, fields] of Object.entries(requestLayouts)) describe(name, () => itRequestLayout(fields));
  for (const [name, layout] of Object.entries(responseLayouts)) describe(`${name} response`, () => itResponseLayout(layout));

  it('a FETCH may ask for up to 2^31-1 bytes (the broker applies its own limit)', () => {
    const fields = requestLayouts.FETCH!;
    const r = decodeRequest(build(withField(fields, fields.findIndex((f) => f.role === 'maxBytes'), I32.max)));
    expect(r.type === RequestType.Fetch && r.fetch.maxBytes).toBe(I32.max);
  });

  it('int64 values at the edge of the safe range are accepted', () => {
    for (const v of [Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER]) {
      const d = new Decoder(build([i64('v', v)]));
      expect(d.readInt64()).toBe(v);
    }
  });
});

describe('unknown request types', () => {
  it.each([7, 8, 99, 0x7fff, -1, -0x8000])('type %i is UnknownRequestType', (type) => {
    const frame = build([i16('type', type), ...requestLayouts.FETCH!.slice(1)]);
    const err = expectProtocolError(() => decodeRequest(frame), ErrorCode.UnknownRequestType);
    expect(err.message).toContain(String(type));
  });

  it('an empty or one-byte frame is InvalidRequest', () => {
    expectProtocolError(() => decodeRequest(Buffer.alloc(0)), ErrorCode.InvalidRequest);
    expectProtocolError(() => decodeRequest(Buffer.alloc(1)), ErrorCode.InvalidRequest);
    expectProtocolError(() => openFrame(Buffer.alloc(1)), ErrorCode.InvalidRequest);
  });
});

describe('invalid topic names in every request and response that carries one', () => {
  itBadTopicsRefused(requestLayouts, responseLayouts);

  it('a 249-character topic is valid', () => {
    const t = 'x'.repeat(249);
    const r = decodeRequest(unframe(encodeMetadataRequest([t])));
    expect(r.type === RequestType.Metadata && r.topics).toStrictEqual([t]);
  });
});

describe('decoders do not hang on large counts', () => {
  it('a MULTIFETCH claiming 32767 parts with one present fails fast', () => {
    const fields = requestLayouts.MULTIFETCH!;
    const started = Date.now();
    expectProtocolError(() => decodeRequest(build(withField(fields, 1, 0x7fff))), ErrorCode.InvalidRequest);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('an OFFSETS response claiming 2^31-1 offsets fails fast', () => {
    const started = Date.now();
    expectProtocolError(() => decodeOffsetsResponse(new Decoder(build([i32('count', I32.max), i64('o', 0)]))), ErrorCode.InvalidRequest);
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
