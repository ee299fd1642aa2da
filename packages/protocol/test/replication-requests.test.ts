/**
 * Round trips of the replication requests and responses (docs/replication.md §6): every encoder
 * is undone by its decoder, through decodeRequest for requests and through the response frame's
 * error code for responses.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  AckLevel,
  Decoder,
  ErrorCode,
  RequestDecoder,
  RequestType,
  decodeControlledShutdownResponse,
  decodeLeaderAndIsrResponse,
  decodeOffsetForLeaderEpochResponse,
  decodeReplicaFetchResponse,
  decodeRequest,
  decodeStopReplicaResponse,
  decodeTopicMetadataResponse,
  encodeControlledShutdownRequest,
  encodeControlledShutdownResponse,
  encodeFetchedPartitionHeader,
  encodeLeaderAndIsrRequest,
  encodeLeaderAndIsrResponse,
  encodeOffsetForLeaderEpochRequest,
  encodeOffsetForLeaderEpochResponse,
  encodeProduceAckRequest,
  encodeReplicaFetchRequest,
  encodeReplicaFetchResponse,
  encodeReplicaFetchResponseHeader,
  encodeStopReplicaRequest,
  encodeStopReplicaResponse,
  encodeTopicMetadataRequest,
  encodeTopicMetadataResponse,
  fetchedPartitionHeaderBytes,
  openFrame,
  readFrameSize,
  validateTopicId,
  type AckLevelValue,
  type FetchedPartition,
} from '../src/index.js';
import { expectProtocolError, topicArb, unframe } from './helpers.js';
import {
  controlledShutdownRequestArb,
  controlledShutdownResponseArb,
  fetchedPartitionArb,
  leaderAndIsrRequestArb,
  offsetForLeaderEpochRequestArb,
  offsetForLeaderEpochResponseArb,
  partitionErrorsResponseArb,
  replicaFetchRequestArb,
  replicaFetchResponseArb,
  stopReplicaRequestArb,
  topicMetadataResponseArb,
} from './replication-helpers.js';

/** Decodes a response frame (size prefix included) with `decode`, after checking the size prefix. */
function decodeResponseFrame<T>(frame: Buffer, decode: (errorCode: number, d: Decoder) => T): T {
  const { head, body } = openFrame(unframe(frame));
  return decode(head, body);
}

describe('replication requests round-trip through decodeRequest', () => {
  it('LEADER_AND_ISR', () => {
    fc.assert(
      fc.property(leaderAndIsrRequestArb, (r) => {
        expect(decodeRequest(unframe(encodeLeaderAndIsrRequest(r)))).toStrictEqual({ type: RequestType.LeaderAndIsr, leaderAndIsr: r });
      }),
    );
  });

  it('STOP_REPLICA', () => {
    fc.assert(
      fc.property(stopReplicaRequestArb, (r) => {
        expect(decodeRequest(unframe(encodeStopReplicaRequest(r)))).toStrictEqual({ type: RequestType.StopReplica, stopReplica: r });
      }),
    );
  });

  it('REPLICA_FETCH', () => {
    fc.assert(
      fc.property(replicaFetchRequestArb, (r) => {
        expect(decodeRequest(unframe(encodeReplicaFetchRequest(r)))).toStrictEqual({ type: RequestType.ReplicaFetch, replicaFetch: r });
      }),
    );
  });

  it('OFFSET_FOR_LEADER_EPOCH', () => {
    fc.assert(
      fc.property(offsetForLeaderEpochRequestArb, (r) => {
        expect(decodeRequest(unframe(encodeOffsetForLeaderEpochRequest(r)))).toStrictEqual({
          type: RequestType.OffsetForLeaderEpoch,
          offsetForLeaderEpoch: r,
        });
      }),
    );
  });

  it('CONTROLLED_SHUTDOWN', () => {
    fc.assert(
      fc.property(controlledShutdownRequestArb, (r) => {
        expect(decodeRequest(unframe(encodeControlledShutdownRequest(r)))).toStrictEqual({
          type: RequestType.ControlledShutdown,
          controlledShutdown: r,
        });
      }),
    );
  });

  it('TOPIC_METADATA', () => {
    fc.assert(
      fc.property(fc.array(topicArb, { minLength: 1, maxLength: 4 }), (topics) => {
        expect(decodeRequest(unframe(encodeTopicMetadataRequest(topics)))).toStrictEqual({ type: RequestType.TopicMetadata, topics });
      }),
    );
  });

  it('decode the same through a connection RequestDecoder, request after request', () => {
    const decoder = new RequestDecoder();
    fc.assert(
      fc.property(replicaFetchRequestArb, (r) => {
        const frame = unframe(encodeReplicaFetchRequest(r));
        expect(decoder.decode(frame)).toStrictEqual(decodeRequest(frame));
        expect(decoder.decode(frame)).toStrictEqual({ type: RequestType.ReplicaFetch, replicaFetch: r });
      }),
    );
  });
});

describe('replication responses round-trip', () => {
  it('LEADER_AND_ISR and STOP_REPLICA: per partition, or error-only', () => {
    fc.assert(
      fc.property(partitionErrorsResponseArb, (r) => {
        expect(decodeResponseFrame(encodeLeaderAndIsrResponse(r), decodeLeaderAndIsrResponse)).toStrictEqual(r);
        expect(decodeResponseFrame(encodeStopReplicaResponse(r), decodeStopReplicaResponse)).toStrictEqual(r);
      }),
    );
  });

  it('an error-only LEADER_AND_ISR response is the 6-byte error frame', () => {
    const frame = encodeLeaderAndIsrResponse({ errorCode: ErrorCode.StaleControllerEpoch, partitions: [] });
    expect(frame.toString('hex')).toBe('00000002001a');
  });

  it('REPLICA_FETCH', () => {
    fc.assert(
      fc.property(replicaFetchResponseArb, (r) => {
        expect(decodeResponseFrame(encodeReplicaFetchResponse(r), decodeReplicaFetchResponse)).toStrictEqual(r);
      }),
    );
  });

  it('REPLICA_FETCH sent as head, then a header and its message set per partition, is the whole response', () => {
    fc.assert(
      fc.property(fc.array(fetchedPartitionArb, { minLength: 0, maxLength: 4 }), (partitions: FetchedPartition[]) => {
        const parts: Buffer[] = [];
        for (const p of partitions) {
          const header = encodeFetchedPartitionHeader(p, p.messageSet.length);
          expect(header.length).toBe(fetchedPartitionHeaderBytes(p.topic));
          parts.push(header, p.messageSet);
        }
        const partsBytes = parts.reduce((n, b) => n + b.length, 0);
        const frame = Buffer.concat([encodeReplicaFetchResponseHeader(partitions.length, partsBytes), ...parts]);
        expect(frame.equals(encodeReplicaFetchResponse({ errorCode: ErrorCode.None, partitions }))).toBe(true);
        expect(readFrameSize(frame, 0, frame.length)).toBe(frame.length - 4);
      }),
    );
  });

  it('OFFSET_FOR_LEADER_EPOCH', () => {
    fc.assert(
      fc.property(offsetForLeaderEpochResponseArb, (r) => {
        expect(decodeResponseFrame(encodeOffsetForLeaderEpochResponse(r), decodeOffsetForLeaderEpochResponse)).toStrictEqual(r);
      }),
    );
  });

  it('CONTROLLED_SHUTDOWN', () => {
    fc.assert(
      fc.property(controlledShutdownResponseArb, (r) => {
        expect(decodeResponseFrame(encodeControlledShutdownResponse(r), decodeControlledShutdownResponse)).toStrictEqual(r);
      }),
    );
  });

  it('TOPIC_METADATA', () => {
    fc.assert(
      fc.property(topicMetadataResponseArb, (r) => {
        expect(decodeResponseFrame(encodeTopicMetadataResponse(r), decodeTopicMetadataResponse)).toStrictEqual(r);
      }),
    );
  });
});

describe('encoders refuse what the layouts cannot carry', () => {
  it('a topic id that is not 16 lowercase hex digits', () => {
    for (const id of ['', '5f0c3a9e12b7d60', '5F0C3A9E12B7D604', '5f0c3a9e12b7d604a', 'zf0c3a9e12b7d604']) {
      expect(() => validateTopicId(id)).toThrow(RangeError);
    }
    expect(() => validateTopicId('5f0c3a9e12b7d604')).not.toThrow();
  });

  it('a PRODUCE_ACK acks other than 1, 2 or -1', () => {
    const partitions = [{ topic: 'events', partition: 0, messages: Buffer.alloc(0) }];
    for (const acks of [0, 3, -2]) expect(() => encodeProduceAckRequest({ acks: acks as AckLevelValue, partitions })).toThrow(RangeError);
    const r = decodeRequest(unframe(encodeProduceAckRequest({ acks: AckLevel.All, partitions })));
    expect(r.type === RequestType.ProduceAck && r.produceAck.acks).toBe(-1);
  });

  it('an invalid topic name', () => {
    expectProtocolError(() => encodeTopicMetadataRequest(['a/b']), ErrorCode.InvalidTopic);
    expectProtocolError(() => encodeFetchedPartitionHeader({
      topic: '..', partition: 0, errorCode: 0, highWatermark: 0, logEndOffset: 0, logStartOffset: 0, epoch: 0, segmentStart: 0,
    }, 0), ErrorCode.InvalidTopic);
  });
});
