/**
 * A cluster of brokers with Kafka listeners and a replicated topic (docs/replication.md), for the
 * Kafka listener's tests of replicated topics (docs/kafka-protocol.md, "Partitions"): brokers
 * 0..n-1 as child processes over the real ZooKeeper (a fresh chroot), each with a properties
 * file; topics created with `klog topics --create`; partition states read from ZooKeeper.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ReplicatedTopicRegistry, ZkClient, type PartitionState } from '@klog/zk-registry';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { Broker, klog, waitFor } from './harness.js';

/** Settings of a {@link KafkaReplicatedCluster}. */
export interface KafkaClusterSettings {
  readonly brokers: number;
  /** ZooKeeper session timeout of the brokers, ms. */
  readonly sessionTimeoutMs: number;
  /** Broker properties (docs/replication.md §15.4). */
  readonly properties?: Readonly<Record<string, string | number>>;
}

/** Brokers 0..n-1 with Kafka listeners over one ZooKeeper chroot. */
export class KafkaReplicatedCluster {
  readonly brokers: Broker[] = [];
  readonly connect = testConnectString('klog-kafka-replicated');
  private readonly root = mkdtempSync(join(tmpdir(), 'klog-kafka-replicated-'));
  private zk!: ZkClient;
  private registry!: ReplicatedTopicRegistry;

  constructor(readonly settings: KafkaClusterSettings) {}

  /** Starts the brokers one after the other. */
  async start(): Promise<this> {
    await assertZooKeeperRunning();
    this.zk = await ZkClient.connect(this.connect);
    this.registry = new ReplicatedTopicRegistry(this.zk);
    const props = Object.entries(this.settings.properties ?? {}).map(([k, v]) => `${k}=${String(v)}`);
    writeFileSync(join(this.root, 'broker.properties'), `${props.join('\n')}\n`);
    for (let id = 0; id < this.settings.brokers; id++) this.brokers.push(await Broker.start(this.args(id), mkdtempSync(join(this.root, `broker-${id}-`))));
    return this;
  }

  private args(id: number): string[] {
    return ['--zookeeper', this.connect, '--broker-id', String(id), '--config', join(this.root, 'broker.properties'), '--zk-session-timeout-ms', String(this.settings.sessionTimeoutMs)];
  }

  /** Creates a replicated topic with `klog topics --create` and waits until every ISR is full. */
  async createTopic(topic: string, partitions: number, replicationFactor: number, minInsyncReplicas: number): Promise<void> {
    const args = ['topics', '--zookeeper', this.connect, '--create', '--topic', topic, '--partitions', String(partitions), '--replication-factor', String(replicationFactor)];
    const r = await klog([...args, '--min-insync-replicas', String(minInsyncReplicas)]);
    if (r.code !== 0) throw new Error(`klog topics --create ${topic} exited with ${r.code}: ${r.stderr}`);
    await this.waitForIsr(topic, partitions, replicationFactor);
  }

  /** The partition's state in ZooKeeper, undefined while it has none. */
  async state(topic: string, partition: number): Promise<PartitionState | undefined> {
    return (await this.registry.readPartitionState(topic, partition))?.state;
  }

  /** The replica list of every partition of `topic` (preferred leader first), from its definition. */
  async replicas(topic: string): Promise<readonly (readonly number[])[]> {
    const d = await this.registry.readDefinition(topic);
    if (d === undefined) throw new Error(`${topic} has no definition`);
    return d.partitions;
  }

  /** Waits until every partition of `topic` has a leader that runs and an ISR of `isrSize`. */
  async waitForIsr(topic: string, partitions: number, isrSize: number, timeoutMs = 60_000): Promise<PartitionState[]> {
    let states: (PartitionState | undefined)[] = [];
    await waitFor(
      `every ISR of ${topic} at ${isrSize} (last seen ${JSON.stringify(states)})`,
      async () => {
        states = await Promise.all(Array.from({ length: partitions }, (_, p) => this.state(topic, p)));
        return states.every((s) => s !== undefined && s.leader >= 0 && this.brokers[s.leader]!.proc.exitCode === null && s.isr.length === isrSize);
      },
      timeoutMs,
    );
    return states as PartitionState[];
  }

  /** Broker `id`'s Kafka listener, `host:port`. */
  kafka(id: number): string {
    return this.brokers[id]!.kafka;
  }

  /** Every running broker's Kafka listener, for a client's bootstrap list. */
  get bootstrap(): string[] {
    return this.brokers.filter((b) => b.proc.exitCode === null && b.proc.signalCode === null).map((b) => b.kafka);
  }

  /** kill -9 of broker `id`: its ZooKeeper registrations stay until its session times out. */
  async kill9(id: number): Promise<void> {
    const b = this.brokers[id]!;
    if (b.proc.exitCode !== null || b.proc.signalCode !== null) return;
    b.proc.kill('SIGKILL');
    await b.exited;
  }

  /** Starts broker `id` again on its log dir. */
  async restart(id: number): Promise<void> {
    this.brokers[id] = await Broker.start(this.args(id), this.brokers[id]!.logDir);
  }

  /** Kills the brokers (frozen ones too), removes their log dirs and the chroot. */
  async close(): Promise<void> {
    for (let id = 0; id < this.brokers.length; id++) await this.kill9(id);
    await this.zk?.close();
    rmSync(this.root, { recursive: true, force: true });
    await removeChroot(this.connect);
  }
}
