import { describe, expect, it } from 'vitest';
import {
  encodePartitionState,
  encodePreferredLeaderElection,
  encodeTopicDefinition,
  InvalidZkValueError,
  newTopicId,
  parsePartitionState,
  parsePreferredLeaderElection,
  parseTopicDefinition,
  type TopicDefinition,
} from '../src/index.js';

const path = '/brokers/topics/events';

describe('replicated topic values (docs/replication.md §3.1)', () => {
  it('reads the design\'s example definition and state, and round-trips them', () => {
    const text =
      '{"version":1,"id":"5f0c3a9e12b7d604","partitions":{"0":[1,2,0],"1":[2,0,1],"2":[0,1,2],"3":[1,0,2]},' +
      '"minInsyncReplicas":2,"uncleanLeaderElection":false,"createdMs":1764600000000}';
    const definition = parseTopicDefinition(text, path);
    expect(definition).toEqual({
      id: '5f0c3a9e12b7d604',
      partitions: [
        [1, 2, 0],
        [2, 0, 1],
        [0, 1, 2],
        [1, 0, 2],
      ],
      minInsyncReplicas: 2,
      uncleanLeaderElection: false,
      createdMs: 1764600000000,
    });
    expect(encodeTopicDefinition(definition)).toBe(text);
    const state = parsePartitionState('{"version":1,"leader":1,"leaderEpoch":3,"isr":[1,2],"controllerEpoch":5,"new":false}', `${path}/partitions/0/state`);
    expect(state).toEqual({ leader: 1, leaderEpoch: 3, isr: [1, 2], controllerEpoch: 5, isNew: false });
    expect(encodePartitionState(state)).toBe('{"version":1,"leader":1,"leaderEpoch":3,"isr":[1,2],"controllerEpoch":5,"new":false}');
    const minimal: TopicDefinition = { id: newTopicId(), partitions: [[4]], createdMs: 0 };
    expect(parseTopicDefinition(encodeTopicDefinition(minimal), path)).toEqual(minimal);
    expect(minimal.id).toMatch(/^[0-9a-f]{16}$/);
  });

  it('ignores fields it does not know', () => {
    expect(parsePartitionState('{"version":1,"leader":-1,"leaderEpoch":0,"isr":[],"controllerEpoch":1,"new":true,"future":{"x":1}}', path)).toEqual({
      leader: -1,
      leaderEpoch: 0,
      isr: [],
      controllerEpoch: 1,
      isNew: true,
    });
    expect(parseTopicDefinition('{"version":1,"id":"0000000000000001","partitions":{"0":[0]},"createdMs":5,"racks":["a"]}', path).partitions).toEqual([[0]]);
  });

  it('refuses a bad value with a typed error naming what is wrong (never guessed)', () => {
    const bad: Array<[string, RegExp]> = [
      ['not json', /not JSON/],
      ['[1]', /not a JSON object/],
      ['{"leader":1,"leaderEpoch":3,"isr":[1],"controllerEpoch":5,"new":false}', /no "version"/],
      ['{"version":2,"leader":1,"leaderEpoch":3,"isr":[1],"controllerEpoch":5,"new":false}', /unsupported version 2/],
      ['{"version":1,"leader":"1","leaderEpoch":3,"isr":[1],"controllerEpoch":5,"new":false}', /"leader" must be an integer/],
      ['{"version":1,"leader":-2,"leaderEpoch":3,"isr":[1],"controllerEpoch":5,"new":false}', /"leader" must be an integer in -1\.\./],
      ['{"version":1,"leader":1,"leaderEpoch":1.5,"isr":[1],"controllerEpoch":5,"new":false}', /"leaderEpoch"/],
      ['{"version":1,"leader":1,"leaderEpoch":3,"isr":[1,1],"controllerEpoch":5,"new":false}', /names a broker twice/],
      ['{"version":1,"leader":1,"leaderEpoch":3,"isr":[-1],"controllerEpoch":5,"new":false}', /not a broker id/],
      ['{"version":1,"leader":1,"leaderEpoch":3,"isr":[1],"controllerEpoch":5}', /no "new"/],
      ['{"version":1,"leader":1,"leaderEpoch":3,"isr":[1],"controllerEpoch":5,"new":0}', /"new" must be true or false/],
    ];
    for (const [text, reason] of bad) {
      const error = (() => {
        try {
          parsePartitionState(text, `${path}/partitions/0/state`);
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(error, text).toBeInstanceOf(InvalidZkValueError);
      expect((error as InvalidZkValueError).message).toMatch(reason);
      expect((error as InvalidZkValueError).path).toBe(`${path}/partitions/0/state`);
      expect((error as InvalidZkValueError).value).toBe(text);
    }
    const badDefinitions: Array<[string, RegExp]> = [
      ['{"version":1,"id":"XYZ","partitions":{"0":[0]},"createdMs":1}', /"id" must be 16 lowercase hex digits/],
      ['{"version":1,"id":"0000000000000001","partitions":{},"createdMs":1}', /must list 1\.\./],
      ['{"version":1,"id":"0000000000000001","partitions":{"0":[0],"2":[1]},"createdMs":1}', /keys must be 0\.\.1, got "2"/],
      ['{"version":1,"id":"0000000000000001","partitions":{"00":[0]},"createdMs":1}', /keys must be 0\.\.0, got "00"/],
      ['{"version":1,"id":"0000000000000001","partitions":{"0":[0,1],"1":[1]},"createdMs":1}', /partition 1 has 1 replicas where partition 0 has 2/],
      ['{"version":1,"id":"0000000000000001","partitions":{"0":[]},"createdMs":1}', /partition 0 has 0 replicas/],
      ['{"version":1,"id":"0000000000000001","partitions":{"0":[0,0]},"createdMs":1}', /names a broker twice/],
      ['{"version":1,"id":"0000000000000001","partitions":{"0":[0]},"minInsyncReplicas":2,"createdMs":1}', /"minInsyncReplicas" must be an integer in 1\.\.1/],
      ['{"version":1,"id":"0000000000000001","partitions":{"0":[0]},"uncleanLeaderElection":"yes","createdMs":1}', /"uncleanLeaderElection"/],
      ['{"version":1,"id":"0000000000000001","partitions":{"0":[0]}}', /no "createdMs"/],
    ];
    for (const [text, reason] of badDefinitions) expect(() => parseTopicDefinition(text, path), text).toThrow(reason);
    expect(() => encodeTopicDefinition({ id: 'nope', partitions: [[0]], createdMs: 1 })).toThrow(/invalid topic id/);
    expect(() => encodeTopicDefinition({ id: '0000000000000001', partitions: [[0, 1]], minInsyncReplicas: 3, createdMs: 1 })).toThrow(/minInsyncReplicas 3/);
    expect(() => encodePartitionState({ leader: 1, leaderEpoch: -1, isr: [1], controllerEpoch: 1, isNew: false })).toThrow(/leaderEpoch -1/);
  });

  it('reads and refuses preferred-leader election requests', () => {
    expect(parsePreferredLeaderElection('{"version":1,"all":true}')).toEqual({ all: true });
    const some = '{"version":1,"partitions":[{"topic":"events","partition":0}]}';
    expect(parsePreferredLeaderElection(some)).toEqual({ all: false, partitions: [{ topic: 'events', partition: 0 }] });
    expect(encodePreferredLeaderElection({ all: false, partitions: [{ topic: 'events', partition: 0 }] })).toBe(some);
    expect(() => parsePreferredLeaderElection('{"version":1}')).toThrow(/neither "all": true nor "partitions"/);
    expect(() => parsePreferredLeaderElection('{"version":1,"partitions":[]}')).toThrow(/non-empty array/);
    expect(() => parsePreferredLeaderElection('{"version":1,"partitions":[{"topic":"a/b","partition":0}]}')).toThrow(InvalidZkValueError);
    expect(() => parsePreferredLeaderElection('{"version":1,"partitions":[{"topic":"a","partition":-1}]}')).toThrow(/non-negative int32/);
  });
});
