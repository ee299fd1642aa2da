/**
 * fast-check arbitraries for the replication requests and responses (docs/replication.md §6).
 */
import fc from 'fast-check';
import {
  ErrorCode,
  type BrokerAddress,
  type ControlledShutdownRequest,
  type ControlledShutdownResponse,
  type FetchedPartition,
  type LeaderAndIsrRequest,
  type OffsetForLeaderEpochRequest,
  type OffsetForLeaderEpochResponse,
  type PartitionErrorsResponse,
  type PartitionState,
  type ReplicaFetchRequest,
  type ReplicaFetchResponse,
  type StopReplicaRequest,
  type TopicMetadataResponse,
} from '../src/index.js';
import { errorCodeArb, messageSetArb, nonNegInt32Arb, nonZeroErrorCodeArb, offsetArb, partitionArb, topicArb } from './helpers.js';

const plain = { noNullPrototype: true } as const;

export const brokerIdArb = fc.integer({ min: 0, max: 0x7fffffff });
export const epochArb = fc.integer({ min: 0, max: 0x7fffffff });
/** An epoch or offset where −1 means none / unknown. */
const epochOrNoneArb = fc.integer({ min: -1, max: 0x7fffffff });
const offsetOrNoneArb = fc.integer({ min: -1, max: Number.MAX_SAFE_INTEGER });
const brokerIdsArb = (minLength: number) => fc.array(brokerIdArb, { minLength, maxLength: 5 });
export const topicIdArb = fc.stringMatching(/^[0-9a-f]{16}$/);

export const brokerAddressArb: fc.Arbitrary<BrokerAddress> = fc.record(
  {
    brokerId: brokerIdArb,
    host: fc.oneof(fc.constant('127.0.0.1'), fc.string({ minLength: 1, maxLength: 60, unit: 'grapheme' })),
    port: fc.integer({ min: 1, max: 65535 }),
  },
  plain,
);

export const partitionStateArb: fc.Arbitrary<PartitionState> = fc.record(
  {
    topic: topicArb,
    topicId: topicIdArb,
    partition: partitionArb,
    leader: fc.integer({ min: -1, max: 0x7fffffff }),
    leaderEpoch: epochArb,
    stateVersion: nonNegInt32Arb,
    minInsyncReplicas: fc.integer({ min: 1, max: 0x7fff }),
    isNew: fc.boolean(),
    replicas: brokerIdsArb(1),
    isr: brokerIdsArb(0),
  },
  plain,
);

export const leaderAndIsrRequestArb: fc.Arbitrary<LeaderAndIsrRequest> = fc.record(
  {
    controllerId: brokerIdArb,
    controllerEpoch: epochArb,
    partitions: fc.array(partitionStateArb, { minLength: 1, maxLength: 4 }),
    brokers: fc.array(brokerAddressArb, { maxLength: 4 }),
  },
  plain,
);

/** A per-partition error response, or an error-only one. */
export const partitionErrorsResponseArb: fc.Arbitrary<PartitionErrorsResponse> = fc.oneof(
  fc.record(
    {
      errorCode: fc.constant(ErrorCode.None),
      partitions: fc.array(fc.record({ topic: topicArb, partition: partitionArb, errorCode: errorCodeArb }, plain), { maxLength: 4 }),
    },
    plain,
  ),
  nonZeroErrorCodeArb.map((errorCode) => ({ errorCode, partitions: [] })),
);

export const stopReplicaRequestArb: fc.Arbitrary<StopReplicaRequest> = fc.record(
  {
    controllerId: brokerIdArb,
    controllerEpoch: epochArb,
    delete: fc.boolean(),
    partitions: fc.array(fc.record({ topic: topicArb, partition: partitionArb, leaderEpoch: epochArb }, plain), { minLength: 1, maxLength: 4 }),
  },
  plain,
);

export const replicaFetchRequestArb: fc.Arbitrary<ReplicaFetchRequest> = fc.record(
  {
    replicaId: brokerIdArb,
    maxWaitMs: nonNegInt32Arb,
    partitions: fc.array(
      fc.record(
        { topic: topicArb, partition: partitionArb, leaderEpoch: epochArb, fetchOffset: offsetArb, flushedOffset: offsetArb, maxBytes: nonNegInt32Arb },
        plain,
      ),
      { minLength: 1, maxLength: 4 },
    ),
  },
  plain,
);

export const fetchedPartitionArb: fc.Arbitrary<FetchedPartition> = fc.record(
  {
    topic: topicArb,
    partition: partitionArb,
    errorCode: errorCodeArb,
    highWatermark: offsetOrNoneArb,
    logEndOffset: offsetOrNoneArb,
    logStartOffset: offsetOrNoneArb,
    epoch: epochOrNoneArb,
    segmentStart: offsetOrNoneArb,
    messageSet: messageSetArb,
  },
  plain,
);

export const replicaFetchResponseArb: fc.Arbitrary<ReplicaFetchResponse> = fc.oneof(
  fc.record({ errorCode: fc.constant(ErrorCode.None), partitions: fc.array(fetchedPartitionArb, { maxLength: 4 }) }, plain),
  nonZeroErrorCodeArb.map((errorCode) => ({ errorCode, partitions: [] })),
);

export const offsetForLeaderEpochRequestArb: fc.Arbitrary<OffsetForLeaderEpochRequest> = fc.record(
  {
    replicaId: brokerIdArb,
    partitions: fc.array(fc.record({ topic: topicArb, partition: partitionArb, currentLeaderEpoch: epochArb, leaderEpoch: epochArb }, plain), {
      minLength: 1,
      maxLength: 4,
    }),
  },
  plain,
);

export const offsetForLeaderEpochResponseArb: fc.Arbitrary<OffsetForLeaderEpochResponse> = fc.oneof(
  fc.record(
    {
      errorCode: fc.constant(ErrorCode.None),
      partitions: fc.array(
        fc.record({ topic: topicArb, partition: partitionArb, errorCode: errorCodeArb, leaderEpoch: epochOrNoneArb, endOffset: offsetOrNoneArb }, plain),
        { maxLength: 4 },
      ),
    },
    plain,
  ),
  nonZeroErrorCodeArb.map((errorCode) => ({ errorCode, partitions: [] })),
);

export const controlledShutdownRequestArb: fc.Arbitrary<ControlledShutdownRequest> = fc.record(
  { brokerId: brokerIdArb, brokerEpoch: offsetArb },
  plain,
);

export const controlledShutdownResponseArb: fc.Arbitrary<ControlledShutdownResponse> = fc.oneof(
  fc.record(
    { errorCode: fc.constant(ErrorCode.None), remaining: fc.array(fc.record({ topic: topicArb, partition: partitionArb }, plain), { maxLength: 4 }) },
    plain,
  ),
  nonZeroErrorCodeArb.map((errorCode) => ({ errorCode, remaining: [] })),
);

export const topicMetadataResponseArb: fc.Arbitrary<TopicMetadataResponse> = fc.oneof(
  fc.record(
    {
      errorCode: fc.constant(ErrorCode.None),
      brokers: fc.array(brokerAddressArb, { maxLength: 4 }),
      topics: fc.array(
        fc.record(
          {
            topic: topicArb,
            errorCode: errorCodeArb,
            partitions: fc.array(
              fc.record(
                {
                  partition: partitionArb,
                  errorCode: errorCodeArb,
                  leader: fc.integer({ min: -1, max: 0x7fffffff }),
                  leaderEpoch: epochOrNoneArb,
                  replicas: brokerIdsArb(0),
                  isr: brokerIdsArb(0),
                },
                plain,
              ),
              { maxLength: 4 },
            ),
          },
          plain,
        ),
        { maxLength: 3 },
      ),
    },
    plain,
  ),
  nonZeroErrorCodeArb.map((errorCode) => ({ errorCode, brokers: [], topics: [] })),
);
