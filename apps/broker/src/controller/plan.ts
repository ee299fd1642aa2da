/**
 * A plan: what the controller decided for one event (docs/replication.md §5.3), before any
 * I/O. The decision functions (decisions.ts) build it over a {@link ControllerView}: the
 * partition states to write (each at the version it was read), the partitions each broker
 * must be sent in a LEADER_AND_ISR once the writes are done, and the STOP_REPLICA requests.
 */
import type { Eligibility } from './election.js';
import { parsePartitionKey, replicasOf, type ControllerView, type PartitionStateValue } from './view.js';

/** Why a leader changed (`klog_leader_elections_total{reason}`, docs/replication.md §15.3). */
export type ElectionReason = 'failure' | 'controlled-shutdown' | 'preferred' | 'new-topic';

/** One partition state to write. */
export interface StateWrite {
  readonly key: string;
  readonly state: PartitionStateValue;
  /** The version the node must be at; −1: the node does not exist yet and is created. */
  readonly expectedVersion: number;
  /** Set when the write changes the leader to a broker (an election). */
  readonly reason?: ElectionReason;
  /** Set for an unclean election (§12): the ISR before it. */
  readonly uncleanFromIsr?: readonly number[];
}

/** A STOP_REPLICA to send (§6.2). */
export interface StopReplicaOrder {
  readonly brokerId: number;
  readonly delete: boolean;
  /** Partition keys with the leader epoch each was decided at. */
  readonly partitions: readonly { readonly key: string; readonly leaderEpoch: number }[];
}

/** The working copy of one event's decisions. */
export class Plan {
  readonly #writes = new Map<string, StateWrite>();
  readonly #notify = new Map<number, Set<string>>();
  readonly #stops: StopReplicaOrder[] = [];

  constructor(readonly view: ControllerView) {}

  /** The state of `key` as this plan has it (its own write, else the view's); undefined when the partition has none. */
  state(key: string): PartitionStateValue | undefined {
    return this.#writes.get(key)?.state ?? this.view.partitions.get(key)?.state;
  }

  /**
   * Writes `state` for `key`. Several writes to one partition in one plan become one write (at
   * the version of the view, with the epoch of the first: one controller write, one bump), keeping
   * the first write's election reason unless a later one names its own.
   */
  write(key: string, state: PartitionStateValue, reason?: ElectionReason, uncleanFromIsr?: readonly number[]): void {
    const earlier = this.#writes.get(key);
    const model = this.view.partitions.get(key);
    const merged = earlier === undefined ? state : { ...state, leaderEpoch: earlier.state.leaderEpoch };
    const why = reason ?? earlier?.reason;
    const unclean = uncleanFromIsr ?? earlier?.uncleanFromIsr;
    this.#writes.set(key, {
      key,
      state: merged,
      expectedVersion: model?.stateVersion ?? -1,
      ...(why !== undefined ? { reason: why } : {}),
      ...(unclean !== undefined ? { uncleanFromIsr: unclean } : {}),
    });
  }

  /** Sends `key` to `brokerId` in the LEADER_AND_ISR that follows the writes. */
  notify(brokerId: number, key: string): void {
    let keys = this.#notify.get(brokerId);
    if (keys === undefined) this.#notify.set(brokerId, (keys = new Set()));
    keys.add(key);
  }

  /** Sends `key` to each of its live replicas but `except`. */
  notifyReplicas(key: string, except?: number): void {
    for (const b of replicasOf(this.view, key) ?? []) if (b !== except && this.view.live.has(b)) this.notify(b, key);
  }

  /** Queues a STOP_REPLICA. */
  stopReplica(order: StopReplicaOrder): void {
    if (order.partitions.length > 0) this.#stops.push(order);
  }

  /** The writes, in the order first made. */
  get writes(): StateWrite[] {
    return [...this.#writes.values()];
  }

  /** Broker id → partition keys of its LEADER_AND_ISR; brokers no longer live are left out. */
  get leaderAndIsr(): Map<number, string[]> {
    const out = new Map<number, string[]>();
    for (const [b, keys] of this.#notify) if (this.view.live.has(b) && keys.size > 0) out.set(b, [...keys]);
    return out;
  }

  /** The STOP_REPLICA requests, in order. */
  get stopReplicas(): StopReplicaOrder[] {
    return [...this.#stops];
  }

  /** True when the plan neither writes nor sends anything. */
  get empty(): boolean {
    return this.#writes.size === 0 && this.leaderAndIsr.size === 0 && this.#stops.length === 0;
  }
}

/** The {@link Eligibility} of the view for the topic of `key`, with `exclude` counted as not live. */
export function eligibility(view: ControllerView, key: string, exclude: ReadonlySet<number> = new Set()): Eligibility {
  const topic = view.topics.get(parsePartitionKey(key).topic);
  return {
    isLive: (b) => view.live.has(b) && !exclude.has(b),
    isShuttingDown: (b) => view.shuttingDown.has(b),
    unclean: topic?.uncleanLeaderElection ?? view.uncleanLeaderElection,
  };
}
