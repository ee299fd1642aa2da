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
  RequestDecoder,
  defaultMaxRequestBytes,
  encodeErrorResponse,
  encodeFetchErrorResponse,
  encodeFetchRequest,
  encodeFetchResponseHeader,
  encodeMessageSet,
  encodeMetadataRequest,
  encodeMetadataResponse,
  encodeMultiFetchPart,
  encodeMultiFetchRequest,
  encodeMultiFetchResponseHeader,
  encodeMultiProduceRequest,
  encodeOffsetsRequest,
  encodeOffsetsResponse,
  encodeProduceAckRequest,
  encodeProduceAckResponse,
  encodeProduceRequest,
  errorCodeName,
  iterateMessageSet,
  openFrame,
  readFrameSize,
} from '../src/index.js';
import {
  errorCodeArb,
  expectProtocolError,
  fetchArb,
  fetchResponseArb,
  messageSetArb,
  nonZeroErrorCodeArb,
  offsetArb,
  offsetsRequestArb,
  partitionMessagesArb,
  plainFetchArb,
  produceAckRequestArb,
  produceAckResultArb,
  smallPayloadArb,
  topicArb,
  topicMetadataArb,
  unframe,
} from './helpers.js';

/** Decodes a request frame the way a broker does: size prefix, then type and body. */
function decodeFramed(frame: Buffer) {
  expect(readFrameSize(frame, 0, defaultMaxRequestBytes)).toBe(frame.length - 4);
  return decodeRequest(unframe(frame));
}

/** Splits a response frame into its error code and a decoder over its body. */
function openResponse(frame: Buffer): { errorCode: number; body: Decoder } {
  const { head, body } = openFrame(unframe(frame));
  return { errorCode: head, body };
}

describe('request round trips through decodeRequest', () => {
  it('PRODUCE', () => {
    fc.assert(
      fc.property(partitionMessagesArb, (p) => {
        expect(decodeFramed(encodeProduceRequest(p))).toStrictEqual({ type: RequestType.Produce, produce: p });
      }),
    );
  });

  it('PRODUCE with a large message set', () => {
    const messages = encodeMessageSet([Buffer.alloc(512 * 1024, 1), Buffer.alloc(0), Buffer.alloc(600 * 1024, 2)]);
    const r = decodeFramed(encodeProduceRequest({ topic: 'big', partition: 0, messages }));
    expect(r.type === RequestType.Produce && r.produce.messages.equals(messages)).toBe(true);
  });

  it('MULTIPRODUCE', () => {
    fc.assert(
      fc.property(fc.array(partitionMessagesArb, { minLength: 1, maxLength: 5 }), (ps) => {
        expect(decodeFramed(encodeMultiProduceRequest(ps))).toStrictEqual({ type: RequestType.MultiProduce, produces: ps });
      }),
    );
  });

  it('FETCH, with and without maxWaitMs', () => {
    fc.assert(
      fc.property(fetchArb, (f) => {
        const frame = encodeFetchRequest(f);
        const { maxWaitMs, ...plain } = f;
        // A maxWaitMs of 0 means "answer at once", the same as leaving it out, and is not sent.
        const expected = maxWaitMs !== undefined && maxWaitMs > 0 ? { ...plain, maxWaitMs } : plain;
        expect(frame.length).toBe(4 + 2 + 2 + Buffer.byteLength(f.topic) + 16 + (expected === plain ? 0 : 4));
        expect(decodeFramed(frame)).toStrictEqual({ type: RequestType.Fetch, fetch: expected });
      }),
    );
  });

  it('FETCH carrying an explicit maxWaitMs of 0 decodes it', () => {
    const frame = Buffer.concat([encodeFetchRequest({ topic: 't', partition: 0, offset: 0, maxBytes: 10 }), Buffer.alloc(4)]);
    frame.writeInt32BE(frame.length - 4, 0);
    expect(decodeFramed(frame)).toStrictEqual({
      type: RequestType.Fetch,
      fetch: { topic: 't', partition: 0, offset: 0, maxBytes: 10, maxWaitMs: 0 },
    });
  });

  it('MULTIFETCH', () => {
    fc.assert(
      fc.property(fc.array(plainFetchArb, { minLength: 1, maxLength: 8 }), (fs) => {
        expect(decodeFramed(encodeMultiFetchRequest(fs))).toStrictEqual({ type: RequestType.MultiFetch, fetches: fs });
      }),
    );
  });

  it('OFFSETS, including time -1 (latest) and -2 (earliest)', () => {
    fc.assert(
      fc.property(offsetsRequestArb, (r) => {
        expect(decodeFramed(encodeOffsetsRequest(r))).toStrictEqual({ type: RequestType.Offsets, offsets: r });
      }),
    );
  });

  it('PRODUCE_ACK', () => {
    fc.assert(
      fc.property(produceAckRequestArb, (r) => {
        expect(decodeFramed(encodeProduceAckRequest(r))).toStrictEqual({ type: RequestType.ProduceAck, produceAck: r });
      }),
    );
  });

  it('METADATA', () => {
    fc.assert(
      fc.property(fc.array(topicArb, { minLength: 1, maxLength: 10 }), (topics) => {
        expect(decodeFramed(encodeMetadataRequest(topics))).toStrictEqual({ type: RequestType.Metadata, topics });
      }),
    );
  });

  it('returns message sets as views on the frame, not copies', () => {
    const frame = encodeProduceRequest({ topic: 't', partition: 0, messages: encodeMessageSet([Buffer.from('x')]) });
    const body = unframe(frame);
    const r = decodeRequest(body);
    body[body.length - 1] = 0x79;
    expect(r.type === RequestType.Produce && r.produce.messages.subarray(10).toString()).toBe('y');
  });
});

describe('RequestDecoder', () => {
  /** A FETCH frame body naming `topic` as raw bytes (so that invalid names can be sent). */
  function fetchNaming(topic: Buffer): Buffer {
    const good = unframe(encodeFetchRequest({ topic: 't', partition: 3, offset: 7, maxBytes: 100 }));
    const b = Buffer.alloc(good.length - 1 + topic.length);
    b.writeInt16BE(RequestType.Fetch, 0);
    b.writeInt16BE(topic.length, 2);
    topic.copy(b, 4);
    good.copy(b, 4 + topic.length, 5);
    return b;
  }
  const outcome = (f: () => unknown): unknown => {
    try {
      return f();
    } catch (e) {
      return (e as { code?: number }).code;
    }
  };

  it('decodes as decodeRequest does, with its cache, for any sequence of valid and invalid names, each decoder on its own', () => {
    const name = fc.oneof(fc.constantFrom('events', 'clicks', 'a', '..', 'a b', 'tópico', ''), fc.stringMatching(/^[a-z.]{1,5}$/));
    fc.assert(
      fc.property(fc.array(fc.tuple(name, fc.boolean()), { maxLength: 30 }), (steps) => {
        const decoders = [new RequestDecoder(), new RequestDecoder()];
        for (const [topic, second] of steps) {
          const frame = fetchNaming(Buffer.from(topic, 'utf8'));
          expect(outcome(() => decoders[second ? 1 : 0]!.decode(frame))).toStrictEqual(outcome(() => decodeRequest(frame)));
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('encoders refuse invalid topics', () => {
  const bad = ['', '.', '..', 'a/b', 'a'.repeat(250), 'tab\there', 'ü'];
  it.each(bad)('%j', (topic) => {
    const messages = encodeMessageSet([]);
    expectProtocolError(() => encodeProduceRequest({ topic, partition: 0, messages }), ErrorCode.InvalidTopic);
    expectProtocolError(() => encodeMultiProduceRequest([{ topic, partition: 0, messages }]), ErrorCode.InvalidTopic);
    expectProtocolError(() => encodeFetchRequest({ topic, partition: 0, offset: 0, maxBytes: 1 }), ErrorCode.InvalidTopic);
    expectProtocolError(() => encodeMultiFetchRequest([{ topic, partition: 0, offset: 0, maxBytes: 1 }]), ErrorCode.InvalidTopic);
    expectProtocolError(() => encodeOffsetsRequest({ topic, partition: 0, time: -1, maxOffsets: 1 }), ErrorCode.InvalidTopic);
    expectProtocolError(
      () => encodeProduceAckRequest({ acks: 1, partitions: [{ topic, partition: 0, messages }] }),
      ErrorCode.InvalidTopic,
    );
    expectProtocolError(() => encodeMetadataRequest([topic]), ErrorCode.InvalidTopic);
  });
});

describe('response round trips', () => {
  it('FETCH: a message set, header written separately', () => {
    fc.assert(
      fc.property(fc.array(smallPayloadArb, { maxLength: 6 }), offsetArb, (payloads, base) => {
        const set = encodeMessageSet(payloads);
        const frame = Buffer.concat([encodeFetchResponseHeader(set.length), set]);
        const { errorCode, body } = openResponse(frame);
        expect(errorCode).toBe(ErrorCode.None);
        const r = decodeFetchResponse(errorCode, body);
        expect(r).toStrictEqual({ errorCode: ErrorCode.None, messages: set });
        expect([...iterateMessageSet(r.messages, base)].map((m) => m.message.payload)).toStrictEqual(payloads);
      }),
    );
  });

  it('FETCH: a set cut at maxBytes decodes to the cut bytes, and iterates to its whole messages', () => {
    fc.assert(
      fc.property(fc.array(smallPayloadArb, { minLength: 1, maxLength: 6 }), fc.nat(), (payloads, n) => {
        const set = encodeMessageSet(payloads);
        const cut = set.subarray(0, n % (set.length + 1));
        const { errorCode, body } = openResponse(Buffer.concat([encodeFetchResponseHeader(cut.length), cut]));
        const r = decodeFetchResponse(errorCode, body);
        expect(r.messages.equals(cut)).toBe(true);
        const got = [...iterateMessageSet(r.messages)];
        expect(got.map((m) => m.message.payload)).toStrictEqual(payloads.slice(0, got.length));
        expect(got.length === payloads.length).toBe(cut.length === set.length);
      }),
    );
  });

  it('FETCH: OffsetOutOfRange carries earliest and end', () => {
    fc.assert(
      fc.property(offsetArb, offsetArb, (earliest, end) => {
        const { errorCode, body } = openResponse(encodeFetchErrorResponse(ErrorCode.OffsetOutOfRange, { earliest, end }));
        expect(errorCode).toBe(ErrorCode.OffsetOutOfRange);
        expect(decodeFetchResponse(errorCode, body)).toStrictEqual({
          errorCode: ErrorCode.OffsetOutOfRange,
          messages: Buffer.alloc(0),
          earliest,
          end,
        });
      }),
    );
  });

  it('FETCH: any other error has an empty body', () => {
    fc.assert(
      fc.property(nonZeroErrorCodeArb, (code) => {
        const frame = encodeFetchErrorResponse(code);
        expect(frame.length).toBe(6);
        const { errorCode, body } = openResponse(frame);
        expect(errorCode).toBe(code);
        expect(decodeFetchResponse(errorCode, body)).toStrictEqual({ errorCode: code, messages: Buffer.alloc(0) });
      }),
    );
  });

  it('MULTIFETCH: one part per fetch, in order', () => {
    fc.assert(
      fc.property(fc.array(fetchResponseArb, { maxLength: 6 }), (parts) => {
        const partBytes = Buffer.concat(parts.map(encodeMultiFetchPart));
        const frame = Buffer.concat([encodeMultiFetchResponseHeader(partBytes.length), partBytes]);
        const { errorCode, body } = openResponse(frame);
        expect(errorCode).toBe(ErrorCode.None);
        expect(decodeMultiFetchResponse(body)).toStrictEqual(parts);
      }),
    );
  });

  it('MULTIFETCH: every part is itself a size-prefixed fetch response', () => {
    fc.assert(
      fc.property(fetchResponseArb, (part) => {
        const bytes = encodeMultiFetchPart(part);
        const { errorCode, body } = openResponse(bytes);
        expect(decodeFetchResponse(errorCode, body)).toStrictEqual(part);
      }),
    );
  });

  it('OFFSETS', () => {
    fc.assert(
      fc.property(fc.array(fc.maxSafeInteger(), { maxLength: 20 }), (offsets) => {
        const { errorCode, body } = openResponse(encodeOffsetsResponse(offsets));
        expect(errorCode).toBe(ErrorCode.None);
        expect(decodeOffsetsResponse(body)).toStrictEqual(offsets);
      }),
    );
  });

  it('PRODUCE_ACK', () => {
    fc.assert(
      fc.property(fc.array(produceAckResultArb, { maxLength: 6 }), (results) => {
        const { errorCode, body } = openResponse(encodeProduceAckResponse(results));
        expect(errorCode).toBe(ErrorCode.None);
        expect(decodeProduceAckResponse(body)).toStrictEqual(results);
      }),
    );
  });

  it('METADATA', () => {
    fc.assert(
      fc.property(fc.array(topicMetadataArb, { maxLength: 10 }), (topics) => {
        const { errorCode, body } = openResponse(encodeMetadataResponse(topics));
        expect(errorCode).toBe(ErrorCode.None);
        expect(decodeMetadataResponse(body)).toStrictEqual(topics);
      }),
    );
  });

  it('an error-only response is size 2 and the code', () => {
    fc.assert(
      fc.property(errorCodeArb, (code) => {
        const frame = encodeErrorResponse(code);
        expect(frame.length).toBe(6);
        const { errorCode, body } = openResponse(frame);
        expect(errorCode).toBe(code);
        expect(body.remaining).toBe(0);
      }),
    );
  });

  it('response frames can be read with readFrameSize', () => {
    fc.assert(
      fc.property(messageSetArb, (set) => {
        const frame = Buffer.concat([encodeFetchResponseHeader(set.length), set]);
        expect(readFrameSize(frame, 0, defaultMaxRequestBytes)).toBe(set.length + 2);
        expect(readFrameSize(frame.subarray(0, 3), 0, defaultMaxRequestBytes)).toBeUndefined();
      }),
    );
  });
});

describe('error codes', () => {
  it('have the numbers of Kafka 0.7 and klog', () => {
    expect(ErrorCode).toStrictEqual({
      None: 0,
      Unknown: -1,
      OffsetOutOfRange: 1,
      InvalidMessage: 2,
      WrongPartition: 3,
      InvalidFetchSize: 4,
      MessageSizeTooLarge: 5,
      InvalidRequest: 6,
      UnknownRequestType: 7,
      InvalidMessageOffset: 8,
      InvalidTopic: 9,
      UnknownTopic: 10,
      TooManyPartitions: 11,
      DiskFull: 12,
      NotLeaderForPartition: 20,
      LeaderNotAvailable: 21,
      NotEnoughReplicas: 22,
      NotEnoughReplicasAfterAppend: 23,
      FencedLeaderEpoch: 24,
      UnknownLeaderEpoch: 25,
      StaleControllerEpoch: 26,
      NotController: 27,
      ReplicaLost: 28,
      NotReplica: 29,
      NotReplicatedTopic: 30,
      StaleBrokerEpoch: 31,
    });
    expect(RequestType).toStrictEqual({
      Produce: 0,
      Fetch: 1,
      MultiFetch: 2,
      MultiProduce: 3,
      Offsets: 4,
      ProduceAck: 5,
      Metadata: 6,
      LeaderAndIsr: 16,
      StopReplica: 17,
      ReplicaFetch: 18,
      OffsetForLeaderEpoch: 19,
      ControlledShutdown: 20,
      TopicMetadata: 21,
    });
  });

  it('have names, and unknown codes are named as such', () => {
    expect(errorCodeName(1)).toBe('OffsetOutOfRange');
    expect(errorCodeName(-1)).toBe('Unknown');
    expect(errorCodeName(42)).toBe('Unknown(42)');
    expect(errorCodeName(20)).toBe('NotLeaderForPartition');
    expect(errorCodeName(31)).toBe('StaleBrokerEpoch');
  });
});
