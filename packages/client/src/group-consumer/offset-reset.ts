/**
 * The reset policy (`auto.offset.reset`, docs/design.md §4): where a consumer starts a partition
 * that has no valid committed offset, and where it goes after OffsetOutOfRange. `smallest` is
 * the partition's earliest offset, `largest` its log end. The one place that turns the policy
 * into an offset.
 */
import type { SimpleConsumer } from '../simple-consumer.js';

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
