/**
 * Produce (docs/kafka-protocol.md): each partition's message set (magic 0 or 1, gzip wrappers
 * inflated) becomes a klog message set (key and timestamp in the metadata header) appended to
 * the same log klog's own producers append to, checked as theirs are. acks 1 answers once
 * appended, acks -1 once flushed (visible), acks 0 not at all.
 */
import { decodeProduceRequest, encodeProduceResponse, KafkaErrorCode, klogMessageSetOfKafka, type KafkaReader, type ProducePartitionResponse } from '@klog/kafka-protocol';
import type { RequestHeader } from '@klog/kafka-protocol';
import { appendMessages } from '../handlers/produce.js';
import type { KafkaContext } from './context.js';
import { kafkaErrorOf, localLog } from './partitions.js';

/** Handles a Produce request. @returns the framed response, or undefined for acks 0 */
export async function handleKafkaProduce(k: KafkaContext, h: RequestHeader, r: KafkaReader): Promise<Buffer | undefined> {
  const req = decodeProduceRequest(r);
  const acks = req.acks;
  const flushes: Promise<void>[] = [];
  const topics = [];
  for (const t of req.topics) {
    const partitions: ProducePartitionResponse[] = [];
    for (const p of t.partitions) {
      if (acks !== 0 && acks !== 1 && acks !== -1) {
        partitions.push({ partition: p.partition, errorCode: KafkaErrorCode.InvalidRequiredAcks, baseOffset: -1 });
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
        if (acks === -1) flushes.push(local.log.flushedThrough(nextOffset));
        partitions.push({ partition: p.partition, errorCode: KafkaErrorCode.None, baseOffset: offset });
      } catch (err) {
        k.broker.logger.warn({ topic: t.name, partition: p.partition, err: (err as Error).message }, 'Kafka produce rejected');
        partitions.push({ partition: p.partition, errorCode: kafkaErrorOf(err), baseOffset: -1 });
      }
    }
    topics.push({ name: t.name, partitions });
  }
  await Promise.all(flushes);
  return acks === 0 ? undefined : encodeProduceResponse(h.correlationId, h.apiVersion, topics);
}
