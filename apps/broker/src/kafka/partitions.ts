/**
 * From a Kafka (topic, partition) to the log this broker serves it from, and klog's errors as
 * Kafka's (docs/kafka-protocol.md, "Partitions"). A paper topic's Kafka partition is one
 * broker's klog partition (numbered as {@link KafkaTopology} says); a replicated topic's Kafka
 * partition `p` is its partition `p`, served by its leader only (docs/replication.md §9.5).
 */
import { ErrorCode, type ErrorCodeValue } from '@klog/protocol';
import { KafkaErrorCode, KafkaProtocolError, type KafkaErrorCodeValue } from '@klog/kafka-protocol';
import { InvalidTopicError, LogOffsetOutOfRangeError, WrongPartitionError, type Log } from '@klog/storage';
import type { Unsubscribe } from '../long-poll.js';
import type { Partition } from '../replication/partition.js';
import type { KafkaContext } from './context.js';

/**
 * A log as Kafka clients are served it: a paper partition's log, or the replica log of a
 * replicated partition with the partition (its role and high watermark).
 */
export interface ServedLog {
  readonly log: Log;
  /** The replicated partition, when the topic is replicated. */
  readonly replica?: Partition;
}

/** A partition's log, or the Kafka error that says why there is none here. */
export type LocalLog =
  | ({ readonly errorCode?: undefined } & ServedLog)
  | { readonly log?: undefined; readonly replica?: undefined; readonly errorCode: KafkaErrorCodeValue };

/**
 * The end of what consumers may read of `served`: the flushed end of a paper partition, the high
 * watermark of a replicated one (docs/replication.md §9.5), a byte offset.
 */
export function visibleEndOf(served: ServedLog): number {
  return served.replica !== undefined ? served.replica.highWatermark : served.log.visibleEnd;
}

/**
 * Subscribes to moves of {@link visibleEndOf} (a flush; for a replicated partition the high
 * watermark moving, or this broker no longer leading it), for long-poll fetches.
 * @returns the functions that unsubscribe
 */
export function onVisibleEndMoved(served: ServedLog, listener: () => void): Unsubscribe[] {
  const replica = served.replica;
  if (replica === undefined) return [served.log.onFlush(() => listener())];
  return [replica.onHighWatermark(() => listener()), replica.onAppend(() => !replica.isLeader && listener())];
}

/**
 * The log of Kafka partition `partition` of `topic` this broker serves to producers and
 * consumers. A standalone broker creates a paper topic nobody has yet when `create` is set and
 * the partition is below `num.partitions`; a replicated topic is never created here.
 * @returns the log, or UnknownTopicOrPartition, NotLeaderForPartition (another broker holds or
 *   leads it) or InvalidTopicException
 */
export async function localLog(k: KafkaContext, topic: string, partition: number, create: boolean): Promise<LocalLog> {
  try {
    if (k.broker.replicas.isReplicatedTopic(topic)) return leaderLog(k, topic, partition);
    const parts = await k.topology.partitions(topic);
    if (parts.length === 0) {
      const creatable = create && !k.topology.clustered && partition >= 0 && partition < k.broker.config.numPartitions;
      if (creatable) return { log: await k.broker.logs.getOrCreateLog(topic, partition) };
      return { errorCode: KafkaErrorCode.UnknownTopicOrPartition };
    }
    const bp = parts[partition];
    if (bp === undefined) return { errorCode: KafkaErrorCode.UnknownTopicOrPartition };
    if (bp.brokerId !== k.topology.self.nodeId) return { errorCode: KafkaErrorCode.NotLeaderForPartition };
    return { log: await k.broker.logs.getOrCreateLog(topic, bp.partition) };
  } catch (err) {
    return { errorCode: kafkaErrorOf(err) };
  }
}

/**
 * A replicated partition's replica log when this broker leads it; NotLeaderForPartition when it
 * does not (a follower, no replica here, fenced, or still taking its role), UnknownTopicOrPartition
 * for a partition past the topic's count.
 */
function leaderLog(k: KafkaContext, topic: string, partition: number): LocalLog {
  if (!withinPartitionCount(k, topic, partition)) return { errorCode: KafkaErrorCode.UnknownTopicOrPartition };
  const replica = k.broker.replicas.get(topic, partition);
  const log = replica?.log;
  if (replica === undefined || !replica.isLeader || log === undefined) return { errorCode: KafkaErrorCode.NotLeaderForPartition };
  return { log, replica };
}

/**
 * False for a partition past a replicated topic's count (`0..N-1`) as the metadata cache last saw
 * it; true otherwise (also while the cache has not seen the topic yet: its leader decides).
 */
export function withinPartitionCount(k: KafkaContext, topic: string, partition: number): boolean {
  const count = k.broker.metadataCache?.partitionCount(topic);
  return count === undefined || (partition >= 0 && partition < count);
}

/**
 * The replica of a replicated partition this broker holds, leader or follower, as far as every
 * replica agrees on it: up to its high watermark (docs/replication.md §1, byte-identical
 * replicas); undefined when it holds none.
 */
export function heldReplica(k: KafkaContext, topic: string, partition: number): ServedLog | undefined {
  const replica = k.broker.replicas.get(topic, partition);
  const log = replica?.log;
  return replica === undefined || log === undefined ? undefined : { log, replica };
}

/** The Kafka error code of a klog wire error code (docs/format.md §13, docs/replication.md §7). */
export function kafkaErrorOfCode(code: ErrorCodeValue): KafkaErrorCodeValue {
  switch (code) {
    case ErrorCode.None:
      return KafkaErrorCode.None;
    case ErrorCode.MessageSizeTooLarge:
      return KafkaErrorCode.MessageTooLarge;
    case ErrorCode.InvalidMessage:
      return KafkaErrorCode.CorruptMessage;
    case ErrorCode.InvalidTopic:
      return KafkaErrorCode.InvalidTopicException;
    case ErrorCode.WrongPartition:
    case ErrorCode.UnknownTopic:
      return KafkaErrorCode.UnknownTopicOrPartition;
    case ErrorCode.OffsetOutOfRange:
      return KafkaErrorCode.OffsetOutOfRange;
    case ErrorCode.NotLeaderForPartition:
      return KafkaErrorCode.NotLeaderForPartition;
    case ErrorCode.LeaderNotAvailable:
      return KafkaErrorCode.LeaderNotAvailable;
    case ErrorCode.NotEnoughReplicas:
      return KafkaErrorCode.NotEnoughReplicas;
    case ErrorCode.NotEnoughReplicasAfterAppend:
      return KafkaErrorCode.NotEnoughReplicasAfterAppend;
    default:
      return KafkaErrorCode.UnknownServerError;
  }
}

/** The Kafka error code of an error thrown by klog's protocol, storage or ZooKeeper layers. */
export function kafkaErrorOf(err: unknown): KafkaErrorCodeValue {
  if (err instanceof KafkaProtocolError) return err.code;
  if (err instanceof InvalidTopicError) return KafkaErrorCode.InvalidTopicException;
  if (err instanceof WrongPartitionError) return KafkaErrorCode.UnknownTopicOrPartition;
  if (err instanceof LogOffsetOutOfRangeError) return KafkaErrorCode.OffsetOutOfRange;
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'number' && code !== 0 ? kafkaErrorOfCode(code as ErrorCodeValue) : KafkaErrorCode.UnknownServerError;
}
