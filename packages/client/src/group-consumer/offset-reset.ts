/**
 * The reset policy (`auto.offset.reset`, docs/design.md §4): where a consumer starts a partition
 * that has no valid committed offset, and where it goes after OffsetOutOfRange. `smallest` is
 * the partition's earliest offset, `largest` its log end. The one place that turns the policy
 * into an offset.
 */
import type { Logger } from '@klog/logger';
import type { BrokerInfo } from '@klog/zk-registry';
import { SimpleConsumer } from '../simple-consumer.js';
import type { PartitionTopicInfo } from './message-stream.js';

/** The policies, as Kafka 0.7's `autooffset.reset` names them. */
export const offsetResetPolicies = ['smallest', 'largest'] as const;

/** Where a partition without a valid committed offset starts: its earliest offset (`smallest`) or its log end (`largest`). */
export type OffsetReset = (typeof offsetResetPolicies)[number];

/**
 * Checks a policy given as a setting.
 * @param setting how the caller names it in the error (`auto.offset.reset`, `autoOffsetReset`)
 * @throws RangeError naming the setting and the value seen
 */
export function parseOffsetReset(value: unknown, setting: string): OffsetReset {
  if (value === 'smallest' || value === 'largest') return value;
  throw new RangeError(`${setting} ${JSON.stringify(value)} must be smallest or largest`);
}

/**
 * The offset the policy names among the bounds a broker reported (an OffsetOutOfRange answer
 * carries the partition's earliest offset and log end); undefined when the broker did not report it.
 */
export function resetOffsetWithin(
  policy: OffsetReset,
  bounds: { readonly earliest?: number | undefined; readonly end?: number | undefined },
): number | undefined {
  return policy === 'smallest' ? bounds.earliest : bounds.end;
}

/**
 * Asks the partition's broker (an OFFSETS request) for the offset the policy names.
 * @throws what SimpleConsumer.earliestOffset / latestOffset throw
 */
export async function resetOffset(policy: OffsetReset, consumer: SimpleConsumer, topic: string, partition: number): Promise<number> {
  return policy === 'smallest' ? consumer.earliestOffset(topic, partition) : consumer.latestOffset(topic, partition);
}

/**
 * Sets the start (`consumedOffset`) of partitions without a valid committed offset from the
 * policy, with an OFFSETS request to their broker in `live`, so that a consumer that joined
 * starts at the log end as of the rebalance. A broker that is not live or does not answer
 * (2 s to connect, 5 s per request) leaves the partition as it is, for its fetcher to reset.
 */
export async function applyResetPolicy(
  policy: OffsetReset,
  infos: readonly PartitionTopicInfo[],
  live: ReadonlyMap<number, BrokerInfo>,
  logger: Logger,
): Promise<void> {
  for (const info of infos) {
    const broker = live.get(info.fetchFrom ?? info.brokerId);
    if (!broker) continue;
    const consumer = new SimpleConsumer({ host: broker.host, port: broker.port, connectTimeoutMs: 2000, requestTimeoutMs: 5000 });
    try {
      info.consumedOffset = await resetOffset(policy, consumer, info.topic, info.partition);
      logger.info(
        { topic: info.topic, brokerId: info.brokerId, partition: info.partition, offset: info.consumedOffset, policy },
        'no valid committed offset; starting from the reset policy',
      );
    } catch (err) {
      logger.warn({ topic: info.topic, brokerId: info.brokerId, partition: info.partition, err }, 'could not ask the broker for the reset offset; the fetcher will');
    } finally {
      await consumer.close().catch(() => {});
    }
  }
}
