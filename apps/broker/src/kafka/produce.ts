/**
 * Produce (docs/kafka-protocol.md): each partition's message set (magic 0 or 1, gzip wrappers
 * inflated) becomes a klog message set (key and timestamp in the metadata header) appended to
 * the same log klog's own producers append to, checked as theirs are. On a paper topic acks 1
 * answers once appended, acks -1 once flushed (visible), acks 0 not at all. On a replicated
 * topic the set goes through klog's own replicated produce (docs/replication.md §11): appended
 * by the leader only (NOT_LEADER_FOR_PARTITION elsewhere), acks -1 is klog's `acks all` (refused
 * whole with NOT_ENOUGH_REPLICAS while the ISR is below `min.insync.replicas`, answered once the
 * high watermark reaches the set, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR fell short
 * meanwhile), acks 1 and 0 answer after the leader's append.
 */
import { decodeProduceRequest, encodeProduceResponse, KafkaErrorCode, klogMessageSetOfKafka, type KafkaReader, type ProducePartitionResponse } from '@klog/kafka-protocol';
import type { RequestHeader } from '@klog/kafka-protocol';
import { AckLevel } from '@klog/protocol';
import { appendMessages, produceReplicated } from '../handlers/produce.js';
import type { KafkaContext } from './context.js';
import { kafkaErrorOf, kafkaErrorOfCode, localLog, withinPartitionCount } from './partitions.js';

/** Handles a Produce request. @returns the framed response, or undefined for acks 0 */
export async function handleKafkaProduce(k: KafkaContext, h: RequestHeader, r: KafkaReader): Promise<Buffer | undefined> {
  const req = decodeProduceRequest(r);
  const acks = req.acks;
  const waits: Promise<void>[] = [];
  const topics = [];
  for (const t of req.topics) {
    const partitions: ProducePartitionResponse[] = [];
    for (const p of t.partitions) {
      if (acks !== 0 && acks !== 1 && acks !== -1) {
        partitions.push({ partition: p.partition, errorCode: KafkaErrorCode.InvalidRequiredAcks, baseOffset: -1 });
        continue;
      }
      if (k.broker.replicas.isReplicatedTopic(t.name)) {
        const i = partitions.length;
        partitions.push({ partition: p.partition, errorCode: KafkaErrorCode.UnknownServerError, baseOffset: -1 });
        waits.push(produceToReplica(k, t.name, p.partition, p.records, acks === -1).then((answer) => void (partitions[i] = answer)));
        continue;
      }
      const local = await localLog(k, t.name, p.partition, true);
      if (local.log === undefined) {
        partitions.push({ partition: p.partition, errorCode: local.errorCode, baseOffset: -1 });
        continue;
      }
      try {
        const set = await klogMessageSetOfKafka(p.records, { maxInnerBytes: k.broker.config.maxRequestBytes });
        const { offset, nextOffset } = await appendMessages(k.broker, { topic: t.name, partition: local.log.partition, messages: set });
        if (acks === -1) waits.push(local.log.flushedThrough(nextOffset));
        partitions.push({ partition: p.partition, errorCode: KafkaErrorCode.None, baseOffset: offset });
      } catch (err) {
        k.broker.logger.warn({ topic: t.name, partition: p.partition, err: (err as Error).message }, 'Kafka produce rejected');
        partitions.push({ partition: p.partition, errorCode: kafkaErrorOf(err), baseOffset: -1 });
      }
    }
    topics.push({ name: t.name, partitions });
  }
  await Promise.all(waits);
  return acks === 0 ? undefined : encodeProduceResponse(h.correlationId, h.apiVersion, topics);
}

/**
 * One partition's Produce to a replicated topic, through klog's replicated produce (Kafka acks
 * -1 is klog's `acks all`, 1 and 0 klog's acks 1). Never rejects.
 */
async function produceToReplica(k: KafkaContext, topic: string, partition: number, records: Buffer, acksAll: boolean): Promise<ProducePartitionResponse> {
  if (!withinPartitionCount(k, topic, partition)) return { partition, errorCode: KafkaErrorCode.UnknownTopicOrPartition, baseOffset: -1 };
  let messages: Buffer;
  try {
    messages = await klogMessageSetOfKafka(records, { maxInnerBytes: k.broker.config.maxRequestBytes });
  } catch (err) {
    k.broker.logger.warn({ topic, partition, err: (err as Error).message }, 'Kafka produce rejected');
    return { partition, errorCode: kafkaErrorOf(err), baseOffset: -1 };
  }
  const r = await produceReplicated(k.broker, { topic, partition, messages }, acksAll ? AckLevel.All : AckLevel.Appended);
  const errorCode = kafkaErrorOfCode(r.errorCode);
  return { partition, errorCode, baseOffset: errorCode === KafkaErrorCode.None ? r.offset : -1 };
}
