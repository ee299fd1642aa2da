/** The exact text of `klog topics` for replicated topics (docs/replication.md §15.1). */
import { describe, expect, it } from 'vitest';
import type { ReplicatedTopicDescription } from '@klog/client';
import { describedJson, formatCreated, formatDeleted, formatDescribed, formatElection, formatFilteredAll } from '../src/replicated-topics-format.js';

const events: ReplicatedTopicDescription = {
  kind: 'replicated',
  topic: 'events',
  id: '5f0c3a9e12b7d604',
  replicationFactor: 3,
  minInsyncReplicas: 2,
  partitions: [
    { partition: 0, leader: 1, leaderEpoch: 2, replicas: [1, 2, 0], isr: [1, 2, 0], highWatermark: 1048576, status: 'ok' },
    { partition: 1, leader: 2, leaderEpoch: 0, replicas: [2, 0, 1], isr: [2, 0], highWatermark: 1052322, status: 'under-replicated' },
    { partition: 2, leader: 0, leaderEpoch: 5, replicas: [0, 1, 2], isr: [0, 1, 2], highWatermark: 1039610, status: 'ok' },
    { partition: 3, leader: null, leaderEpoch: 4, replicas: [1, 0, 2], isr: [1], highWatermark: null, status: 'offline' },
  ],
};

describe('klog topics output', () => {
  it('--create prints the summary and the first leaders', () => {
    const out = formatCreated({
      topic: 'events',
      id: '5f0c3a9e12b7d604',
      replicationFactor: 3,
      minInsyncReplicas: 2,
      partitions: [
        { partition: 0, leader: 1, replicas: [1, 2, 0], isr: [1] },
        { partition: 1, leader: 2, replicas: [2, 0, 1], isr: [2] },
        { partition: 2, leader: 0, replicas: [0, 1, 2], isr: [0] },
        { partition: 3, leader: 1, replicas: [1, 0, 2], isr: [1] },
      ],
    });
    expect(out).toBe(
      [
        'created topic events: 4 partitions, replication factor 3, min.insync.replicas 2',
        'PARTITION  LEADER  REPLICAS  ISR',
        '0          1       1,2,0     1',
        '1          2       2,0,1     2',
        '2          0       0,1,2     0',
        '3          1       1,0,2     1',
        '',
      ].join('\n'),
    );
  });

  it('--describe prints the columns of §15.1', () => {
    expect(formatDescribed(events)).toBe(
      [
        'topic events: 4 partitions, replication factor 3, min.insync.replicas 2, id 5f0c3a9e12b7d604',
        'PARTITION  LEADER  EPOCH  REPLICAS  ISR    HIGH-WATERMARK  STATUS',
        '0          1       2      1,2,0     1,2,0  1048576         ok',
        '1          2       0      2,0,1     2,0    1052322         under-replicated',
        '2          0       5      0,1,2     0,1,2  1039610         ok',
        '3          none    4      1,0,2     1      -               offline',
        '',
      ].join('\n'),
    );
  });

  it('--under-replicated and --unavailable keep their partitions, with a TOPIC column over all topics', () => {
    expect(formatDescribed(events, 'under-replicated').split('\n').slice(2, -1).map((l) => l.split(/\s+/)[0])).toEqual(['1', '3']);
    expect(formatFilteredAll([events], 'unavailable')).toBe(
      ['TOPIC   PARTITION  LEADER  EPOCH  REPLICAS  ISR  HIGH-WATERMARK  STATUS', 'events  3          none    4      1,0,2     1    -               offline', ''].join('\n'),
    );
  });

  it('--json prints one line with null for what is unknown', () => {
    const j = JSON.parse(describedJson(events)) as { partitions: Array<Record<string, unknown>> };
    expect(describedJson(events).startsWith('{"topic":"events","id":"5f0c3a9e12b7d604","replicationFactor":3,"minInsyncReplicas":2,"partitions":[{"partition":0,"leader":1,"leaderEpoch":2,"replicas":[1,2,0],"isr":[1,2,0],"highWatermark":1048576,"status":"ok"}')).toBe(true);
    expect(j.partitions[3]).toMatchObject({ leader: null, highWatermark: null, status: 'offline' });
  });

  it('--delete and --elect-preferred-leaders print one line', () => {
    expect(formatDeleted({ topic: 'events', partitions: 4, replicas: 12 })).toBe('deleted topic events (4 partitions, 12 replicas)\n');
    expect(formatElection({ moved: [{ topic: 'events', partition: 1, from: 2, to: 1 }], alreadyPreferred: 9, notPossible: 0 })).toBe(
      'preferred leaders: 1 partition moved (events/1: 2 → 1), 9 already led by their preferred leader, 0 not possible (preferred replica not in the ISR or not live)\n',
    );
  });
});
