/**
 * What the controller knows of the cluster (docs/replication.md §5.3): the live brokers with
 * their broker epochs, the brokers shutting down, every replicated topic's definition and every
 * partition state with the ZooKeeper version it was read at. The decision functions
 * (decisions.ts) read it and never write it; the controller (controller.ts) changes it only
 * from its event queue, after a write to ZooKeeper succeeded.
 */
import type { PartitionState } from '@klog/zk-registry';

/** A partition state (docs/replication.md §3.1), as zk-registry reads and writes it. */
export type PartitionStateValue = PartitionState;

/** A live broker: `/brokers/ids/<id>`, with its broker epoch (the node's `czxid`). */
export interface LiveBroker {
  readonly id: number;
  /** The `czxid` of the registration: a new value each time the broker registers. */
  readonly epoch: number;
  readonly host: string;
  readonly port: number;
}

/** A replicated topic's definition (docs/replication.md §3.1), as the controller uses it. */
export interface TopicModel {
  readonly topic: string;
  /** The topic id, 16 hex digits. */
  readonly id: string;
  /** Replica list per partition (index = partition), preferred leader first. */
  readonly replicas: readonly (readonly number[])[];
  /** `min.insync.replicas` of the topic; undefined: the brokers' default. */
  readonly minInsyncReplicas?: number | undefined;
  /** Per-topic unclean election (§12); undefined: the controller's setting. */
  readonly uncleanLeaderElection?: boolean | undefined;
}

/** One partition's state as last read or written, with its node version. */
export interface PartitionModel {
  readonly state: PartitionStateValue;
  /** ZooKeeper data version of `…/partitions/<p>/state` (the condition of the next write). */
  readonly stateVersion: number;
}

/** The controller's view, read by the decision functions. */
export interface ControllerView {
  /** This controller's broker id and epoch. */
  readonly controllerId: number;
  readonly controllerEpoch: number;
  /** Live brokers by id. */
  readonly live: ReadonlyMap<number, LiveBroker>;
  /** Brokers in controlled shutdown (§15.2): never elected, taken out of ISRs. */
  readonly shuttingDown: ReadonlySet<number>;
  /** Replicated topics by name. */
  readonly topics: ReadonlyMap<string, TopicModel>;
  /** Partition states by {@link partitionKey}; a topic whose partitions are not created yet has none. */
  readonly partitions: ReadonlyMap<string, PartitionModel>;
  /** Topics being deleted (`/admin/delete-topics/<topic>`): no elections, no LEADER_AND_ISR. */
  readonly deleting: ReadonlySet<string>;
  /** `unclean.leader.election.enable` of the controller (§12). */
  readonly uncleanLeaderElection: boolean;
  /** The brokers' default `min.insync.replicas` (§11), for topics without their own. */
  readonly defaultMinInsyncReplicas: number;
}

/** `<topic>/<partition>`: the key of a partition in the view's maps. */
export function partitionKey(topic: string, partition: number): string {
  return `${topic}/${partition}`;
}

/** The topic and partition of a {@link partitionKey}. */
export function parsePartitionKey(key: string): { topic: string; partition: number } {
  const slash = key.lastIndexOf('/');
  return { topic: key.slice(0, slash), partition: Number(key.slice(slash + 1)) };
}

/** Every partition key of `topic`, `0..N-1`. */
export function topicPartitionKeys(topic: TopicModel): string[] {
  return topic.replicas.map((_, p) => partitionKey(topic.topic, p));
}

/** The replica list of a partition, or undefined when the view does not know the topic or partition. */
export function replicasOf(view: ControllerView, key: string): readonly number[] | undefined {
  const { topic, partition } = parsePartitionKey(key);
  return view.topics.get(topic)?.replicas[partition];
}

/** Partitions of the view with no leader (`klog_offline_partitions`), topics being deleted left out. */
export function offlinePartitionCount(view: ControllerView): number {
  let n = 0;
  for (const [key, { state }] of view.partitions) {
    if (state.leader === -1 && !view.deleting.has(parsePartitionKey(key).topic)) n++;
  }
  return n;
}
