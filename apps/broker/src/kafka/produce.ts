/**
 * Produce (docs/kafka-protocol.md): each partition's message set (magic 0 or 1, gzip wrappers
 * inflated) becomes a klog message set (key and timestamp in the metadata header, every CRC
 * computed by the conversion) appended to the same log klog's own producers append to, within
 * the same `max.message.bytes`. On a paper topic acks 1 answers once appended, acks -1 once
 * flushed (visible), acks 0 not at all. On a replicated
 * topic the set goes through klog's own replicated produce (docs/replication.md §11): appended
 * by the leader only (NOT_LEADER_FOR_PARTITION elsewhere), acks -1 is klog's `acks all` (refused
 * whole with NOT_ENOUGH_REPLICAS while the ISR is below `min.insync.replicas`, answered once the
 * high watermark reaches the set, NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR fell short
 * meanwhile), acks 1 and 0 answer after the leader's append.
 */
import {
  decodeProduceRequest,
  encodeProduceResponse,
  KafkaErrorCode,
  decodedKlogMessageSetOfKafka,
  klogMessageSetOfKafka,
  plainKlogMessageSetOfKafka,
  type KafkaReader,
  type ProducePartitionResponse,
} from '@klog/kafka-protocol';
import type { RequestHeader } from '@klog/kafka-protocol';
import { AckLevel } from '@klog/protocol';
import { appendBufferFor, appendEncodedMessages, produceReplicated } from '../handlers/produce.js';
import { LaterResponse, type KafkaContext } from './context.js';
import { kafkaErrorOf, kafkaErrorOfCode, localLog, withinPartitionCount } from './partitions.js';

/**
 * `p`, marked handled now: it is awaited only once the rest of the request is done (a flush that
 * fails meanwhile must not be an unhandled rejection); awaiting the result still rejects as `p`.
 */
function handledLater<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}

/**
 * Handles a Produce request: every set appended (or refused) before it returns; with acks 1
 * answered then.
 * @returns the framed response; for acks -1 the response once the sets are flushed (a paper
 *   topic's) and the high watermark has reached them (a replicated topic's), as a
 *   {@link LaterResponse}: the connection handles the next requests meanwhile; undefined for acks 0
 */
export async function handleKafkaProduce(k: KafkaContext, h: RequestHeader, r: KafkaReader): Promise<Buffer | LaterResponse | undefined> {
  const req = decodeProduceRequest(r);
  const acks = req.acks;
  /** Settle once each replicated set is appended (or refused). */
  const replicated: Promise<void>[] = [];
  /** Settle once each set's acks are met: a paper topic's flush, a replicated set's answer. */
  const acked: Promise<void>[] = [];
  const topics: { name: string; partitions: ProducePartitionResponse[] }[] = [];
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
        // Handled now: awaited only once the loop is done (neither rejects today; a bug must not
        // become an unhandled rejection that ends the broker).
        const started = startProduceToReplica(k, t.name, p.partition, p.records, acks === -1);
        replicated.push(handledLater(started.then(({ answer }) => void acked.push(handledLater(answer.then((a) => void (partitions[i] = a)))))));
        continue;
      }
      const local = await localLog(k, t.name, p.partition, true);
      if (local.log === undefined) {
        partitions.push({ partition: p.partition, errorCode: local.errorCode, baseOffset: -1 });
        continue;
      }
      try {
        // Converted into the broker's append buffer and appended with no await between (a buffer
        // per request would be garbage the size of every request).
        let set = plainKlogMessageSetOfKafka(p.records, appendBufferFor(p.records.length));
        set ??= await decodedKlogMessageSetOfKafka(p.records, { maxInnerBytes: k.broker.config.maxRequestBytes });
        const { offset, nextOffset } = appendEncodedMessages(k.broker, local.log, set);
        if (acks === -1) acked.push(handledLater(local.log.flushedThrough(nextOffset)));
        partitions.push({ partition: p.partition, errorCode: KafkaErrorCode.None, baseOffset: offset });
      } catch (err) {
        k.broker.logger.warn({ topic: t.name, partition: p.partition, err: (err as Error).message }, 'Kafka produce rejected');
        partitions.push({ partition: p.partition, errorCode: kafkaErrorOf(err), baseOffset: -1 });
      }
    }
    topics.push({ name: t.name, partitions });
  }
  await Promise.all(replicated); // in this request's turn: a later request's sets land after these
  if (acks === 0) return undefined;
  if (acks !== -1) await Promise.all(acked); // a replicated set's acks 1: met by its append
  if (acks !== -1 || acked.length === 0) return encodeProduceResponse(h.correlationId, h.apiVersion, topics);
  return new LaterResponse(Promise.all(acked).then(() => encodeProduceResponse(h.correlationId, h.apiVersion, topics)));
}

/**
 * One partition's Produce to a replicated topic, through klog's replicated produce (Kafka acks
 * -1 is klog's `acks all`, 1 and 0 klog's acks 1): settles once the set is converted and
 * appended (or refused), with `answer`, which settles once its acks are met. Neither rejects.
 */
async function startProduceToReplica(
  k: KafkaContext,
  topic: string,
  partition: number,
  records: Buffer,
  acksAll: boolean,
): Promise<{ answer: Promise<ProducePartitionResponse> }> {
  const refused = (errorCode: number): { answer: Promise<ProducePartitionResponse> } => ({ answer: Promise.resolve({ partition, errorCode, baseOffset: -1 }) });
  if (!withinPartitionCount(k, topic, partition)) return refused(KafkaErrorCode.UnknownTopicOrPartition);
  let messages: Buffer;
  try {
    messages = await klogMessageSetOfKafka(records, { maxInnerBytes: k.broker.config.maxRequestBytes });
  } catch (err) {
    k.broker.logger.warn({ topic, partition, err: (err as Error).message }, 'Kafka produce rejected');
    return refused(kafkaErrorOf(err));
  }
  // Appended before produceReplicated returns; its promise waits for the acks.
  const answer = produceReplicated(k.broker, { topic, partition, messages }, acksAll ? AckLevel.All : AckLevel.Appended).then((r) => {
    const errorCode = kafkaErrorOfCode(r.errorCode);
    return { partition, errorCode, baseOffset: errorCode === KafkaErrorCode.None ? r.offset : -1 };
  });
  return { answer };
}
