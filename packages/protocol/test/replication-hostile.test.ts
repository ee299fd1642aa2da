/**
 * Hostile input to the replication requests and responses (docs/replication.md §6): decoders
 * only ever throw ProtocolError with a meaningful code, never a RangeError or TypeError, and
 * never hang, as test/hostile.test.ts checks for the paper's requests.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  Decoder,
  ErrorCode,
  decodeControlledShutdownResponse,
  decodeLeaderAndIsrResponse,
  decodeOffsetForLeaderEpochResponse,
  decodeReplicaFetchResponse,
  decodeRequest,
  decodeStopReplicaResponse,
  decodeTopicMetadataResponse,
  encodeControlledShutdownRequest,
  encodeControlledShutdownResponse,
  encodeLeaderAndIsrRequest,
  encodeLeaderAndIsrResponse,
  encodeOffsetForLeaderEpochRequest,
  encodeOffsetForLeaderEpochResponse,
  encodeReplicaFetchRequest,
  encodeReplicaFetchResponse,
  encodeStopReplicaRequest,
  encodeStopReplicaResponse,
  encodeTopicMetadataRequest,
  encodeTopicMetadataResponse,
} from '../src/index.js';
import { build, i16, i32, i64, i8, I32, raw, set, str, topic, withField, type Field } from './field-layouts.js';
import { itBadTopicsRefused, itRandomRequestBodies, itRequestLayout, itResponseDecodersOnRandomBytes, itResponseLayout, itStrictPrefixesRefused, type ResponseDecoders, type ResponseLayout } from './hostile-suites.js';
import { expectProtocolError, topicArb, unframe } from './helpers.js';
import {
  controlledShutdownRequestArb,
  controlledShutdownResponseArb,
  leaderAndIsrRequestArb,
  offsetForLeaderEpochRequestArb,
  offsetForLeaderEpochResponseArb,
  partitionErrorsResponseArb,
  replicaFetchRequestArb,
  replicaFetchResponseArb,
  stopReplicaRequestArb,
  topicMetadataResponseArb,
} from './replication-helpers.js';

const responseDecoders: ResponseDecoders = {
  'leader-and-isr': (b, code) => decodeLeaderAndIsrResponse(code, new Decoder(b)),
  'stop-replica': (b, code) => decodeStopReplicaResponse(code, new Decoder(b)),
  'replica-fetch': (b, code) => decodeReplicaFetchResponse(code, new Decoder(b)),
  'offset-for-leader-epoch': (b, code) => decodeOffsetForLeaderEpochResponse(code, new Decoder(b)),
  'controlled-shutdown': (b, code) => decodeControlledShutdownResponse(code, new Decoder(b)),
  'topic-metadata': (b, code) => decodeTopicMetadataResponse(code, new Decoder(b)),
};

const requestBodyArb: fc.Arbitrary<Buffer> = fc.oneof(
  leaderAndIsrRequestArb.map((r) => unframe(encodeLeaderAndIsrRequest(r))),
  stopReplicaRequestArb.map((r) => unframe(encodeStopReplicaRequest(r))),
  replicaFetchRequestArb.map((r) => unframe(encodeReplicaFetchRequest(r))),
  offsetForLeaderEpochRequestArb.map((r) => unframe(encodeOffsetForLeaderEpochRequest(r))),
  controlledShutdownRequestArb.map((r) => unframe(encodeControlledShutdownRequest(r))),
  fc.array(topicArb, { minLength: 1, maxLength: 4 }).map((ts) => unframe(encodeTopicMetadataRequest(ts))),
);

/** Successful response bodies (after the error code), with the name of their decoder. */
const responseBodyArb: fc.Arbitrary<{ body: Buffer; name: string }> = fc.oneof(
  partitionErrorsResponseArb
    .filter((r) => r.errorCode === ErrorCode.None)
    .chain((r) =>
      fc.constantFrom(
        { body: unframe(encodeLeaderAndIsrResponse(r)).subarray(2), name: 'leader-and-isr' },
        { body: unframe(encodeStopReplicaResponse(r)).subarray(2), name: 'stop-replica' },
      ),
    ),
  replicaFetchResponseArb.filter((r) => r.errorCode === ErrorCode.None).map((r) => ({ body: unframe(encodeReplicaFetchResponse(r)).subarray(2), name: 'replica-fetch' })),
  offsetForLeaderEpochResponseArb
    .filter((r) => r.errorCode === ErrorCode.None)
    .map((r) => ({ body: unframe(encodeOffsetForLeaderEpochResponse(r)).subarray(2), name: 'offset-for-leader-epoch' })),
  controlledShutdownResponseArb
    .filter((r) => r.errorCode === ErrorCode.None)
    .map((r) => ({ body: unframe(encodeControlledShutdownResponse(r)).subarray(2), name: 'controlled-shutdown' })),
  topicMetadataResponseArb.filter((r) => r.errorCode === ErrorCode.None).map((r) => ({ body: unframe(encodeTopicMetadataResponse(r)).subarray(2), name: 'topic-metadata' })),
);

describe('random bytes', () => {
  itRandomRequestBodies('decodeRequest only ever throws ProtocolError for a replication type with a random body', 16, 21);

  itResponseDecodersOnRandomBytes(responseDecoders);
});

describe('truncated frames', () => {
  itStrictPrefixesRefused(
    'every strict prefix of a replication request frame is rejected with a ProtocolError',
    requestBodyArb.map((body) => ({ body })),
    (body) => decodeRequest(body),
  );

  itStrictPrefixesRefused('every strict prefix of a replication response body is rejected', responseBodyArb, (body, { name }) => responseDecoders[name]!(body, 0));
});

const partitionStateFields = (t: string): Field[] => [
  ...topic('topic', t),
  ...str('topicId', '5f0c3a9e12b7d604'),
  i32('partition', 0, 'partition'),
  i32('leader', 1, 'leader'),
  i32('leaderEpoch', 3, 'epoch'),
  i32('stateVersion', 7, 'epoch'),
  i16('minInsyncReplicas', 2, 'minIsr'),
  i8('isNew', 0, 'flag'),
  i16('replicaCount', 3, 'count'),
  i32('replica 1', 1, 'brokerId'),
  i32('replica 2', 2, 'brokerId'),
  i32('replica 3', 0, 'brokerId'),
  i16('isrCount', 2, 'count'),
  i32('isr 1', 1, 'brokerId'),
  i32('isr 2', 2, 'brokerId'),
];
const brokerFields = (id: number): Field[] => [i32('brokerId', id, 'brokerId'), ...str('host', '10.0.0.1'), i32('port', 9092, 'port')];
const fetchPartitionFields = (t: string): Field[] => [
  ...topic('topic', t),
  i32('partition', 0, 'partition'),
  i32('leaderEpoch', 3, 'epoch'),
  i64('fetchOffset', 1024, 'offset'),
  i64('flushedOffset', 1024, 'offset'),
  i32('maxBytes', 1048576, 'maxBytes'),
];
const fetchedPartitionFields = (t: string): Field[] => [
  ...topic('topic', t),
  i32('partition', 0, 'partition'),
  i16('errorCode', 0),
  i64('highWatermark', 1024, 'offsetOrNone'),
  i64('logEndOffset', 1039, 'offsetOrNone'),
  i64('logStartOffset', 0, 'offsetOrNone'),
  i32('epoch', 3, 'epochOrNone'),
  i64('segmentStart', 0, 'offsetOrNone'),
  i32('messageSetSize', set.length, 'size'),
  raw('messageSet', set),
];
const partitionErrorFields = (t: string): Field[] => [...topic('topic', t), i32('partition', 0, 'partition'), i16('errorCode', 0)];
const partitionEntryFields = (p: number): Field[] => [
  i32('partition', p, 'partition'),
  i16('errorCode', 0),
  i32('leader', 1, 'leader'),
  i32('leaderEpoch', 3, 'epochOrNone'),
  i16('replicaCount', 2, 'count'),
  i32('replica 1', 1, 'brokerId'),
  i32('replica 2', 2, 'brokerId'),
  i16('isrCount', 1, 'count'),
  i32('isr 1', 1, 'brokerId'),
];

/** Request layouts: `type | body`, as decodeRequest receives them. */
const requestLayouts: Record<string, Field[]> = {
  LEADER_AND_ISR: [
    i16('type', 16),
    i32('controllerId', 1, 'brokerId'),
    i32('controllerEpoch', 4, 'epoch'),
    i16('count', 2, 'count'),
    ...partitionStateFields('events'),
    ...partitionStateFields('clicks'),
    i16('brokerCount', 2, 'count'),
    ...brokerFields(1),
    ...brokerFields(2),
  ],
  STOP_REPLICA: [
    i16('type', 17),
    i32('controllerId', 1, 'brokerId'),
    i32('controllerEpoch', 4, 'epoch'),
    i8('delete', 1, 'flag'),
    i16('count', 2, 'count'),
    ...topic('topic 1', 'events'),
    i32('partition 1', 0, 'partition'),
    i32('leaderEpoch 1', 3, 'epoch'),
    ...topic('topic 2', 'clicks'),
    i32('partition 2', 5, 'partition'),
    i32('leaderEpoch 2', 0, 'epoch'),
  ],
  REPLICA_FETCH: [
    i16('type', 18),
    i32('replicaId', 2, 'brokerId'),
    i32('maxWaitMs', 500, 'maxWaitMs'),
    i16('count', 2, 'count'),
    ...fetchPartitionFields('events'),
    ...fetchPartitionFields('clicks'),
  ],
  OFFSET_FOR_LEADER_EPOCH: [
    i16('type', 19),
    i32('replicaId', 2, 'brokerId'),
    i16('count', 1, 'count'),
    ...topic('topic', 'events'),
    i32('partition', 0, 'partition'),
    i32('currentLeaderEpoch', 3, 'epoch'),
    i32('leaderEpoch', 2, 'epoch'),
  ],
  CONTROLLED_SHUTDOWN: [i16('type', 20), i32('brokerId', 1, 'brokerId'), i64('brokerEpoch', 4294967300, 'offset')],
  TOPIC_METADATA: [i16('type', 21), i16('count', 2, 'count'), ...topic('topic 1', 'events'), ...topic('topic 2', 'clicks')],
};

/** Response body layouts (after the error code), with the decoder for each. */
const responseLayouts: Record<string, ResponseLayout> = {
  LEADER_AND_ISR: {
    fields: [i16('count', 2, 'count'), ...partitionErrorFields('events'), ...partitionErrorFields('clicks')],
    errorCode: ErrorCode.None,
    decode: responseDecoders['leader-and-isr']!,
  },
  STOP_REPLICA: {
    fields: [i16('count', 1, 'count'), ...partitionErrorFields('events')],
    errorCode: ErrorCode.None,
    decode: responseDecoders['stop-replica']!,
  },
  REPLICA_FETCH: {
    fields: [i16('count', 2, 'count'), ...fetchedPartitionFields('events'), ...fetchedPartitionFields('clicks')],
    errorCode: ErrorCode.None,
    decode: responseDecoders['replica-fetch']!,
  },
  OFFSET_FOR_LEADER_EPOCH: {
    fields: [
      i16('count', 1, 'count'),
      ...topic('topic', 'events'),
      i32('partition', 0, 'partition'),
      i16('errorCode', 0),
      i32('leaderEpoch', 2, 'epochOrNone'),
      i64('endOffset', 4096, 'offsetOrNone'),
    ],
    errorCode: ErrorCode.None,
    decode: responseDecoders['offset-for-leader-epoch']!,
  },
  CONTROLLED_SHUTDOWN: {
    fields: [i16('count', 1, 'count'), ...topic('topic', 'events'), i32('partition', 3, 'partition')],
    errorCode: ErrorCode.None,
    decode: responseDecoders['controlled-shutdown']!,
  },
  TOPIC_METADATA: {
    fields: [
      i16('brokerCount', 1, 'count'),
      ...brokerFields(1),
      i16('count', 1, 'count'),
      ...topic('topic', 'events'),
      i16('errorCode', 0),
      i32('partitionCount', 2, 'count32'),
      ...partitionEntryFields(0),
      ...partitionEntryFields(1),
    ],
    errorCode: ErrorCode.None,
    decode: responseDecoders['topic-metadata']!,
  },
};

describe('hostile values in every length, count, size and number field', () => {
  for (const [name, fields] of Object.entries(requestLayouts)) {
    describe(name, () =>
      // Read past its partitions, LEADER_AND_ISR takes its broker list for a topic name.
      itRequestLayout(fields, (what, code) => (name === 'LEADER_AND_ISR' && what === 'count = 32767' ? [ErrorCode.InvalidRequest, ErrorCode.InvalidTopic] : [code])),
    );
  }
  for (const [name, layout] of Object.entries(responseLayouts)) describe(`${name} response`, () => itResponseLayout(layout));

  it('a topic id that is not 16 lowercase hex digits is InvalidRequest', () => {
    const fields = requestLayouts.LEADER_AND_ISR!;
    const at = fields.findIndex((f) => f.name === 'topicId');
    for (const id of ['5F0C3A9E12B7D604', '5f0c3a9e12b7d60x', '../../etc/passwd']) {
      const mutated = fields.map((f, i) => (i === at ? { ...f, value: Buffer.from(id) } : i === at - 1 ? { ...f, value: id.length } : f));
      expectProtocolError(() => decodeRequest(build(mutated)), ErrorCode.InvalidRequest);
    }
  });

  it('an empty broker host is InvalidRequest', () => {
    const fields = requestLayouts.LEADER_AND_ISR!;
    const at = fields.findIndex((f) => f.name === 'host');
    const mutated = fields.map((f, i) => (i === at ? { ...f, value: Buffer.alloc(0) } : i === at - 1 ? { ...f, value: 0 } : f));
    expectProtocolError(() => decodeRequest(build(mutated)), ErrorCode.InvalidRequest);
  });

  it('a count of 0 is InvalidRequest in every request (brokerCount and isrCount excepted)', () => {
    for (const [name, fields] of Object.entries(requestLayouts)) {
      const at = fields.findIndex((f) => f.name === 'count');
      if (name === 'CONTROLLED_SHUTDOWN') continue; // no count
      expect(at, name).toBeGreaterThan(0);
      expectProtocolError(() => decodeRequest(build(withField(fields, at, 0))), ErrorCode.InvalidRequest);
    }
  });
});

describe('invalid topic names in every replication request and response', () => {
  itBadTopicsRefused(requestLayouts, responseLayouts);
});

describe('decoders do not hang on large counts', () => {
  it('a TOPIC_METADATA response claiming 2^31-1 partitions fails fast', () => {
    const { fields, decode } = responseLayouts.TOPIC_METADATA!;
    const at = fields.findIndex((f) => f.name === 'partitionCount');
    const started = Date.now();
    expectProtocolError(() => decode(build(withField(fields, at, I32.max)), 0), ErrorCode.InvalidRequest);
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('a REPLICA_FETCH claiming 32767 partitions with two present fails fast', () => {
    const fields = requestLayouts.REPLICA_FETCH!;
    const started = Date.now();
    expectProtocolError(() => decodeRequest(build(withField(fields, fields.findIndex((f) => f.name === 'count'), 0x7fff))), ErrorCode.InvalidRequest);
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
