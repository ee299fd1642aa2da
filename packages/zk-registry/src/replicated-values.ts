/**
 * The two values of a replicated topic in ZooKeeper (docs/replication.md §3.1), as JSON: the
 * topic definition (`/brokers/topics/<topic>`) and the partition state
 * (`/brokers/topics/<topic>/partitions/<p>/state`). Pure: encoding and strict parsing only; the
 * reads and writes are in replicated-topics.ts.
 *
 * Parsing is strict: a field of the wrong type or range refuses the whole value with
 * {@link InvalidZkValueError} (never guessed); fields this klog does not know are ignored.
 */
import { randomBytes } from 'node:crypto';
import { ZkError } from './errors.js';
import { JsonFields } from './json-fields.js';
import { checkReplicaAssignment, InvalidReplicaAssignmentError, maxPartitions, type ReplicaAssignment } from './replica-assignment.js';

/** Largest int32: the bound of epochs and partition numbers on the wire (docs/format.md §1). */
const maxInt32 = 0x7fffffff;

/** The topic id: 64 random bits as 16 lowercase hex digits (docs/replication.md §3.1). */
const TOPIC_ID = /^[0-9a-f]{16}$/;

/** A replicated topic's definition, written once at creation (docs/replication.md §3.1). */
export interface TopicDefinition {
  /** The topic id, 16 hex digits: tells this topic's replicas from a deleted namesake's (§8.1). */
  readonly id: string;
  /** Replica list per partition, index = partition number, preferred leader first (§4). */
  readonly partitions: ReplicaAssignment;
  /** The topic's `min.insync.replicas`, 1..R (§11); undefined: the brokers' default. */
  readonly minInsyncReplicas?: number;
  /** The topic's `unclean.leader.election.enable` (§12); undefined: the controller's setting. */
  readonly uncleanLeaderElection?: boolean;
  /** When the topic was created, ms since the epoch. */
  readonly createdMs: number;
}

/** A partition's state, one per partition of a replicated topic (docs/replication.md §3.1). */
export interface PartitionState {
  /** Broker id of the leader, or -1 while the partition is offline. */
  readonly leader: number;
  /** Bumped by every write of the controller; the leader's own ISR writes keep it. 0..2^31-1. */
  readonly leaderEpoch: number;
  /** Broker ids of the ISR, in replica-list order. */
  readonly isr: readonly number[];
  /** Epoch of the controller that last wrote the state (the leader's writes keep it). */
  readonly controllerEpoch: number;
  /** JSON `new`: true until the first leader has created its replica log (§8.1). */
  readonly isNew: boolean;
}

/** A partition state as read, with the ZooKeeper version to write it at (the `stateVersion` of §6.1). */
export interface PartitionStateNode {
  readonly state: PartitionState;
  /** The data version of the state node. */
  readonly stateVersion: number;
}

/** 16 random hex digits: a new topic id. */
export function newTopicId(): string {
  return randomBytes(8).toString('hex');
}

/**
 * Checks a definition before it is written: the id, the replica lists (checkReplicaAssignment),
 * `minInsyncReplicas` in 1..R. Throws {@link InvalidReplicaAssignmentError} for bad lists,
 * {@link ZkError} otherwise.
 */
export function checkTopicDefinition(definition: TopicDefinition): void {
  if (!TOPIC_ID.test(definition.id)) throw new ZkError(`invalid topic id ${JSON.stringify(definition.id)}: must be 16 lowercase hex digits`);
  const factor = checkReplicaAssignment(definition.partitions);
  const m = definition.minInsyncReplicas;
  if (m !== undefined && (!Number.isSafeInteger(m) || m < 1 || m > factor)) {
    throw new ZkError(`invalid minInsyncReplicas ${m}: must be 1..${factor} (the replication factor)`);
  }
  if (!Number.isSafeInteger(definition.createdMs) || definition.createdMs < 0) throw new ZkError(`invalid createdMs ${definition.createdMs}`);
}

/** The JSON of a topic definition (§3.1), `version` 1. Throws as {@link checkTopicDefinition}. */
export function encodeTopicDefinition(definition: TopicDefinition): string {
  checkTopicDefinition(definition);
  const partitions: Record<string, readonly number[]> = {};
  definition.partitions.forEach((replicas, p) => (partitions[String(p)] = replicas));
  return JSON.stringify({
    version: 1,
    id: definition.id,
    partitions,
    ...(definition.minInsyncReplicas === undefined ? {} : { minInsyncReplicas: definition.minInsyncReplicas }),
    ...(definition.uncleanLeaderElection === undefined ? {} : { uncleanLeaderElection: definition.uncleanLeaderElection }),
    createdMs: definition.createdMs,
  });
}

/**
 * Parses a topic definition (§3.1). `path` is for the error. The partition keys must be exactly
 * `0..N-1`; the lists as {@link checkReplicaAssignment} wants them.
 * @throws InvalidZkValueError naming what is wrong
 */
export function parseTopicDefinition(text: string, path: string): TopicDefinition {
  const f: JsonFields = JsonFields.parse('topic definition', path, text);
  f.version1();
  const id = f.string('id', TOPIC_ID, '16 lowercase hex digits');
  const raw = f.raw('partitions');
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) f.fail(raw === undefined ? 'no "partitions"' : '"partitions" must be an object');
  const entries = Object.entries(raw as Record<string, unknown>);
  if (entries.length < 1 || entries.length > maxPartitions) f.fail(`"partitions" must list 1..${maxPartitions} partitions`);
  const partitions: number[][] = new Array<number[]>(entries.length);
  for (const [key, replicas] of entries) {
    const p = /^(0|[1-9]\d{0,9})$/.test(key) ? Number(key) : NaN;
    if (!(p >= 0 && p < entries.length)) f.fail(`"partitions" keys must be 0..${entries.length - 1}, got ${JSON.stringify(key)}`);
    partitions[p] = f.brokerIds(`partitions.${key}`, replicas);
  }
  let factor: number;
  try {
    factor = checkReplicaAssignment(partitions);
  } catch (error) {
    if (error instanceof InvalidReplicaAssignmentError) f.fail(error.message);
    throw error;
  }
  const minInsyncReplicas = f.has('minInsyncReplicas') ? f.int('minInsyncReplicas', 1, factor) : undefined;
  const uncleanLeaderElection = f.has('uncleanLeaderElection') ? f.bool('uncleanLeaderElection') : undefined;
  const createdMs = f.int('createdMs', 0);
  return {
    id,
    partitions,
    ...(minInsyncReplicas === undefined ? {} : { minInsyncReplicas }),
    ...(uncleanLeaderElection === undefined ? {} : { uncleanLeaderElection }),
    createdMs,
  };
}

/** Checks a partition state before it is written. Throws {@link ZkError}. */
export function checkPartitionState(state: PartitionState): void {
  const intIn = (name: string, v: number, min: number): void => {
    if (!Number.isSafeInteger(v) || v < min || v > maxInt32) throw new ZkError(`invalid partition state: ${name} ${v} must be an integer in ${min}..${maxInt32}`);
  };
  intIn('leader', state.leader, -1);
  intIn('leaderEpoch', state.leaderEpoch, 0);
  intIn('controllerEpoch', state.controllerEpoch, 0);
  for (const id of state.isr) intIn('isr member', id, 0);
  if (new Set(state.isr).size !== state.isr.length) throw new ZkError(`invalid partition state: isr names a broker twice: ${state.isr.join(',')}`);
  if (typeof state.isNew !== 'boolean') throw new ZkError('invalid partition state: isNew must be a boolean');
}

/** The JSON of a partition state (§3.1), `version` 1 (`isNew` as `new`). Throws as {@link checkPartitionState}. */
export function encodePartitionState(state: PartitionState): string {
  checkPartitionState(state);
  const { leader, leaderEpoch, isr, controllerEpoch } = state;
  return JSON.stringify({ version: 1, leader, leaderEpoch, isr, controllerEpoch, new: state.isNew });
}

/**
 * Parses a partition state (§3.1). `path` is for the error.
 * @throws InvalidZkValueError naming what is wrong
 */
export function parsePartitionState(text: string, path: string): PartitionState {
  const f: JsonFields = JsonFields.parse('partition state', path, text);
  f.version1();
  return {
    leader: f.int('leader', -1, maxInt32),
    leaderEpoch: f.int('leaderEpoch', 0, maxInt32),
    isr: f.brokerIds('isr'),
    controllerEpoch: f.int('controllerEpoch', 0, maxInt32),
    isNew: f.bool('new'),
  };
}

/**
 * Whether the data of `/brokers/topics/<topic>` makes it a replicated topic: a paper topic's
 * node is created empty and stays so (docs/replication.md §3), a replicated topic's holds its
 * definition. A non-empty value that does not parse still is not a paper topic.
 */
export function holdsTopicDefinition(data: Buffer): boolean {
  return data.length > 0;
}
