/**
 * What the controller does for each event (docs/replication.md §5.3, §12, §15.1, §15.2), as
 * pure functions from a {@link ControllerView} to a {@link Plan}: which partition states to
 * write and which requests to send. controller.ts does the I/O.
 */
import { canLead, electLeader, nextState, orderedIsr, sameIsr, type Eligibility } from './election.js';
import { eligibility, Plan, type ElectionReason } from './plan.js';
import { parsePartitionKey, partitionKey, topicPartitionKeys, type ControllerView, type TopicModel } from './view.js';

/** Keys of every partition (with a state) of the topics not being deleted. */
function activeKeys(view: ControllerView): string[] {
  const out: string[] = [];
  for (const key of view.partitions.keys()) if (!view.deleting.has(parsePartitionKey(key).topic)) out.push(key);
  return out;
}

/**
 * Brings one partition in line with who is live (§5.4): a leader that cannot lead is replaced
 * (or, with no candidate, the partition goes offline, its ISR left as it was; a live leader in
 * controlled shutdown with no successor keeps leading), and ISR members that cannot lead are
 * removed. Every write bumps `leaderEpoch` and is sent to the partition's live replicas.
 */
function reconcile(plan: Plan, key: string, e: Eligibility, reason: ElectionReason): void {
  const state = plan.state(key);
  const { topic, partition } = parsePartitionKey(key);
  const replicas = plan.view.topics.get(topic)?.replicas[partition];
  if (state === undefined || replicas === undefined) return;
  const epoch = plan.view.controllerEpoch;
  const shrink = (): void => {
    const isr = state.isr.filter((b) => b === state.leader || canLead(b, e));
    if (sameIsr(isr, state.isr)) return;
    plan.write(key, nextState(state, epoch, { isr }));
    plan.notifyReplicas(key);
  };
  if (state.leader !== -1 && canLead(state.leader, e)) return shrink();
  const election = electLeader(replicas, state, e);
  if (election.kind === 'leader') {
    plan.write(key, nextState(state, epoch, { leader: election.leader, isr: election.isr }), reason, election.unclean ? state.isr : undefined);
    plan.notifyReplicas(key);
  } else if (state.leader !== -1 && e.isLive(state.leader)) {
    shrink(); // in controlled shutdown with no other ISR member: it keeps leading (§15.2)
  } else if (state.leader !== -1) {
    plan.write(key, nextState(state, epoch, { leader: -1 }));
    plan.notifyReplicas(key);
  }
}

/**
 * Creates the states of `topic`'s partitions that have none (§5.3, "a new topic"): leader the
 * first live broker of the replica list, ISR `[leader]`, epoch 0, `new`; with no live replica
 * offline (`leader` −1, ISR `[]`).
 */
function createPartitions(plan: Plan, topic: TopicModel): void {
  const view = plan.view;
  for (const key of topicPartitionKeys(topic)) {
    if (plan.state(key) !== undefined) continue;
    const replicas = topic.replicas[parsePartitionKey(key).partition]!;
    const e = eligibility(view, key);
    const leader = replicas.find((b) => canLead(b, e)) ?? -1;
    plan.write(key, { leader, leaderEpoch: 0, isr: leader === -1 ? [] : [leader], controllerEpoch: view.controllerEpoch, isNew: true }, leader === -1 ? undefined : 'new-topic');
    plan.notifyReplicas(key);
  }
}

/**
 * On becoming controller (§5.3): create the partitions of topics that have none, elect a leader
 * for every partition whose leader is −1 or cannot lead, remove the brokers that cannot lead from
 * every ISR, and send every live broker the state of every partition it replicates (the full
 * resend that repairs whatever a dead predecessor wrote and did not send, §17.7).
 */
export function decideOnBecomingController(view: ControllerView): Plan {
  const plan = new Plan(view);
  for (const topic of view.topics.values()) if (!view.deleting.has(topic.topic)) createPartitions(plan, topic);
  for (const key of activeKeys(view)) reconcile(plan, key, eligibility(view, key), 'failure');
  for (const b of view.live.keys()) notifyEverything(plan, b);
  return plan;
}

/** Sends broker `b` every partition (of a topic not being deleted) it replicates. */
function notifyEverything(plan: Plan, b: number): void {
  for (const topic of plan.view.topics.values()) {
    if (plan.view.deleting.has(topic.topic)) continue;
    topic.replicas.forEach((replicas, p) => {
      const key = partitionKey(topic.topic, p);
      if (replicas.includes(b) && plan.state(key) !== undefined) plan.notify(b, key);
    });
  }
}

/** A new replicated topic (§5.3): its partition states, created, and sent to their replicas. */
export function decideNewTopic(view: ControllerView, topic: string): Plan {
  const plan = new Plan(view);
  const model = view.topics.get(topic);
  if (model !== undefined && !view.deleting.has(topic)) createPartitions(plan, model);
  return plan;
}

/** The brokers that went and came between two readings of `/brokers/ids` (id → broker epoch). */
export interface BrokerChanges {
  /** In the earlier reading and not in the later, or there with another epoch. */
  readonly gone: number[];
  /** In the later reading and not in the earlier, or there with another epoch. */
  readonly back: number[];
  /** Both gone and back: registered again with a new broker epoch. */
  readonly bounced: number[];
}

/** Compares two readings of the live brokers (§5.2: a new `czxid` is gone, then back). */
export function brokerChanges(before: ReadonlyMap<number, number>, after: ReadonlyMap<number, number>): BrokerChanges {
  const gone = [...before].filter(([b, epoch]) => after.get(b) !== epoch).map(([b]) => b);
  const back = [...after].filter(([b, epoch]) => before.get(b) !== epoch).map(([b]) => b);
  return { gone: gone.sort((a, b) => a - b), back: back.sort((a, b) => a - b), bounced: gone.filter((b) => after.has(b)).sort((a, b) => a - b) };
}

/**
 * Brokers gone and back (§5.3). `view.live` is the later reading. First as if every gone broker
 * were dead (those that came back with a new epoch too): each partition one of them led gets a
 * new leader from the ISR, and each ISR loses them. Then the brokers back: each gets every
 * partition it replicates; an offline partition whose ISR holds one gets it as leader; with
 * unclean election, an offline partition with no live ISR member gets its first live replica.
 */
export function decideBrokerChange(view: ControllerView, changes: BrokerChanges): Plan {
  const plan = new Plan(view);
  const gone = new Set(changes.gone);
  const bounced = new Set(changes.bounced);
  const involves = (key: string, brokers: ReadonlySet<number>): boolean => {
    const { topic, partition } = parsePartitionKey(key);
    const replicas = view.topics.get(topic)?.replicas[partition] ?? [];
    const state = plan.state(key);
    return replicas.some((b) => brokers.has(b)) || (state !== undefined && (brokers.has(state.leader) || state.isr.some((b) => brokers.has(b))));
  };
  for (const key of activeKeys(view)) if (involves(key, gone)) reconcile(plan, key, eligibility(view, key, bounced), 'failure');
  const back = new Set(changes.back);
  for (const key of activeKeys(view)) if (involves(key, back)) reconcile(plan, key, eligibility(view, key), 'failure');
  for (const b of changes.back) notifyEverything(plan, b);
  return plan;
}

/**
 * Controlled shutdown of broker `b` (§15.2); `view.shuttingDown` holds `b`. Each partition it
 * leads moves to the next ISR member (§5.4); each ISR loses it; the leaders are sent the new
 * states, and `b` a STOP_REPLICA (`delete` 0) for every partition it no longer leads.
 * @returns the plan and the partitions `b` still leads (no other ISR member could take them)
 */
export function decideControlledShutdown(view: ControllerView, b: number): { plan: Plan; remaining: string[] } {
  const plan = new Plan(view);
  const remaining: string[] = [];
  const stops: { key: string; leaderEpoch: number }[] = [];
  for (const key of activeKeys(view)) {
    const { topic, partition } = parsePartitionKey(key);
    const replicas = view.topics.get(topic)?.replicas[partition] ?? [];
    const state = plan.state(key)!;
    if (!replicas.includes(b)) continue;
    if (state.leader === b) {
      const election = electLeader(replicas, state, eligibility(view, key), b);
      if (election.kind !== 'leader' || election.unclean) {
        remaining.push(key);
        continue;
      }
      plan.write(key, nextState(state, view.controllerEpoch, { leader: election.leader, isr: election.isr }), 'controlled-shutdown');
      plan.notifyReplicas(key, b);
    } else if (state.isr.includes(b)) {
      plan.write(key, nextState(state, view.controllerEpoch, { isr: state.isr.filter((x) => x !== b) }));
      plan.notifyReplicas(key, b);
    }
    stops.push({ key, leaderEpoch: plan.state(key)!.leaderEpoch });
  }
  plan.stopReplica({ brokerId: b, delete: false, partitions: stops });
  return { plan, remaining };
}

/** What a preferred-leader election did (§15.1). */
export interface PreferredOutcome {
  readonly moved: { readonly key: string; readonly from: number; readonly to: number }[];
  /** Partitions already led by their first replica. */
  readonly already: number;
  /** Partitions whose first replica is not live or not in the ISR. */
  readonly impossible: string[];
}

/**
 * A preferred-leader election (§15.1) over `keys` (every partition when undefined): a partition
 * moves to its first replica when that one is live, not shutting down and in the ISR
 * (`leaderEpoch` + 1, the ISR unchanged).
 */
export function decidePreferredLeaders(view: ControllerView, keys?: readonly string[]): { plan: Plan; outcome: PreferredOutcome } {
  const plan = new Plan(view);
  const moved: { key: string; from: number; to: number }[] = [];
  const impossible: string[] = [];
  let already = 0;
  for (const key of keys ?? activeKeys(view)) {
    const { topic, partition } = parsePartitionKey(key);
    const state = plan.state(key);
    const preferred = view.topics.get(topic)?.replicas[partition]?.[0];
    if (state === undefined || preferred === undefined || view.deleting.has(topic)) {
      impossible.push(key);
    } else if (state.leader === preferred) {
      already++;
    } else if (canLead(preferred, eligibility(view, key)) && state.isr.includes(preferred)) {
      plan.write(key, nextState(state, view.controllerEpoch, { leader: preferred }), 'preferred');
      plan.notifyReplicas(key);
      moved.push({ key, from: state.leader, to: preferred });
    } else {
      impossible.push(key);
    }
  }
  return { plan, outcome: { moved, already, impossible } };
}

/**
 * A `ReplicaLost` answer from broker `b` for `key`, to a LEADER_AND_ISR of `leaderEpoch` (§5.3,
 * §8.1): `b` leaves the ISR; if it was the leader, the next ISR member leads (an unclean choice,
 * never `b`, when allowed), or the partition goes offline. An answer to an older epoch than the
 * partition's is ignored: the state has moved on since.
 */
export function decideReplicaLost(view: ControllerView, key: string, b: number, leaderEpoch: number): Plan {
  const plan = new Plan(view);
  const state = plan.state(key);
  const { topic, partition } = parsePartitionKey(key);
  const replicas = view.topics.get(topic)?.replicas[partition];
  if (state === undefined || replicas === undefined || view.deleting.has(topic) || state.leaderEpoch !== leaderEpoch) return plan;
  if (state.leader !== b && !state.isr.includes(b)) return plan;
  const isr = state.isr.filter((x) => x !== b);
  if (state.leader !== b) {
    plan.write(key, nextState(state, view.controllerEpoch, { isr }));
  } else {
    const election = electLeader(replicas, { ...state, isr }, eligibility(view, key), b);
    if (election.kind === 'leader') plan.write(key, nextState(state, view.controllerEpoch, { leader: election.leader, isr: election.isr }), 'failure', election.unclean ? isr : undefined);
    else plan.write(key, nextState(state, view.controllerEpoch, { leader: -1, isr: orderedIsr(replicas, isr) }));
  }
  plan.notifyReplicas(key);
  return plan;
}

/**
 * The first step of deleting `topic` (§5.3): every partition's leader set to −1 (fenced,
 * `leaderEpoch` + 1), and a STOP_REPLICA with `delete` 1 to every live replica.
 */
export function decideTopicDeletion(view: ControllerView, topic: string): Plan {
  const plan = new Plan(view);
  const model = view.topics.get(topic);
  if (model === undefined) return plan;
  const byBroker = new Map<number, { key: string; leaderEpoch: number }[]>();
  for (const key of topicPartitionKeys(model)) {
    const state = plan.state(key);
    if (state === undefined) continue;
    if (state.leader !== -1) plan.write(key, nextState(state, view.controllerEpoch, { leader: -1 }));
    const leaderEpoch = plan.state(key)!.leaderEpoch;
    for (const b of model.replicas[parsePartitionKey(key).partition]!) {
      if (!view.live.has(b)) continue;
      let list = byBroker.get(b);
      if (list === undefined) byBroker.set(b, (list = []));
      list.push({ key, leaderEpoch });
    }
  }
  for (const [brokerId, partitions] of byBroker) plan.stopReplica({ brokerId, delete: true, partitions });
  return plan;
}

/** One node to remove when a topic's deletion ends (§5.3), in the order they go. */
export type DeletionStep =
  | { readonly node: 'state'; readonly partition: number }
  | { readonly node: 'partition'; readonly partition: number }
  | { readonly node: 'partitions' }
  | { readonly node: 'definition' }
  | { readonly node: 'delete-request' };

/**
 * The nodes removed once every replica answered its STOP_REPLICA: each partition's state and
 * node, then `partitions`, then the definition and, last, `/admin/delete-topics/<topic>`, so a
 * controller that dies midway leaves the request and the next one finishes the work.
 * `partitions` are the partitions whose nodes exist.
 */
export function deletionSteps(partitions: readonly number[]): DeletionStep[] {
  return [
    ...partitions.flatMap((partition): DeletionStep[] => [
      { node: 'state', partition },
      { node: 'partition', partition },
    ]),
    { node: 'partitions' },
    { node: 'definition' },
    { node: 'delete-request' },
  ];
}
