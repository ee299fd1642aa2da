import { describe, expect, it } from 'vitest';
import { checkCreateTopic, paperTopicDeleteRefusal, partitionStatus } from '../src/admin-checks.js';

describe('checkCreateTopic (docs/replication.md §15.1)', () => {
  it('accepts R up to the live brokers and M up to R', () => {
    expect(() => checkCreateTopic({ partitions: 4, replicationFactor: 3, minInsyncReplicas: 2 }, [2, 0, 1])).not.toThrow();
    expect(() => checkCreateTopic({ partitions: 1, replicationFactor: 1 }, [7])).not.toThrow();
  });

  it('refuses R larger than the live brokers, naming them', () => {
    expect(() => checkCreateTopic({ partitions: 4, replicationFactor: 3 }, [1, 0])).toThrow('replication factor 3 is larger than the 2 live brokers (0, 1)');
    expect(() => checkCreateTopic({ partitions: 4, replicationFactor: 2 }, [5])).toThrow('replication factor 2 is larger than the 1 live broker (5)');
    expect(() => checkCreateTopic({ partitions: 4, replicationFactor: 1 }, [])).toThrow('replication factor 1 is larger than the 0 live brokers (none)');
  });

  it('refuses M larger than R before looking at the brokers', () => {
    expect(() => checkCreateTopic({ partitions: 4, replicationFactor: 3, minInsyncReplicas: 4 }, [])).toThrow(
      '--min-insync-replicas 4 is larger than --replication-factor 3',
    );
  });

  it('refuses counts below 1', () => {
    expect(() => checkCreateTopic({ partitions: 0, replicationFactor: 1 }, [0])).toThrow('--partitions 0 must be an integer of at least 1');
    expect(() => checkCreateTopic({ partitions: 1, replicationFactor: 0 }, [0])).toThrow('--replication-factor 0 must be an integer of at least 1');
    expect(() => checkCreateTopic({ partitions: 1, replicationFactor: 1, minInsyncReplicas: 0 }, [0])).toThrow('--min-insync-replicas 0 must be an integer of at least 1');
  });

  it('words the refusal of deleting a paper topic', () => {
    expect(paperTopicDeleteRefusal('clicks').message).toBe(
      'topic clicks is a paper topic: its logs belong to the brokers that hold them; stop them and delete LOG_DIR/clicks-*',
    );
  });
});

describe('partitionStatus', () => {
  const live = new Set([0, 1, 2]);
  it('is ok with a live leader and a full ISR', () => expect(partitionStatus(1, [1, 2, 0], [1, 2, 0], live)).toBe('ok'));
  it('is under-replicated with a smaller ISR', () => expect(partitionStatus(2, [2, 0, 1], [2, 0], live)).toBe('under-replicated'));
  it('is offline without a leader', () => expect(partitionStatus(-1, [1, 0, 2], [1], live)).toBe('offline'));
  it('is offline when the leader is not live', () => expect(partitionStatus(3, [3, 0], [3, 0], live)).toBe('offline'));
});
