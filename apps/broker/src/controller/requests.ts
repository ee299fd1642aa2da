/**
 * The bodies of the controller's requests (docs/replication.md §6.1, §6.2), built from its view:
 * pure, no I/O. request-sender.ts encodes and sends them.
 */
import type { BrokerAddress, LeaderAndIsrRequest, PartitionState, StopReplicaRequest } from '@klog/protocol';
import type { StopReplicaOrder } from './plan.js';
import { parsePartitionKey, type ControllerView } from './view.js';

/** One partition of a LEADER_AND_ISR (§6.1). */
export type LeaderAndIsrPartition = PartitionState;
/** A broker address in a LEADER_AND_ISR. */
export type LeaderAddress = BrokerAddress;
/** A LEADER_AND_ISR (type 16) body. */
export type LeaderAndIsrBody = LeaderAndIsrRequest;
/** A STOP_REPLICA (type 17) body. */
export type StopReplicaBody = StopReplicaRequest;

/** The LEADER_AND_ISR entry of `key` as the view holds it, or undefined when the view has no such partition. */
export function leaderAndIsrPartition(view: ControllerView, key: string): LeaderAndIsrPartition | undefined {
  const { topic, partition } = parsePartitionKey(key);
  const model = view.topics.get(topic);
  const replicas = model?.replicas[partition];
  const p = view.partitions.get(key);
  if (model === undefined || replicas === undefined || p === undefined) return undefined;
  return {
    topic,
    topicId: model.id,
    partition,
    leader: p.state.leader,
    leaderEpoch: p.state.leaderEpoch,
    stateVersion: p.stateVersion,
    minInsyncReplicas: model.minInsyncReplicas ?? view.defaultMinInsyncReplicas,
    isNew: p.state.isNew,
    replicas,
    isr: p.state.isr,
  };
}

/** The addresses of the live leaders of `partitions`, by broker id. */
export function leaderAddresses(view: ControllerView, partitions: readonly LeaderAndIsrPartition[]): LeaderAddress[] {
  const ids = [...new Set(partitions.map((p) => p.leader))].filter((b) => view.live.has(b)).sort((a, b) => a - b);
  return ids.map((b) => {
    const { host, port } = view.live.get(b)!;
    return { brokerId: b, host, port };
  });
}

/** A LEADER_AND_ISR body for `keys` (those the view no longer has are left out). */
export function leaderAndIsrBody(view: ControllerView, keys: readonly string[]): LeaderAndIsrBody {
  const partitions = keys.map((k) => leaderAndIsrPartition(view, k)).filter((p): p is LeaderAndIsrPartition => p !== undefined);
  return { controllerId: view.controllerId, controllerEpoch: view.controllerEpoch, partitions, brokers: leaderAddresses(view, partitions) };
}

/** A STOP_REPLICA body for an order of a plan. */
export function stopReplicaBody(view: ControllerView, order: StopReplicaOrder): StopReplicaBody {
  return {
    controllerId: view.controllerId,
    controllerEpoch: view.controllerEpoch,
    delete: order.delete,
    partitions: order.partitions.map(({ key, leaderEpoch }) => ({ ...parsePartitionKey(key), leaderEpoch })),
  };
}
