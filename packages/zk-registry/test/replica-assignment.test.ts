import { describe, expect, it } from 'vitest';
import { assignReplicas, checkReplicaAssignment, InvalidNameError, InvalidReplicaAssignmentError, ZkError } from '../src/index.js';

const fixed = { startIndex: 0, replicaShift: 0 };

describe('assignReplicas', () => {
  it('is the table of docs/replication.md §4: 5 brokers, 10 partitions, RF 3, start 0, shift 0', () => {
    expect(assignReplicas([0, 1, 2, 3, 4], 10, 3, fixed).map((r) => r.join(','))).toEqual([
      '0,1,2',
      '1,2,3',
      '2,3,4',
      '3,4,0',
      '4,0,1',
      '0,2,3',
      '1,3,4',
      '2,4,0',
      '3,0,1',
      '4,1,2',
    ]);
  });

  it('uses the broker ids sorted, whatever order they come in, and any ids', () => {
    expect(assignReplicas([30, 10, 20], 3, 2, fixed)).toEqual([
      [10, 20],
      [20, 30],
      [30, 10],
    ]);
  });

  it('starts at the start index and shifts the followers from the given shift', () => {
    expect(assignReplicas([0, 1, 2, 3], 4, 2, { startIndex: 2, replicaShift: 1 })).toEqual([
      [2, 0],
      [3, 1],
      [0, 2],
      [1, 3],
    ]);
  });

  for (const [brokers, partitions, rf] of [
    [3, 4, 3],
    [5, 10, 3],
    [6, 50, 2],
    [7, 100, 4],
    [4, 3, 4],
  ] as const) {
    it(`spreads ${partitions} partitions × RF ${rf} over ${brokers} brokers: distinct replicas, even leaders and replicas`, () => {
      const ids = Array.from({ length: brokers }, (_, i) => i);
      for (let start = 0; start < brokers; start++) {
        for (let shift = 0; shift < brokers; shift++) {
          const lists = assignReplicas(ids, partitions, rf, { startIndex: start, replicaShift: shift });
          expect(lists).toHaveLength(partitions);
          const leaders = new Array<number>(brokers).fill(0);
          const held = new Array<number>(brokers).fill(0);
          for (const replicas of lists) {
            expect(replicas).toHaveLength(rf);
            expect(new Set(replicas).size).toBe(rf);
            leaders[replicas[0]!]!++;
            for (const b of replicas) held[b]!++;
          }
          expect(Math.max(...leaders) - Math.min(...leaders)).toBeLessThanOrEqual(1);
          // Within a round of n partitions each broker holds at most rf replicas, so over
          // ceil(N/n) rounds the counts differ by at most rf.
          expect(Math.max(...held) - Math.min(...held)).toBeLessThanOrEqual(rf);
          expect(checkReplicaAssignment(lists)).toBe(rf);
        }
      }
    });
  }

  it('moves the followers of a broker’s partitions to different brokers from round to round', () => {
    const lists = assignReplicas([0, 1, 2, 3, 4], 15, 2, fixed);
    const followersOfBroker0 = lists.filter((r) => r[0] === 0).map((r) => r[1]);
    expect(followersOfBroker0).toEqual([1, 2, 3]);
  });

  it('gives a single broker every partition with RF 1', () => {
    expect(assignReplicas([7], 3, 1)).toEqual([[7], [7], [7]]);
  });

  it('picks the start index and shift from the random source when not given', () => {
    const draws = [0.5, 0.99];
    const lists = assignReplicas([0, 1, 2, 3], 2, 2, { random: () => draws.shift()! });
    // start = floor(0.5 × 4) = 2, shift = floor(0.99 × 4) = 3: followers at distance 1 + 3 mod 3 = 1
    expect(lists).toEqual([
      [2, 3],
      [3, 0],
    ]);
  });

  it('refuses a replication factor larger than the live brokers, naming them', () => {
    const tooMany = () => assignReplicas([1, 0], 4, 3);
    expect(tooMany).toThrow(InvalidReplicaAssignmentError);
    expect(tooMany).toThrow(ZkError);
    expect(tooMany).toThrow(/^replication factor 3 is larger than the 2 live brokers \(0, 1\)$/);
  });

  it('refuses bad counts, repeated or invalid brokers and out-of-range options', () => {
    expect(() => assignReplicas([], 1, 1)).toThrow(/no live broker/);
    expect(() => assignReplicas([0, 1], 0, 1)).toThrow(/partition count must be an integer in 1\.\.2147483647, got 0/);
    expect(() => assignReplicas([0, 1], 1.5, 1)).toThrow(InvalidReplicaAssignmentError);
    expect(() => assignReplicas([0, 1], 1, 0)).toThrow(/replication factor must be a positive integer, got 0/);
    expect(() => assignReplicas([0, 1, 1], 1, 1)).toThrow(/broker 1 is listed twice/);
    expect(() => assignReplicas([0, -1], 1, 1)).toThrow(InvalidNameError);
    expect(() => assignReplicas([0, 1], 1, 1, { startIndex: 2 })).toThrow(/startIndex must be an integer in 0\.\.1 for 2 brokers, got 2/);
    expect(() => assignReplicas([0, 1], 1, 1, { replicaShift: -1 })).toThrow(/replicaShift/);
  });
});

describe('checkReplicaAssignment', () => {
  it('returns the replication factor of well-formed lists', () => {
    expect(checkReplicaAssignment([[1, 2], [2, 0], [0, 1]])).toBe(2);
  });

  it('names the first wrong partition', () => {
    expect(() => checkReplicaAssignment([])).toThrow(/1\.\.2147483647 partitions, got 0/);
    expect(() => checkReplicaAssignment([[1, 2], [2]])).toThrow('partition 1 has 1 replicas where partition 0 has 2');
    expect(() => checkReplicaAssignment([[1, 2], [3, 3]])).toThrow('partition 1 names a broker twice: 3,3');
    expect(() => checkReplicaAssignment([[1, -2]])).toThrow('partition 0 names broker -2: not a broker id');
    expect(() => checkReplicaAssignment([[]])).toThrow(InvalidReplicaAssignmentError);
  });
});

