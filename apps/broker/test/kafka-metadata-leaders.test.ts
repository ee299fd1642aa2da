/**
 * The Kafka listener's Metadata names only leaders that have a Kafka listener
 * (docs/kafka-protocol.md, "Partitions"): a partition led by a broker started without
 * `--kafka-port` is LEADER_NOT_AVAILABLE with leader -1, so a Kafka client never waits on a
 * broker missing from the broker list.
 */
import { KafkaErrorCode, type MetadataTopic } from '@klog/kafka-protocol';
import { describe, expect, it } from 'vitest';
import { withListedLeaders } from '../src/kafka/metadata.js';

const part = (partition: number, leader: number) => ({ errorCode: KafkaErrorCode.None, partition, leader, replicas: [leader], isr: [leader] });

describe('Kafka Metadata: leaders without a Kafka listener', () => {
  it('marks the partitions they lead LEADER_NOT_AVAILABLE with leader -1, and keeps the others', () => {
    const topics: MetadataTopic[] = [
      { errorCode: 0, name: 'mixed', partitions: [part(0, 0), part(1, 1), part(2, 2)] },
      { errorCode: 0, name: 'listed', partitions: [part(0, 2)] },
      { errorCode: 0, name: 'offline', partitions: [{ ...part(0, -1), errorCode: KafkaErrorCode.LeaderNotAvailable }] },
    ];
    const out = withListedLeaders(topics, new Set([2]));
    expect(out[0]!.partitions.map((p) => [p.partition, p.leader, p.errorCode])).toEqual([
      [0, -1, KafkaErrorCode.LeaderNotAvailable],
      [1, -1, KafkaErrorCode.LeaderNotAvailable],
      [2, 2, KafkaErrorCode.None],
    ]);
    expect(out[0]!.partitions[0]!.replicas).toEqual([0]);
    expect(out[1]).toBe(topics[1]);
    expect(out[2]).toBe(topics[2]);
  });
});
