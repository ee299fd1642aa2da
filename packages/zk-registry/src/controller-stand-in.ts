/**
 * For tests (exported by `@klog/zk-registry/testing`): the controller's ZooKeeper side, reduced
 * to what the client and CLI tests need without brokers that lead and follow (docs/replication.md §5.3): it creates the partition states of a
 * new replicated topic (first live replica as leader), removes a topic whose deletion is asked,
 * and answers a preferred-leader election. Each write is one multi, as the controller's are; the
 * tests also move leaders with {@link ControllerStandIn.setLeader}.
 */
import { AdminRequestRegistry } from './admin-requests.js';
import { BrokerRegistry } from './broker-registry.js';
import { createPartitionStateOps, removePartitionStateOps, removeTopicOps, ReplicatedTopicRegistry, setPartitionStateOp } from './replicated-topics.js';
import type { PartitionState } from './replicated-values.js';
import type { ZkClient } from './zk-client.js';

/** Plays the controller over `zk` until stopped (polls every 50 ms). */
export class ControllerStandIn {
  private readonly topics: ReplicatedTopicRegistry;
  private readonly requests: AdminRequestRegistry;
  private readonly brokers: BrokerRegistry;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  /** Whether the loop answers requests (a test turns it off to see the admin time out). */
  active = true;

  constructor(private readonly zk: ZkClient) {
    this.topics = new ReplicatedTopicRegistry(zk);
    this.requests = new AdminRequestRegistry(zk);
    this.brokers = new BrokerRegistry(zk);
  }

  /** Starts the loop; returns this. */
  start(): this {
    const tick = (): void => {
      this.running = this.round().catch(() => {}).finally(() => {
        if (this.timer !== undefined) this.timer = setTimeout(tick, 50);
      });
    };
    this.timer = setTimeout(tick, 0);
    return this;
  }

  /** Stops the loop and waits for its round in progress. */
  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** Writes a partition's state as the controller would: `leaderEpoch` + 1. */
  async setLeader(topic: string, partition: number, leader: number, isr: readonly number[]): Promise<void> {
    const node = (await this.topics.readPartitionState(topic, partition))!;
    const state: PartitionState = { ...node.state, leader, isr, leaderEpoch: node.state.leaderEpoch + 1, isNew: false };
    await this.zk.multi([setPartitionStateOp(topic, partition, state, node.stateVersion)]);
  }

  private async round(): Promise<void> {
    if (!this.active) return;
    const live = new Set((await this.brokers.listBrokers()).map((b) => b.id));
    for (const [topic, definition] of await this.topics.readDefinitions()) {
      if ((await this.topics.listPartitions(topic)).length > 0) continue;
      const entries = definition.partitions.map((replicas, partition) => {
        const leader = replicas.find((b) => live.has(b)) ?? -1;
        return { partition, state: { leader, leaderEpoch: 0, isr: leader < 0 ? [] : [leader], controllerEpoch: 1, isNew: true } };
      });
      await this.zk.multi(createPartitionStateOps(topic, entries, { createPartitionsNode: true }));
    }
    for (const topic of await this.requests.listTopicDeletions()) {
      const partitions = await this.topics.listPartitions(topic);
      await this.zk.multi([
        ...partitions.flatMap((p) => removePartitionStateOps(topic, p)),
        ...removeTopicOps(topic, { hasPartitionsNode: partitions.length > 0 }),
        this.requests.removeTopicDeletionOp(topic),
      ]);
    }
    const election = await this.requests.readPreferredLeaderElection();
    if (election?.request) {
      const ops = [];
      for (const [topic, definition] of await this.topics.readDefinitions()) {
        for (let p = 0; p < definition.partitions.length; p++) {
          if (!election.request.all && !election.request.partitions.some((r) => r.topic === topic && r.partition === p)) continue;
          const preferred = definition.partitions[p]![0]!;
          const node = await this.topics.readPartitionState(topic, p);
          if (!node || node.state.leader === preferred || !node.state.isr.includes(preferred) || !live.has(preferred)) continue;
          ops.push(setPartitionStateOp(topic, p, { ...node.state, leader: preferred, leaderEpoch: node.state.leaderEpoch + 1 }, node.stateVersion));
        }
      }
      await this.zk.multi([...ops, this.requests.removePreferredLeaderElectionOp(election.version)]);
    }
  }
}
