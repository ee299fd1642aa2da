/**
 * (klog, replication) TOPIC_METADATA (type 21), client → any broker: where each partition of
 * some replicated topics is led, with its replicas and ISR, for clients without ZooKeeper
 * (docs/replication.md §6.6, §13.1). Unlike METADATA (type 6) it never creates a topic.
 *
 * ```
 * TopicMetadataRequest  => count int16 | count x topic string
 * TopicMetadataResponse => errorCode int16 | brokerCount int16 | brokerCount x (brokerId int32 | host string | port int32)
 *                          | count int16 | count x TopicEntry
 * TopicEntry            => topic string | errorCode int16 | partitionCount int32 | partitionCount x PartitionEntry
 * PartitionEntry        => partition int32 | errorCode int16 | leader int32 | leaderEpoch int32
 *                          | replicaCount int16 | replicaCount x int32 | isrCount int16 | isrCount x int32
 *   request count ≥ 1; response counts ≥ 0; leader −1 (LeaderNotAvailable) when offline; leaderEpoch ≥ −1;
 *   a topic that is not replicated: NotReplicatedTopic and no partitions;
 *   error-only response (errorCode ≠ 0, no body) for a request that did not decode
 * ```
 */
import { type Decoder, validateTopic } from '../codec.js';
import { ErrorCode, ProtocolError, type ErrorCodeValue } from '../errors.js';
import { encodeFrame, RequestType } from '../frame.js';
import { readCount, readPartition } from './produce.js';
import { type BrokerAddress, readBrokerIds, readBrokers, readInt32AtLeast, writeBrokerIds, writeBrokers } from './replica-fields.js';

/** One partition of a replicated topic as the answering broker's metadata cache knows it. */
export interface ReplicatedPartitionMetadata {
  readonly partition: number;
  /** 0, or LeaderNotAvailable when the partition has no leader. */
  readonly errorCode: ErrorCodeValue;
  /** Broker id of the leader, −1 when offline. */
  readonly leader: number;
  /** The partition's leader epoch (−1: unknown). */
  readonly leaderEpoch: number;
  /** The replica list, preferred leader first. */
  readonly replicas: readonly number[];
  /** The ISR, in replica-list order. */
  readonly isr: readonly number[];
}

/** One topic of a TOPIC_METADATA response. */
export interface ReplicatedTopicMetadata {
  readonly topic: string;
  /** 0, or NotReplicatedTopic (a paper topic, or none; then `partitions` is empty). */
  readonly errorCode: ErrorCodeValue;
  /** Partitions `0..N-1`, in order. */
  readonly partitions: readonly ReplicatedPartitionMetadata[];
}

/** A TOPIC_METADATA response. */
export interface TopicMetadataResponse {
  /** 0, or the code of an error-only response (then both lists are empty). */
  readonly errorCode: ErrorCodeValue;
  /** The live brokers. */
  readonly brokers: readonly BrokerAddress[];
  readonly topics: readonly ReplicatedTopicMetadata[];
}

/** Smallest PartitionEntry on the wire: partition, errorCode, leader, leaderEpoch and two empty lists. */
const minPartitionEntryBytes = 4 + 2 + 4 + 4 + 2 + 2;

/** Encodes a framed TOPIC_METADATA request for 1 to 32767 topics. @throws ProtocolError (InvalidTopic) for a bad topic name */
export function encodeTopicMetadataRequest(topics: readonly string[]): Buffer {
  return encodeFrame(RequestType.TopicMetadata, (e) => {
    e.writeInt16(topics.length);
    for (const t of topics) {
      validateTopic(t);
      e.writeString(t);
    }
  });
}

/** Decodes a TOPIC_METADATA body (after the type): the topics asked for. @throws ProtocolError */
export function decodeTopicMetadataRequest(d: Decoder): string[] {
  const count = readCount(d, 'topic-metadata', 1);
  const topics: string[] = [];
  for (let i = 0; i < count; i++) topics.push(d.readTopic());
  d.assertDone('topic-metadata request');
  return topics;
}

/**
 * Encodes a framed TOPIC_METADATA response; an error code other than 0 with no brokers and no
 * topics gives the error-only response.
 * @throws ProtocolError (InvalidTopic) for a bad topic name; RangeError for a list that does not fit its count
 */
export function encodeTopicMetadataResponse(r: TopicMetadataResponse): Buffer {
  if (r.errorCode !== ErrorCode.None && r.brokers.length === 0 && r.topics.length === 0) return encodeFrame(r.errorCode, () => {});
  return encodeFrame(
    r.errorCode,
    (e) => {
      writeBrokers(e, r.brokers);
      e.writeInt16(r.topics.length);
      for (const t of r.topics) {
        validateTopic(t.topic);
        e.writeString(t.topic).writeInt16(t.errorCode).writeInt32(t.partitions.length);
        for (const p of t.partitions) {
          e.writeInt32(p.partition).writeInt16(p.errorCode).writeInt32(p.leader).writeInt32(p.leaderEpoch);
          writeBrokerIds(e, p.replicas);
          writeBrokerIds(e, p.isr);
        }
      }
    },
    256,
  );
}

/** Decodes a TOPIC_METADATA response body given its top-level error code. @throws ProtocolError */
export function decodeTopicMetadataResponse(errorCode: number, d: Decoder): TopicMetadataResponse {
  const code = errorCode as ErrorCodeValue;
  if (code !== ErrorCode.None && d.remaining === 0) return { errorCode: code, brokers: [], topics: [] };
  const brokers = readBrokers(d, 'topic-metadata broker');
  const count = readCount(d, 'topic-metadata response');
  const topics: ReplicatedTopicMetadata[] = [];
  for (let i = 0; i < count; i++) {
    const topic = d.readTopic();
    const topicErrorCode = d.readInt16() as ErrorCodeValue;
    const partitionCount = d.readInt32();
    if (partitionCount < 0 || partitionCount * minPartitionEntryBytes > d.remaining) {
      throw new ProtocolError(ErrorCode.InvalidRequest, `partitionCount ${partitionCount} does not fit in ${d.remaining} bytes`);
    }
    const partitions: ReplicatedPartitionMetadata[] = [];
    for (let j = 0; j < partitionCount; j++) {
      const partition = readPartition(d);
      const partErrorCode = d.readInt16() as ErrorCodeValue;
      const leader = readInt32AtLeast(d, 'leader', -1);
      const leaderEpoch = readInt32AtLeast(d, 'leaderEpoch', -1);
      const replicas = readBrokerIds(d, 'replica', 0);
      const isr = readBrokerIds(d, 'isr', 0);
      partitions.push({ partition, errorCode: partErrorCode, leader, leaderEpoch, replicas, isr });
    }
    topics.push({ topic, errorCode: topicErrorCode, partitions });
  }
  d.assertDone('topic-metadata response');
  return { errorCode: code, brokers, topics };
}
