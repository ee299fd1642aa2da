/**
 * Golden bytes: every fixture in fixtures/ was written by hand from the layouts in
 * docs/format.md. Each test decodes the fixture and checks the encoder reproduces it byte for
 * byte, so a change of format fails here.
 */
import { describe, expect, it } from 'vitest';
import {
  ErrorCode,
  RequestType,
  decodeFetchResponse,
  decodeMessageAt,
  decodeMetadataResponse,
  decodeMultiFetchResponse,
  decodeOffsetsResponse,
  decodeProduceAckResponse,
  decodeReplicaFetchResponse,
  decodeRequest,
  encodeErrorResponse,
  encodeFetchErrorResponse,
  encodeFetchRequest,
  encodeFetchResponseHeader,
  encodeFetchedPartitionHeader,
  encodeLeaderAndIsrRequest,
  encodeReplicaFetchRequest,
  encodeReplicaFetchResponse,
  encodeReplicaFetchResponseHeader,
  encodeMessage,
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
  iterateMessageSet,
  openFrame,
  scanMessageSet,
  type FetchResponse,
  type Request,
} from '../src/index.js';
import { loadHex } from './helpers.js';

const hello = loadHex('message-hello.hex');
const set3 = loadHex('message-set-3.hex');
const msgA = encodeMessage(Buffer.from('a'));
const msgAbc = encodeMessage(Buffer.from('abc'));

/** The decoded form of a response frame: its error code and the decoder's result. */
function decodeResponse<T>(frame: Buffer, decodeBody: (code: number, body: ReturnType<typeof openFrame>['body']) => T) {
  expect(frame.readInt32BE(0)).toBe(frame.length - 4);
  const { head, body } = openFrame(frame.subarray(4));
  return { errorCode: head, value: decodeBody(head, body) };
}

function decodeRequestFrame(frame: Buffer): Request {
  expect(frame.readInt32BE(0)).toBe(frame.length - 4);
  return decodeRequest(frame.subarray(4));
}

function expectBytes(actual: Buffer, expected: Buffer): void {
  expect(actual.toString('hex')).toBe(expected.toString('hex'));
}

describe('golden messages', () => {
  it('message-hello.hex', () => {
    expect(hello.length).toBe(15);
    expectBytes(encodeMessage(Buffer.from('hello')), hello);
    const m = decodeMessageAt(hello);
    expect(m).toStrictEqual({ magic: 1, attributes: 0, crc: 0x3610a686, payload: Buffer.from('hello') });
  });

  it('message-set-3.hex', () => {
    const payloads = ['a', 'abc', ''].map((s) => Buffer.from(s));
    expectBytes(encodeMessageSet(payloads), set3);
    const items = [...iterateMessageSet(set3)];
    expect(items.map((i) => [i.offset, i.nextOffset, i.message.payload.toString(), i.message.crc])).toStrictEqual([
      [0, 11, 'a', 0xe8b7be43],
      [11, 24, 'abc', 0x352441c2],
      [24, 34, '', 0],
    ]);
    expect(scanMessageSet(set3)).toStrictEqual({ count: 3, validBytes: 34, partial: false, tooLarge: false });
  });
});

describe('golden requests', () => {
  it('produce-request.hex', () => {
    const bytes = loadHex('produce-request.hex');
    const req = { topic: 'events', partition: 0, messages: hello };
    expectBytes(encodeProduceRequest(req), bytes);
    expect(decodeRequestFrame(bytes)).toStrictEqual({ type: RequestType.Produce, produce: req });
  });

  it('multiproduce-request.hex', () => {
    const bytes = loadHex('multiproduce-request.hex');
    const reqs = [
      { topic: 'events', partition: 0, messages: msgA },
      { topic: 'clicks', partition: 3, messages: msgAbc },
    ];
    expectBytes(encodeMultiProduceRequest(reqs), bytes);
    expect(decodeRequestFrame(bytes)).toStrictEqual({ type: RequestType.MultiProduce, produces: reqs });
  });

  it('fetch-request.hex', () => {
    const bytes = loadHex('fetch-request.hex');
    const req = { topic: 'events', partition: 1, offset: 24, maxBytes: 1048576 };
    expectBytes(encodeFetchRequest(req), bytes);
    expectBytes(encodeFetchRequest({ ...req, maxWaitMs: 0 }), bytes);
    expect(decodeRequestFrame(bytes)).toStrictEqual({ type: RequestType.Fetch, fetch: req });
  });

  it('fetch-request-long-poll.hex', () => {
    const bytes = loadHex('fetch-request-long-poll.hex');
    const req = { topic: 'events', partition: 1, offset: 24, maxBytes: 1048576, maxWaitMs: 500 };
    expectBytes(encodeFetchRequest(req), bytes);
    expect(decodeRequestFrame(bytes)).toStrictEqual({ type: RequestType.Fetch, fetch: req });
  });

  it('multifetch-request.hex', () => {
    const bytes = loadHex('multifetch-request.hex');
    const reqs = [
      { topic: 'events', partition: 0, offset: 0, maxBytes: 65536 },
      { topic: 'clicks', partition: 3, offset: 34, maxBytes: 300 },
    ];
    expectBytes(encodeMultiFetchRequest(reqs), bytes);
    expect(decodeRequestFrame(bytes)).toStrictEqual({ type: RequestType.MultiFetch, fetches: reqs });
  });

  it('offsets-request.hex', () => {
    const bytes = loadHex('offsets-request.hex');
    const req = { topic: 'events', partition: 2, time: 1700000000000, maxOffsets: 10 };
    expectBytes(encodeOffsetsRequest(req), bytes);
    expect(decodeRequestFrame(bytes)).toStrictEqual({ type: RequestType.Offsets, offsets: req });
  });

  it('produce-ack-request.hex', () => {
    const bytes = loadHex('produce-ack-request.hex');
    const req = { acks: 2 as const, partitions: [{ topic: 'events', partition: 0, messages: hello }] };
    expectBytes(encodeProduceAckRequest(req), bytes);
    expect(decodeRequestFrame(bytes)).toStrictEqual({ type: RequestType.ProduceAck, produceAck: req });
  });

  it('metadata-request.hex', () => {
    const bytes = loadHex('metadata-request.hex');
    expectBytes(encodeMetadataRequest(['events', 'clicks']), bytes);
    expect(decodeRequestFrame(bytes)).toStrictEqual({ type: RequestType.Metadata, topics: ['events', 'clicks'] });
  });

  it('metadata-request-list.hex', () => {
    const bytes = loadHex('metadata-request-list.hex');
    expectBytes(encodeMetadataRequest([]), bytes);
    expect(decodeRequestFrame(bytes)).toStrictEqual({ type: RequestType.Metadata, topics: [] });
  });
});

describe('golden responses', () => {
  it('fetch-response.hex', () => {
    const bytes = loadHex('fetch-response.hex');
    expectBytes(Buffer.concat([encodeFetchResponseHeader(set3.length), set3]), bytes);
    const r = decodeResponse(bytes, decodeFetchResponse);
    expect(r).toStrictEqual({ errorCode: ErrorCode.None, value: { errorCode: ErrorCode.None, messages: set3 } });
  });

  it('fetch-response-offset-out-of-range.hex', () => {
    const bytes = loadHex('fetch-response-offset-out-of-range.hex');
    expectBytes(encodeFetchErrorResponse(ErrorCode.OffsetOutOfRange, { earliest: 536870912, end: 536870946 }), bytes);
    expect(decodeResponse(bytes, decodeFetchResponse)).toStrictEqual({
      errorCode: ErrorCode.OffsetOutOfRange,
      value: { errorCode: ErrorCode.OffsetOutOfRange, messages: Buffer.alloc(0), earliest: 536870912, end: 536870946 },
    });
  });

  it('fetch-response-wrong-partition.hex', () => {
    const bytes = loadHex('fetch-response-wrong-partition.hex');
    expectBytes(encodeFetchErrorResponse(ErrorCode.WrongPartition), bytes);
    expect(decodeResponse(bytes, decodeFetchResponse)).toStrictEqual({
      errorCode: ErrorCode.WrongPartition,
      value: { errorCode: ErrorCode.WrongPartition, messages: Buffer.alloc(0) },
    });
  });

  it('error-response.hex', () => {
    const bytes = loadHex('error-response.hex');
    expectBytes(encodeErrorResponse(ErrorCode.UnknownRequestType), bytes);
    expect(decodeResponse(bytes, (_, body) => body.remaining)).toStrictEqual({ errorCode: ErrorCode.UnknownRequestType, value: 0 });
  });

  it('multifetch-response.hex', () => {
    const bytes = loadHex('multifetch-response.hex');
    const parts: FetchResponse[] = [
      { errorCode: ErrorCode.None, messages: hello },
      { errorCode: ErrorCode.OffsetOutOfRange, messages: Buffer.alloc(0), earliest: 0, end: 34 },
    ];
    const partBytes = Buffer.concat(parts.map(encodeMultiFetchPart));
    expectBytes(Buffer.concat([encodeMultiFetchResponseHeader(partBytes.length), partBytes]), bytes);
    expect(decodeResponse(bytes, (_, body) => decodeMultiFetchResponse(body))).toStrictEqual({ errorCode: ErrorCode.None, value: parts });
  });

  it('offsets-response.hex', () => {
    const bytes = loadHex('offsets-response.hex');
    const offsets = [1073741824, 536870912, 0];
    expectBytes(encodeOffsetsResponse(offsets), bytes);
    expect(decodeResponse(bytes, (_, body) => decodeOffsetsResponse(body))).toStrictEqual({ errorCode: ErrorCode.None, value: offsets });
  });

  it('produce-ack-response.hex', () => {
    const bytes = loadHex('produce-ack-response.hex');
    const results = [
      { topic: 'events', partition: 0, errorCode: ErrorCode.None, offset: 34, nextOffset: 49 },
      { topic: 'clicks', partition: 7, errorCode: ErrorCode.WrongPartition, offset: -1, nextOffset: -1 },
    ];
    expectBytes(encodeProduceAckResponse(results), bytes);
    expect(decodeResponse(bytes, (_, body) => decodeProduceAckResponse(body))).toStrictEqual({ errorCode: ErrorCode.None, value: results });
  });

  it('metadata-response.hex', () => {
    const bytes = loadHex('metadata-response.hex');
    const topics = [
      { topic: 'events', errorCode: ErrorCode.None, partitions: 4 },
      { topic: 'clicks', errorCode: ErrorCode.None, partitions: 1 },
    ];
    expectBytes(encodeMetadataResponse(topics), bytes);
    expect(decodeResponse(bytes, (_, body) => decodeMetadataResponse(body))).toStrictEqual({ errorCode: ErrorCode.None, value: topics });
  });
});

describe('golden replication requests (docs/replication.md §6)', () => {
  it('leader-and-isr-request.hex (§6.1)', () => {
    const bytes = loadHex('leader-and-isr-request.hex');
    expect(bytes.length).toBe(105);
    const req = {
      controllerId: 1,
      controllerEpoch: 4,
      partitions: [
        {
          topic: 'events',
          topicId: '5f0c3a9e12b7d604',
          partition: 0,
          leader: 1,
          leaderEpoch: 3,
          stateVersion: 7,
          minInsyncReplicas: 2,
          isNew: false,
          replicas: [1, 2, 0],
          isr: [1, 2],
        },
      ],
      brokers: [{ brokerId: 1, host: '10.0.0.1', port: 9092 }],
    };
    expectBytes(encodeLeaderAndIsrRequest(req), bytes);
    expect(decodeRequestFrame(bytes)).toStrictEqual({ type: RequestType.LeaderAndIsr, leaderAndIsr: req });
  });

  it('replica-fetch-request.hex (§6.3)', () => {
    const bytes = loadHex('replica-fetch-request.hex');
    expect(bytes.length).toBe(52);
    const req = {
      replicaId: 2,
      maxWaitMs: 500,
      partitions: [{ topic: 'events', partition: 0, leaderEpoch: 3, fetchOffset: 1024, flushedOffset: 1024, maxBytes: 1048576 }],
    };
    expectBytes(encodeReplicaFetchRequest(req), bytes);
    expect(decodeRequestFrame(bytes)).toStrictEqual({ type: RequestType.ReplicaFetch, replicaFetch: req });
  });

  it('replica-fetch-response.hex (§6.3), whole and as head, partition header and message set sent apart', () => {
    const bytes = loadHex('replica-fetch-response.hex');
    expect(bytes.length).toBe(77);
    const header = {
      topic: 'events',
      partition: 0,
      errorCode: ErrorCode.None,
      highWatermark: 1024,
      logEndOffset: 1039,
      logStartOffset: 0,
      epoch: 3,
      segmentStart: 0,
    };
    const response = { errorCode: ErrorCode.None, partitions: [{ ...header, messageSet: hello }] };
    expectBytes(encodeReplicaFetchResponse(response), bytes);
    const partHeader = encodeFetchedPartitionHeader(header, hello.length);
    expectBytes(Buffer.concat([encodeReplicaFetchResponseHeader(1, partHeader.length + hello.length), partHeader, hello]), bytes);
    expect(decodeResponse(bytes, decodeReplicaFetchResponse)).toStrictEqual({ errorCode: ErrorCode.None, value: response });
  });
});
