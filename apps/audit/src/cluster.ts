/**
 * One cluster as the audit sees it: its name in the report, its ZooKeeper registry (docs/design.md §4)
 * and a connection to each broker, and the one read the audit makes of a partition: every
 * message between two offsets, fetched in 1 MiB chunks (docs/design.md §3). A replicated topic's
 * partitions are `0..N-1` (docs/replication.md §14), `brokerId` −1, read from their leaders.
 */
import { groupPartition, replicatedBrokerId, SimpleConsumer, type ConsumedMessage } from '@klog/client';
import type { Logger } from '@klog/logger';
import { type BrokerPartition, BrokerRegistry, groupPartitionName, parseConnectString, ReplicatedTopicRegistry, ZkClient } from '@klog/zk-registry';

/** A `--zookeeper` value: `[name=]host:port[,host:port...][/chroot]`. */
export interface ClusterSpec {
  /** The name in the report. */
  readonly name: string;
  /** The ZooKeeper connect string. */
  readonly connect: string;
}

/**
 * Parses `--zookeeper` values in flow order; an unnamed cluster is `cluster<i>` (from 1).
 * @throws Error naming the value when a connect string is malformed, a name is not
 *   `[A-Za-z0-9._-]+`, or two clusters share a name
 */
export function parseClusterSpecs(values: readonly string[]): ClusterSpec[] {
  const specs = values.map((v, i) => {
    const m = /^([A-Za-z0-9._-]+)=(.+)$/.exec(v);
    const spec = m ? { name: m[1]!, connect: m[2]! } : { name: `cluster${i + 1}`, connect: v };
    if (!m && /^[^:/,]*=/.test(v)) throw new Error(`--zookeeper ${JSON.stringify(v)}: a cluster name is letters, digits, '.', '_' or '-'`);
    try {
      parseConnectString(spec.connect);
    } catch (err) {
      throw new Error(`--zookeeper ${JSON.stringify(v)}: ${(err as Error).message}`, { cause: err });
    }
    return spec;
  });
  const names = specs.map((s) => s.name);
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice !== undefined) throw new Error(`--zookeeper: two clusters are named ${twice}`);
  return specs;
}

/**
 * A partition of a topic: broker id and partition number on it, or, for a replicated topic,
 * `brokerId` −1 (`replicatedBrokerId` of @klog/client) and the partition number `0..N-1`.
 */
export interface TopicPartition extends BrokerPartition {
  readonly topic: string;
}

/** A partition's name in ZooKeeper and in the report: `<brokerId>-<partition>`, or `<partition>` for a replicated topic's (docs/replication.md §14). */
export function partitionLabel(p: BrokerPartition): string {
  return groupPartitionName(groupPartition(p));
}

/** An open cluster: ZooKeeper session, registry, broker connections (opened on first use). */
export class Cluster {
  readonly registry: BrokerRegistry;
  readonly replicated: ReplicatedTopicRegistry;
  private readonly consumers = new Map<number, SimpleConsumer>();

  private constructor(
    readonly spec: ClusterSpec,
    readonly zk: ZkClient,
  ) {
    this.registry = new BrokerRegistry(zk);
    this.replicated = new ReplicatedTopicRegistry(zk);
  }

  /**
   * Opens the ZooKeeper session of a cluster.
   * @throws ZkError when ZooKeeper cannot be reached within `connectTimeoutMs`
   */
  static async open(spec: ClusterSpec, options: { logger?: Logger; connectTimeoutMs?: number } = {}): Promise<Cluster> {
    const zk = await ZkClient.connect(spec.connect, { logger: options.logger, connectTimeoutMs: options.connectTimeoutMs ?? 10_000 });
    return new Cluster(spec, zk);
  }

  get name(): string {
    return this.spec.name;
  }

  /**
   * Every partition of every topic of the cluster, but those of `except`, sorted by topic, broker
   * id, partition: a paper topic's registered now, every partition of a replicated topic.
   */
  async partitions(except?: string): Promise<TopicPartition[]> {
    const out: TopicPartition[] = [];
    const byTopic = await this.registry.listTopicPartitions();
    const definitions = await this.replicated.readDefinitions();
    for (const topic of [...new Set([...byTopic.keys(), ...definitions.keys()])].sort()) {
      if (topic === except) continue;
      out.push(...paperPartitions(topic, byTopic.get(topic) ?? []));
      out.push(...replicatedPartitions(topic, definitions.get(topic)?.partitions.length ?? 0));
    }
    return out;
  }

  /** The partitions of one topic, paper or replicated (none when it does not exist). */
  async topicPartitions(topic: string): Promise<TopicPartition[]> {
    const definition = await this.replicated.readDefinition(topic);
    if (definition !== undefined) return replicatedPartitions(topic, definition.partitions.length);
    return paperPartitions(topic, await this.registry.topicPartitions(topic));
  }

  /**
   * A consumer of the broker that holds `p`, or of a replicated partition's leader (which the
   * consumer follows if it moves, docs/replication.md §13.2).
   * @throws Error when that broker is not registered (down), or the replicated partition has no live leader
   */
  async consumer(p: TopicPartition): Promise<SimpleConsumer> {
    let brokerId = p.brokerId;
    if (brokerId === replicatedBrokerId) {
      brokerId = (await this.replicated.readPartitionState(p.topic, p.partition))?.state.leader ?? -1;
      if (brokerId < 0) throw new Error(`partition ${p.partition} of ${p.topic} in ${this.name} has no leader (offline)`);
    }
    let c = this.consumers.get(brokerId);
    if (!c) {
      const broker = await this.registry.getBroker(brokerId);
      if (!broker) throw new Error(p.brokerId === replicatedBrokerId ? `the leader of partition ${p.partition} of ${p.topic}, broker ${brokerId} of ${this.name}, is down` : `broker ${brokerId} of ${this.name} is down`);
      c = new SimpleConsumer({ host: broker.host, port: broker.port, connectTimeoutMs: 5000, requestTimeoutMs: 30_000 });
      this.consumers.set(brokerId, c);
    }
    return c;
  }

  /** Closes the broker connections and the ZooKeeper session. */
  async close(): Promise<void> {
    for (const c of this.consumers.values()) await c.close().catch(() => {});
    this.consumers.clear();
    await this.zk.close();
  }
}

function paperPartitions(topic: string, counts: ReadonlyArray<{ readonly brokerId: number; readonly partitions: number }>): TopicPartition[] {
  const out: TopicPartition[] = [];
  for (const { brokerId, partitions } of [...counts].sort((a, b) => a.brokerId - b.brokerId)) {
    for (let partition = 0; partition < partitions; partition++) out.push({ topic, brokerId, partition });
  }
  return out;
}

function replicatedPartitions(topic: string, n: number): TopicPartition[] {
  return Array.from({ length: n }, (_, partition) => ({ topic, brokerId: replicatedBrokerId, partition }));
}

/**
 * Hands every message of `p` in `[from, to)` to `onBatch`, one fetch's messages at a time
 * (1 MiB fetches, grown for a larger message), and returns the offset after the last one
 * (`to`, or further when `to` falls inside a compressed message set).
 * @param from a message boundary ≥ the partition's earliest offset
 * @param to an offset ≤ the partition's end (e.g. its end when the scan began)
 * @throws what SimpleConsumer.messageBatches throws (OffsetOutOfRangeError when retention
 *   deleted `from` meanwhile, KlogConnectionError, MessageTooLargeError)
 */
export async function scanPartition(
  consumer: SimpleConsumer,
  p: TopicPartition,
  from: number,
  to: number,
  onBatch: (messages: readonly ConsumedMessage[]) => void,
): Promise<number> {
  if (from >= to) return from;
  let position = from;
  for await (const batch of consumer.messageBatches({ topic: p.topic, partition: p.partition, offset: from, maxWaitMs: 0 })) {
    onBatch(batch);
    position = batch[batch.length - 1]!.nextOffset;
    if (position >= to) break;
  }
  return position;
}
