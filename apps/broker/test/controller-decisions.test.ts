/**
 * The controller's decisions (docs/replication.md §5.3, §5.4, §12, §15.1, §15.2), as pure
 * functions of a view: every row of §5.3 and §5.4, unclean election, deletion order.
 */
import { describe, expect, it } from 'vitest';
import {
  brokerChanges,
  decideBrokerChange,
  decideControlledShutdown,
  decideNewTopic,
  decideOnBecomingController,
  decidePreferredLeaders,
  decideReplicaLost,
  decideTopicDeletion,
  deletionSteps,
} from '../src/controller/decisions.js';
import { electLeader } from '../src/controller/election.js';
import { leaderAndIsrBody } from '../src/controller/requests.js';
import { offlinePartitionCount, type ControllerView, type PartitionModel, type PartitionStateValue, type TopicModel } from '../src/controller/view.js';

const epoch = 7;

function st(leader: number, isr: number[], leaderEpoch = 3, extra: Partial<PartitionStateValue> = {}): PartitionStateValue {
  return { leader, leaderEpoch, isr, controllerEpoch: 6, isNew: false, ...extra };
}

interface ViewInput {
  live?: number[];
  shuttingDown?: number[];
  topics?: TopicModel[];
  states?: Record<string, PartitionStateValue>;
  deleting?: string[];
  unclean?: boolean;
}

function view(i: ViewInput): ControllerView {
  const live = i.live ?? [0, 1, 2];
  const partitions = new Map<string, PartitionModel>(Object.entries(i.states ?? {}).map(([k, state]) => [k, { state, stateVersion: 4 }]));
  return {
    controllerId: 0,
    controllerEpoch: epoch,
    live: new Map(live.map((b) => [b, { id: b, epoch: 100 + b, host: '127.0.0.1', port: 9000 + b }])),
    shuttingDown: new Set(i.shuttingDown ?? []),
    topics: new Map((i.topics ?? [events]).map((t) => [t.topic, t])),
    partitions,
    deleting: new Set(i.deleting ?? []),
    uncleanLeaderElection: i.unclean ?? false,
    defaultMinInsyncReplicas: 1,
  };
}

const events: TopicModel = { topic: 'events', id: '5f0c3a9e12b7d604', replicas: [[1, 2, 0], [2, 0, 1]], minInsyncReplicas: 2 };

const eligible = (live: number[], unclean = false, down: number[] = []) => ({
  isLive: (b: number) => live.includes(b),
  isShuttingDown: (b: number) => down.includes(b),
  unclean,
});

describe('electLeader (§5.4)', () => {
  it('takes the first replica that is in the ISR and live, and drops the others that cannot lead from the ISR', () => {
    expect(electLeader([1, 2, 0], st(1, [1, 2, 0]), eligible([0, 2]))).toEqual({ kind: 'leader', leader: 2, isr: [2, 0], unclean: false });
    expect(electLeader([1, 2, 0], st(1, [1, 0]), eligible([0, 2]))).toEqual({ kind: 'leader', leader: 0, isr: [0], unclean: false });
  });
  it('never takes a broker in controlled shutdown', () => {
    expect(electLeader([1, 2, 0], st(1, [1, 2, 0]), eligible([0, 1, 2], false, [1, 2]))).toEqual({ kind: 'leader', leader: 0, isr: [0], unclean: false });
  });
  it('goes offline when no ISR member is live, however many other replicas are', () => {
    expect(electLeader([1, 2, 0], st(1, [1]), eligible([0, 2]))).toEqual({ kind: 'offline' });
  });
  it('with unclean election, takes the first live replica with ISR [it] (§12)', () => {
    expect(electLeader([1, 2, 0], st(1, [1]), eligible([0, 2], true))).toEqual({ kind: 'leader', leader: 2, isr: [2], unclean: true });
    expect(electLeader([1, 2, 0], st(1, [1]), eligible([], true))).toEqual({ kind: 'offline' });
  });
  it('a new partition takes the first live replica, in the ISR or not', () => {
    expect(electLeader([1, 2, 0], st(1, [1], 0, { isNew: true }), eligible([0, 2]))).toEqual({ kind: 'leader', leader: 2, isr: [2], unclean: false });
  });
  it('never takes the excluded broker', () => {
    expect(electLeader([1, 2, 0], st(1, [1, 2]), eligible([0, 1, 2]), 1)).toMatchObject({ leader: 2 });
  });
});

describe('a new topic (§5.3)', () => {
  it('creates each partition led by the first live replica, ISR [leader], epoch 0, new, and tells every live replica', () => {
    const plan = decideNewTopic(view({ live: [0, 2] }), 'events');
    expect(plan.writes).toEqual([
      { key: 'events/0', state: { leader: 2, leaderEpoch: 0, isr: [2], controllerEpoch: epoch, isNew: true }, expectedVersion: -1, reason: 'new-topic' },
      { key: 'events/1', state: { leader: 2, leaderEpoch: 0, isr: [2], controllerEpoch: epoch, isNew: true }, expectedVersion: -1, reason: 'new-topic' },
    ]);
    expect(plan.leaderAndIsr).toEqual(new Map([[2, ['events/0', 'events/1']], [0, ['events/0', 'events/1']]]));
  });
  it('creates a partition with no live replica offline: leader −1, ISR []', () => {
    const plan = decideNewTopic(view({ live: [5] }), 'events');
    expect(plan.writes[0]).toEqual({ key: 'events/0', state: { leader: -1, leaderEpoch: 0, isr: [], controllerEpoch: epoch, isNew: true }, expectedVersion: -1 });
  });
  it('leaves partitions that already have a state alone, and topics being deleted', () => {
    expect(decideNewTopic(view({ states: { 'events/0': st(1, [1]) } }), 'events').writes.map((w) => w.key)).toEqual(['events/1']);
    expect(decideNewTopic(view({ deleting: ['events'] }), 'events').empty).toBe(true);
  });
});

describe('on becoming controller (§5.3)', () => {
  it('elects for leaders −1 or not live, removes dead brokers from ISRs, creates missing partitions, and sends every live broker everything it replicates', () => {
    const v = view({ live: [0, 2], states: { 'events/0': st(1, [1, 2, 0]) }, topics: [events, { topic: 'fresh', id: 'aaaaaaaaaaaaaaaa', replicas: [[0]] }] });
    const plan = decideOnBecomingController(v);
    const writes = new Map(plan.writes.map((w) => [w.key, w]));
    expect(writes.get('events/0')).toMatchObject({ state: { leader: 2, leaderEpoch: 4, isr: [2, 0], controllerEpoch: epoch }, expectedVersion: 4, reason: 'failure' });
    expect(writes.get('events/1')).toMatchObject({ state: { leader: 2, leaderEpoch: 0, isNew: true }, expectedVersion: -1 });
    expect(writes.get('fresh/0')).toMatchObject({ state: { leader: 0, isr: [0] }, reason: 'new-topic' });
    expect(plan.leaderAndIsr.get(0)?.sort()).toEqual(['events/0', 'events/1', 'fresh/0']);
    expect(plan.leaderAndIsr.get(2)?.sort()).toEqual(['events/0', 'events/1']);
  });
  it('with every leader live and ISRs alive writes nothing but still sends the full state', () => {
    const plan = decideOnBecomingController(view({ states: { 'events/0': st(1, [1, 2, 0]), 'events/1': st(2, [2, 0]) } }));
    expect(plan.writes).toEqual([]);
    expect(plan.leaderAndIsr.get(1)).toEqual(['events/0', 'events/1']);
  });
  it('elects a leader for a partition that is offline (−1) once an ISR member is live', () => {
    const plan = decideOnBecomingController(view({ states: { 'events/0': st(-1, [0]), 'events/1': st(2, [2]) } }));
    expect(plan.writes).toEqual([{ key: 'events/0', state: st(0, [0], 4, { controllerEpoch: epoch }), expectedVersion: 4, reason: 'failure' }]);
  });
});

describe('a broker gone (§5.3)', () => {
  const states = { 'events/0': st(1, [1, 2, 0]), 'events/1': st(2, [2, 0, 1]) };
  it('partitions it led get a new leader from the ISR; ISRs that hold it as follower lose it; the live replicas are told', () => {
    const v = view({ live: [0, 2], states });
    const plan = decideBrokerChange(v, brokerChanges(new Map([[0, 100], [1, 101], [2, 102]]), new Map([[0, 100], [2, 102]])));
    expect(plan.writes).toEqual([
      { key: 'events/0', state: st(2, [2, 0], 4, { controllerEpoch: epoch }), expectedVersion: 4, reason: 'failure' },
      { key: 'events/1', state: st(2, [2, 0], 4, { controllerEpoch: epoch }), expectedVersion: 4 },
    ]);
    expect(plan.leaderAndIsr).toEqual(new Map([[2, ['events/0', 'events/1']], [0, ['events/0', 'events/1']]]));
  });
  it('a partition whose ISR members are all gone goes offline, its ISR left as it was', () => {
    const plan = decideBrokerChange(view({ live: [0, 2], states: { 'events/0': st(1, [1]) } }), { gone: [1], back: [], bounced: [] });
    expect(plan.writes).toEqual([{ key: 'events/0', state: st(-1, [1], 4, { controllerEpoch: epoch }), expectedVersion: 4 }]);
    expect(offlinePartitionCount({ ...view({ states: { 'events/0': st(-1, [1]) } }) })).toBe(1);
  });
  it('with unclean election the first live replica leads with ISR [it] and the write is marked unclean (§12)', () => {
    const plan = decideBrokerChange(view({ live: [0, 2], states: { 'events/0': st(1, [1]) }, unclean: true }), { gone: [1], back: [], bounced: [] });
    expect(plan.writes).toEqual([{ key: 'events/0', state: st(2, [2], 4, { controllerEpoch: epoch }), expectedVersion: 4, reason: 'failure', uncleanFromIsr: [1] }]);
  });
  it("the topic's own uncleanLeaderElection overrides the controller's", () => {
    const strict = { ...events, uncleanLeaderElection: false };
    const plan = decideBrokerChange(view({ live: [0, 2], topics: [strict], states: { 'events/0': st(1, [1]) }, unclean: true }), { gone: [1], back: [], bounced: [] });
    expect(plan.writes[0]!.state.leader).toBe(-1);
  });
});

describe('a broker back (§5.3)', () => {
  it('gets every partition it replicates; an offline partition whose ISR holds it gets it as leader', () => {
    const plan = decideBrokerChange(view({ states: { 'events/0': st(-1, [1]), 'events/1': st(2, [2, 0]) } }), { gone: [], back: [1], bounced: [] });
    expect(plan.writes).toEqual([{ key: 'events/0', state: st(1, [1], 4, { controllerEpoch: epoch }), expectedVersion: 4, reason: 'failure' }]);
    expect(plan.leaderAndIsr.get(1)).toEqual(['events/0', 'events/1']);
  });
  it('does not lead an offline partition whose ISR does not hold it, unless unclean election is on', () => {
    const clean = decideBrokerChange(view({ states: { 'events/0': st(-1, [1]) }, live: [0, 2] }), { gone: [], back: [2], bounced: [] });
    expect(clean.writes).toEqual([]);
    const unclean = decideBrokerChange(view({ states: { 'events/0': st(-1, [1]) }, live: [0, 2], unclean: true }), { gone: [], back: [2], bounced: [] });
    expect(unclean.writes).toEqual([{ key: 'events/0', state: st(2, [2], 4, { controllerEpoch: epoch }), expectedVersion: 4, reason: 'failure', uncleanFromIsr: [1] }]);
  });
  it('back with a new broker epoch counts as gone then back: its leaderships move, and it leads again only where it was the last ISR member', () => {
    const v = view({ states: { 'events/0': st(1, [1, 2]), 'events/1': st(1, [1]) } });
    const changes = brokerChanges(new Map([[0, 100], [1, 50], [2, 102]]), new Map([[0, 100], [1, 101], [2, 102]]));
    expect(changes).toEqual({ gone: [1], back: [1], bounced: [1] });
    const plan = decideBrokerChange(v, changes);
    expect(plan.writes).toEqual([
      { key: 'events/0', state: st(2, [2], 4, { controllerEpoch: epoch }), expectedVersion: 4, reason: 'failure' },
      { key: 'events/1', state: st(1, [1], 4, { controllerEpoch: epoch }), expectedVersion: 4, reason: 'failure' },
    ]);
    expect(plan.leaderAndIsr.get(1)).toEqual(['events/0', 'events/1']);
  });
  it('a new partition created offline is led by its first replica to register', () => {
    const plan = decideBrokerChange(view({ live: [0], states: { 'events/0': st(-1, [], 0, { isNew: true }) } }), { gone: [], back: [0], bounced: [] });
    expect(plan.writes[0]!.state).toEqual({ leader: 0, leaderEpoch: 1, isr: [0], controllerEpoch: epoch, isNew: true });
  });
});

describe('ReplicaLost (§5.3, §8.1)', () => {
  it('takes the broker out of the ISR and elects the next ISR member when it was the leader', () => {
    const plan = decideReplicaLost(view({ states: { 'events/0': st(1, [1, 2]) } }), 'events/0', 1, 3);
    expect(plan.writes).toEqual([{ key: 'events/0', state: st(2, [2], 4, { controllerEpoch: epoch }), expectedVersion: 4, reason: 'failure' }]);
  });
  it('leaves the partition offline with an empty ISR when the lost replica was the only member (§17.6)', () => {
    const plan = decideReplicaLost(view({ states: { 'events/0': st(1, [1]) } }), 'events/0', 1, 3);
    expect(plan.writes).toEqual([{ key: 'events/0', state: st(-1, [], 4, { controllerEpoch: epoch }), expectedVersion: 4 }]);
    expect(plan.leaderAndIsr.get(1)).toEqual(['events/0']);
  });
  it('a follower that lost its log leaves the ISR; an answer to an older epoch is ignored', () => {
    expect(decideReplicaLost(view({ states: { 'events/0': st(1, [1, 2]) } }), 'events/0', 2, 3).writes[0]!.state.isr).toEqual([1]);
    expect(decideReplicaLost(view({ states: { 'events/0': st(1, [1, 2]) } }), 'events/0', 2, 2).empty).toBe(true);
  });
  it('with unclean election never elects the broker that lost its log', () => {
    const plan = decideReplicaLost(view({ states: { 'events/0': st(1, [1]) }, unclean: true }), 'events/0', 1, 3);
    expect(plan.writes[0]).toMatchObject({ state: { leader: 2, isr: [2] }, uncleanFromIsr: [] });
  });
});

describe('controlled shutdown (§15.2)', () => {
  it('moves each leadership to the next ISR member, takes the broker out of every ISR, and stops its replicas', () => {
    const v = view({ shuttingDown: [1], states: { 'events/0': st(1, [1, 2, 0]), 'events/1': st(2, [2, 0, 1]) } });
    const { plan, remaining } = decideControlledShutdown(v, 1);
    expect(remaining).toEqual([]);
    expect(plan.writes).toEqual([
      { key: 'events/0', state: st(2, [2, 0], 4, { controllerEpoch: epoch }), expectedVersion: 4, reason: 'controlled-shutdown' },
      { key: 'events/1', state: st(2, [2, 0], 4, { controllerEpoch: epoch }), expectedVersion: 4 },
    ]);
    expect(plan.leaderAndIsr.get(1)).toBeUndefined();
    expect(plan.leaderAndIsr.get(2)).toEqual(['events/0', 'events/1']);
    expect(plan.stopReplicas).toEqual([{ brokerId: 1, delete: false, partitions: [{ key: 'events/0', leaderEpoch: 4 }, { key: 'events/1', leaderEpoch: 4 }] }]);
  });
  it('keeps a leadership no other ISR member can take (never unclean) and reports it', () => {
    const v = view({ shuttingDown: [1], states: { 'events/0': st(1, [1]), 'events/1': st(2, [2]) }, unclean: true });
    const { plan, remaining } = decideControlledShutdown(v, 1);
    expect(remaining).toEqual(['events/0']);
    expect(plan.writes).toEqual([]);
    expect(plan.stopReplicas[0]!.partitions.map((p) => p.key)).toEqual(['events/1']);
  });
  it('later elections keep it out of ISRs and leaderships while it is shutting down', () => {
    const v = view({ live: [0, 1], shuttingDown: [1], states: { 'events/0': st(2, [2, 1, 0]) } });
    const plan = decideBrokerChange(v, { gone: [2], back: [], bounced: [] });
    expect(plan.writes[0]!.state).toMatchObject({ leader: 0, isr: [0] });
  });
});

describe('preferred leaders (§15.1)', () => {
  it('moves a partition to its first replica when live and in the ISR, counts the others', () => {
    const v = view({ live: [0, 1, 2], states: { 'events/0': st(2, [2, 1]), 'events/1': st(2, [2, 0, 1]) } });
    const { plan, outcome } = decidePreferredLeaders(v);
    expect(outcome).toEqual({ moved: [{ key: 'events/0', from: 2, to: 1 }], already: 1, impossible: [] });
    expect(plan.writes).toEqual([{ key: 'events/0', state: st(1, [2, 1], 4, { controllerEpoch: epoch }), expectedVersion: 4, reason: 'preferred' }]);
    const notInIsr = decidePreferredLeaders(view({ states: { 'events/0': st(2, [2]) } }), ['events/0']);
    expect(notInIsr.outcome).toEqual({ moved: [], already: 0, impossible: ['events/0'] });
  });
});

describe('topic deletion (§5.3)', () => {
  it('sets every leader to −1, then sends STOP_REPLICA delete 1 to every live replica', () => {
    const plan = decideTopicDeletion(view({ live: [1, 2], deleting: ['events'], states: { 'events/0': st(1, [1, 2]), 'events/1': st(-1, [0], 2) } }), 'events');
    expect(plan.writes).toEqual([{ key: 'events/0', state: st(-1, [1, 2], 4, { controllerEpoch: epoch }), expectedVersion: 4 }]);
    expect(plan.leaderAndIsr.size).toBe(0);
    expect(plan.stopReplicas).toEqual([
      { brokerId: 1, delete: true, partitions: [{ key: 'events/0', leaderEpoch: 4 }, { key: 'events/1', leaderEpoch: 2 }] },
      { brokerId: 2, delete: true, partitions: [{ key: 'events/0', leaderEpoch: 4 }, { key: 'events/1', leaderEpoch: 2 }] },
    ]);
  });
  it('removes states and partition nodes first, the definition and the request node last', () => {
    expect(deletionSteps([0, 1])).toEqual([
      { node: 'state', partition: 0 },
      { node: 'partition', partition: 0 },
      { node: 'state', partition: 1 },
      { node: 'partition', partition: 1 },
      { node: 'partitions' },
      { node: 'definition' },
      { node: 'delete-request' },
    ]);
  });
  it('a topic being deleted takes part in no election', () => {
    const plan = decideBrokerChange(view({ live: [0, 2], deleting: ['events'], states: { 'events/0': st(1, [1, 2]) } }), { gone: [1], back: [], bounced: [] });
    expect(plan.empty).toBe(true);
  });
});

describe('LEADER_AND_ISR bodies (§6.1)', () => {
  it('carry the state, its version, the topic id and min.insync.replicas, and the addresses of the live leaders', () => {
    const body = leaderAndIsrBody(view({ states: { 'events/0': st(1, [1, 2]) } }), ['events/0']);
    expect(body).toEqual({
      controllerId: 0,
      controllerEpoch: epoch,
      partitions: [{ topic: 'events', topicId: '5f0c3a9e12b7d604', partition: 0, leader: 1, leaderEpoch: 3, stateVersion: 4, minInsyncReplicas: 2, isNew: false, replicas: [1, 2, 0], isr: [1, 2] }],
      brokers: [{ brokerId: 1, host: '127.0.0.1', port: 9001 }],
    });
  });
});
