/**
 * The controller's view read from ZooKeeper (docs/replication.md §5.3, "on becoming
 * controller"): the live brokers with their broker epochs, every topic definition, every
 * partition state with its version. {@link MutableView} is the one {@link ControllerView} the
 * controller keeps and changes from its event queue.
 */
import { BrokerRegistry, ReplicatedTopicRegistry, type TopicDefinition, type ZkClient } from '@klog/zk-registry';
import type { ControllerView, LiveBroker, PartitionModel, TopicModel } from './view.js';
import { partitionKey } from './view.js';

/** The controller's view, changed only by the controller's events. */
export class MutableView implements ControllerView {
  live = new Map<number, LiveBroker>();
  readonly shuttingDown = new Set<number>();
  readonly topics = new Map<string, TopicModel>();
  readonly partitions = new Map<string, PartitionModel>();
  readonly deleting = new Set<string>();
  /** Topics whose `partitions` node exists. */
  readonly partitionsNode = new Set<string>();

  constructor(
    readonly controllerId: number,
    readonly controllerEpoch: number,
    readonly uncleanLeaderElection: boolean,
    readonly defaultMinInsyncReplicas: number,
  ) {}

  /** The live brokers' epochs, by id. */
  liveEpochs(): Map<number, number> {
    return new Map([...this.live].map(([id, b]) => [id, b.epoch]));
  }

  /** Adds or replaces a topic (a definition read), keeping the states it has. */
  setTopic(topic: string, definition: TopicDefinition): void {
    this.topics.set(topic, {
      topic,
      id: definition.id,
      replicas: definition.partitions,
      minInsyncReplicas: definition.minInsyncReplicas,
      uncleanLeaderElection: definition.uncleanLeaderElection,
    });
  }

  /** Forgets a topic and its partition states. */
  dropTopic(topic: string): void {
    const model = this.topics.get(topic);
    this.topics.delete(topic);
    this.deleting.delete(topic);
    this.partitionsNode.delete(topic);
    if (model !== undefined) model.replicas.forEach((_, p) => this.partitions.delete(partitionKey(topic, p)));
  }
}

/** Reads the live brokers with their broker epochs. */
export async function readLiveBrokers(brokers: BrokerRegistry): Promise<Map<number, LiveBroker>> {
  const out = new Map<number, LiveBroker>();
  for (const b of await brokers.listRegisteredBrokers()) out.set(b.id, { id: b.id, epoch: b.brokerEpoch, host: b.host, port: b.port });
  return out;
}

/** Reads `topic`'s partition states into `view` (replacing those it had). */
export async function readTopicStates(topics: ReplicatedTopicRegistry, view: MutableView, topic: string): Promise<void> {
  const model = view.topics.get(topic);
  if (model === undefined) return;
  const partitions = await topics.listPartitions(topic);
  if (partitions.length > 0) view.partitionsNode.add(topic);
  const states = await topics.readPartitionStates(topic);
  model.replicas.forEach((_, p) => {
    const node = states.get(p);
    if (node === undefined) view.partitions.delete(partitionKey(topic, p));
    else view.partitions.set(partitionKey(topic, p), { state: node.state, stateVersion: node.stateVersion });
  });
}

/** Reads everything the controller starts from into `view`. */
export async function loadView(zk: ZkClient, view: MutableView): Promise<void> {
  const brokers = new BrokerRegistry(zk);
  const topics = new ReplicatedTopicRegistry(zk);
  view.live = await readLiveBrokers(brokers);
  for (const [topic, definition] of await topics.readDefinitions()) {
    view.setTopic(topic, definition);
    await readTopicStates(topics, view, topic);
  }
}
