/** From a Kafka (topic, partition) to this broker's log of it, and klog's errors as Kafka's. */
import { ErrorCode } from '@klog/protocol';
import { KafkaErrorCode, KafkaProtocolError, type KafkaErrorCodeValue } from '@klog/kafka-protocol';
import { InvalidTopicError, LogOffsetOutOfRangeError, WrongPartitionError, type Log } from '@klog/storage';
import type { KafkaContext } from './context.js';

/** A partition's log, or the Kafka error that says why there is none here. */
export type LocalLog = { readonly log: Log; readonly errorCode?: undefined } | { readonly log?: undefined; readonly errorCode: KafkaErrorCodeValue };

/**
 * This broker's log of Kafka partition `partition` of `topic`. A standalone broker creates a
 * topic nobody has yet when `create` is set and the partition is below `num.partitions`.
 * @returns the log, or UnknownTopicOrPartition, NotLeaderForPartition (another broker holds it)
 *   or InvalidTopicException
 */
export async function localLog(k: KafkaContext, topic: string, partition: number, create: boolean): Promise<LocalLog> {
  try {
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

/** The Kafka error code of an error thrown by klog's protocol, storage or ZooKeeper layers. */
export function kafkaErrorOf(err: unknown): KafkaErrorCodeValue {
  if (err instanceof KafkaProtocolError) return err.code;
  if (err instanceof InvalidTopicError) return KafkaErrorCode.InvalidTopicException;
  if (err instanceof WrongPartitionError) return KafkaErrorCode.UnknownTopicOrPartition;
  if (err instanceof LogOffsetOutOfRangeError) return KafkaErrorCode.OffsetOutOfRange;
  const code = (err as { code?: unknown } | undefined)?.code;
  if (code === ErrorCode.MessageSizeTooLarge) return KafkaErrorCode.MessageTooLarge;
  if (code === ErrorCode.InvalidMessage) return KafkaErrorCode.CorruptMessage;
  if (code === ErrorCode.InvalidTopic) return KafkaErrorCode.InvalidTopicException;
  if (code === ErrorCode.WrongPartition || code === ErrorCode.UnknownTopic) return KafkaErrorCode.UnknownTopicOrPartition;
  return KafkaErrorCode.UnknownServerError;
}
