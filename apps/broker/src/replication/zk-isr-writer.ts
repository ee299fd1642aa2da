/**
 * The leader's conditional ISR writes (docs/replication.md §3.2, 2) through packages/zk-registry's
 * `ReplicatedTopicRegistry.updateIsrAsLeader`: the partition state keeps its leader, leader epoch
 * and controller epoch, and gets the new ISR and `new` false, at the version the leader knows.
 */
import { ReplicatedTopicRegistry, type PartitionStateNode, type ZkClient } from '@klog/zk-registry';
import type { Logger } from 'pino';
import type { IsrWriter } from './partition.js';

/** An {@link IsrWriter} over the broker's ZooKeeper session. */
export class ZkIsrWriter implements IsrWriter {
  /** The state node each partition's last write left, to write from next (its controller epoch among the rest). */
  readonly #known = new Map<string, PartitionStateNode>();

  /** @param zk the broker's ZooKeeper client, once it has joined the cluster (undefined before) */
  constructor(
    private readonly zk: () => ZkClient | undefined,
    private readonly logger: Logger,
  ) {}

  async writeIsr(topic: string, partition: number, leader: number, leaderEpoch: number, isr: readonly number[], version: number): Promise<number | 'fenced'> {
    const zk = this.zk();
    if (zk === undefined) throw new Error('not connected to ZooKeeper yet');
    const registry = new ReplicatedTopicRegistry(zk, { logger: this.logger });
    const key = `${topic}\u0000${partition}`;
    let known = this.#known.get(key);
    if (known === undefined || known.stateVersion !== version || known.state.leaderEpoch !== leaderEpoch) {
      // The state as the controller wrote it (its controller epoch is kept by the leader's write).
      known = await registry.readPartitionState(topic, partition);
      if (known === undefined || known.state.leader !== leader || known.state.leaderEpoch !== leaderEpoch) return 'fenced';
    }
    const r = await registry.updateIsrAsLeader(topic, partition, known, { isr, isNew: false });
    if (r.outcome === 'fenced') {
      this.#known.delete(key);
      return 'fenced';
    }
    this.#known.set(key, r.node);
    return r.node.stateVersion;
  }
}
