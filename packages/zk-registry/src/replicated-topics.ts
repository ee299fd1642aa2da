/**
 * The registry of replicated topics (docs/replication.md §3): topic definitions under
 * `/brokers/topics/<topic>`, partition states under `…/partitions/<p>/state`, their reads and
 * watches, the controller's fenced writes as multi ops (§3.3), and the leader's conditional ISR
 * write with its `BadVersion` rule (§3.2). The values' JSON is in replicated-values.ts.
 *
 * A paper topic shares the namespace: its node is empty, its children are broker ids. Every
 * reader here skips it; every paper reader (broker-registry.ts) skips a replicated topic.
 */
import { ZkBadVersionError, ZkError, ZkNodeExistsError, ZkNoNodeError, TopicExistsError, InvalidZkValueError } from './errors.js';
import type { Logger } from '@klog/logger';
import {
  brokerTopicPath,
  brokerTopicsPath,
  topicNames,
  parsePartitionNumber,
  partitionStatePath,
  topicPartitionPath,
  topicPartitionsPath,
} from './paths.js';
import {
  encodePartitionState,
  encodeTopicDefinition,
  holdsTopicDefinition,
  parsePartitionState,
  parseTopicDefinition,
  type PartitionState,
  type PartitionStateNode,
  type TopicDefinition,
} from './replicated-values.js';
import type { ZkClient, ZkOp, ZkWatch } from './zk-client.js';

/** One partition's new state, for {@link createPartitionStateOps}. */
export interface PartitionStateEntry {
  readonly partition: number;
  readonly state: PartitionState;
}

/** What the leader's ISR write did ({@link ReplicatedTopicRegistry.updateIsrAsLeader}, docs/replication.md §3.2). */
export type LeaderIsrWrite =
  /** The state now in ZooKeeper is the leader's wanted one; `node.stateVersion` is the version to write at next. */
  | { readonly outcome: 'written'; readonly node: PartitionStateNode }
  /**
   * Another leader or epoch wrote the state (the controller), or the state is gone or
   * unreadable: the leader is fenced for the partition until its next LEADER_AND_ISR (§9.1).
   * `node` is the state read, when there is one.
   */
  | { readonly outcome: 'fenced'; readonly node: PartitionStateNode | undefined };

/**
 * Ops that create partition states, for the controller's fenced multi (§5.3, "A new topic"):
 * with `createPartitionsNode` first `/brokers/topics/<topic>/partitions` (the first batch of a
 * topic), then for each entry `partitions/<p>` and `partitions/<p>/state`. The topic definition
 * must exist. Each entry is 2 ops; keep a multi to 100 partitions (§3.3). Throws
 * {@link ZkError} for a bad state, {@link InvalidNameError} for a bad topic or partition.
 */
export function createPartitionStateOps(topic: string, entries: readonly PartitionStateEntry[], options: { createPartitionsNode: boolean }): ZkOp[] {
  const ops: ZkOp[] = options.createPartitionsNode ? [{ op: 'create', path: topicPartitionsPath(topic) }] : [];
  for (const { partition, state } of entries) {
    ops.push({ op: 'create', path: topicPartitionPath(topic, partition) });
    ops.push({ op: 'create', path: partitionStatePath(topic, partition), data: encodePartitionState(state) });
  }
  return ops;
}

/**
 * The op that writes a partition state at `stateVersion` (the version the controller read), for
 * its fenced multi (§3.2, 1). After the multi, the op's result stat gives the new `stateVersion`
 * to send in LEADER_AND_ISR (§6.1). Throws {@link ZkError} for a bad state.
 */
export function setPartitionStateOp(topic: string, partition: number, state: PartitionState, stateVersion: number): ZkOp {
  return { op: 'setData', path: partitionStatePath(topic, partition), data: encodePartitionState(state), version: stateVersion };
}

/** The ops that remove one partition of a deleted topic: its state, then `partitions/<p>` (§5.3, "Deleting a topic"). */
export function removePartitionStateOps(topic: string, partition: number): ZkOp[] {
  return [
    { op: 'remove', path: partitionStatePath(topic, partition), version: -1 },
    { op: 'remove', path: topicPartitionPath(topic, partition), version: -1 },
  ];
}

/**
 * The ops that remove a deleted topic once its partitions are gone: `partitions` (when
 * `hasPartitionsNode`), then the definition itself (§5.3: the definition last, with the request
 * node, admin-requests.ts).
 */
export function removeTopicOps(topic: string, options: { hasPartitionsNode: boolean } = { hasPartitionsNode: true }): ZkOp[] {
  const ops: ZkOp[] = options.hasPartitionsNode ? [{ op: 'remove', path: topicPartitionsPath(topic), version: -1 }] : [];
  ops.push({ op: 'remove', path: brokerTopicPath(topic), version: -1 });
  return ops;
}

/** How often the leader's ISR write reads and writes again before it gives up (a value that keeps changing under the same leader and epoch). */
const maxLeaderWriteAttempts = 5;

/** Reads, watches and writes replicated topics in ZooKeeper (docs/replication.md §3). */
export class ReplicatedTopicRegistry {
  private readonly logger: Logger;

  constructor(
    private readonly zk: ZkClient,
    options: { logger?: Logger } = {},
  ) {
    this.logger = options.logger ?? zk.logger;
  }

  /**
   * Creates a replicated topic: its definition in one `create` of `/brokers/topics/<topic>`,
   * which fails if the node exists (§3, "One namespace for topic names"). The controller then
   * creates its partitions (§5.3). A create retried after a lost connection that finds its own
   * definition (same `id`) succeeds.
   * @throws TopicExistsError when the name is taken (`kind` replicated or paper);
   *   InvalidReplicaAssignmentError or ZkError for a bad definition; InvalidNameError for a bad name
   */
  async createTopic(topic: string, definition: TopicDefinition): Promise<void> {
    const path = brokerTopicPath(topic);
    const value = encodeTopicDefinition(definition);
    try {
      await this.zk.create(path, value);
      this.logger.info({ topic, id: definition.id, partitions: definition.partitions.length }, 'replicated topic created');
      return;
    } catch (error) {
      if (!(error instanceof ZkNodeExistsError)) throw error;
    }
    const node = await this.zk.getData(path);
    if (node === undefined) throw new ZkError(`topic ${topic} was deleted while it was being created; try again`, { path });
    if (!holdsTopicDefinition(node.data)) throw new TopicExistsError(topic, 'paper', undefined, path);
    let existing: TopicDefinition | undefined;
    try {
      existing = parseTopicDefinition(node.data.toString('utf8'), path);
    } catch (error) {
      if (!(error instanceof InvalidZkValueError)) throw error;
    }
    if (existing?.id === definition.id) return;
    throw new TopicExistsError(topic, 'replicated', existing?.partitions.length, path);
  }

  /**
   * Whether `topic` is a replicated topic: its node holds a definition (even one that does not
   * parse). A broker asks this before it auto-creates a paper topic (§3); false for a paper
   * topic and for a name nobody took.
   */
  async isReplicatedTopic(topic: string): Promise<boolean> {
    const node = await this.zk.getData(brokerTopicPath(topic));
    return node !== undefined && holdsTopicDefinition(node.data);
  }

  /**
   * The definition of a replicated topic; undefined when the name is free or a paper topic.
   * @throws InvalidZkValueError when the node holds a definition that does not parse
   */
  async readDefinition(topic: string): Promise<TopicDefinition | undefined> {
    const path = brokerTopicPath(topic);
    const node = await this.zk.getData(path);
    if (node === undefined || !holdsTopicDefinition(node.data)) return undefined;
    return parseTopicDefinition(node.data.toString('utf8'), path);
  }

  /** Names of the replicated topics (paper topics left out), sorted; one read per topic. */
  async listTopics(): Promise<string[]> {
    const out: string[] = [];
    for (const topic of this.topicNames(await this.zk.getChildren(brokerTopicsPath()))) {
      const node = (await this.zk.getData(brokerTopicPath(topic)))?.data;
      if (node !== undefined && holdsTopicDefinition(node)) out.push(topic);
    }
    return out;
  }

  /**
   * Every replicated topic's definition, by name. A definition that does not parse is logged
   * (error) and left out: its partitions count as offline (§3.1).
   */
  async readDefinitions(): Promise<Map<string, TopicDefinition>> {
    return this.definitionsOf(await this.zk.getChildren(brokerTopicsPath()));
  }

  /**
   * Calls back with every replicated topic's definition (as {@link readDefinitions}) now and
   * whenever a topic is created or removed under `/brokers/topics`, until closed. Each call reads
   * every topic node again, so a topic deleted and created again under the same name between
   * two calls shows its new definition (its new `id`).
   */
  watchDefinitions(callback: (definitions: ReadonlyMap<string, TopicDefinition>) => void | Promise<void>): ZkWatch {
    return this.zk.watchChildren(brokerTopicsPath(), async (topics) => callback(await this.definitionsOf(topics)));
  }

  /** The partitions of `topic` that have a node under `partitions`, ascending; empty before the controller created them. */
  async listPartitions(topic: string): Promise<number[]> {
    return this.partitionNumbers(topic, await this.zk.getChildren(topicPartitionsPath(topic)));
  }

  /** Calls back with the partitions of `topic` (as {@link listPartitions}) now and on every change, until closed. */
  watchPartitions(topic: string, callback: (partitions: number[]) => void | Promise<void>): ZkWatch {
    return this.zk.watchChildren(topicPartitionsPath(topic), (children) => callback(this.partitionNumbers(topic, children)));
  }

  /**
   * A partition's state and its version; undefined when there is none.
   * @throws InvalidZkValueError when the value does not parse
   */
  async readPartitionState(topic: string, partition: number): Promise<PartitionStateNode | undefined> {
    const path = partitionStatePath(topic, partition);
    const node = await this.zk.getData(path);
    if (node === undefined) return undefined;
    return { state: parsePartitionState(node.data.toString('utf8'), path), stateVersion: node.stat.version };
  }

  /**
   * Every partition state of `topic`, by partition. A state that does not parse is logged and
   * left out (the partition is offline, §3.1). The reads are pipelined on the session (all sent,
   * then all answered), so a topic of thousands of partitions costs about one round trip, not
   * one per partition: the controller reads them before every election (docs/replication.md §5.2).
   */
  async readPartitionStates(topic: string): Promise<Map<number, PartitionStateNode>> {
    const partitions = await this.listPartitions(topic);
    const read = await Promise.all(
      partitions.map(async (partition) => {
        try {
          return await this.readPartitionState(topic, partition);
        } catch (error) {
          if (!(error instanceof InvalidZkValueError)) throw error;
          this.logger.error({ topic, partition, err: error }, 'unreadable partition state; the partition counts as offline');
          return undefined;
        }
      }),
    );
    const out = new Map<number, PartitionStateNode>();
    partitions.forEach((partition, i) => {
      const node = read[i];
      if (node !== undefined) out.set(partition, node);
    });
    return out;
  }

  /**
   * Calls back with a partition's state and version now and after every change (undefined while
   * there is none, or while its value does not parse: logged, offline), until closed.
   */
  watchPartitionState(topic: string, partition: number, callback: (node: PartitionStateNode | undefined) => void | Promise<void>): ZkWatch {
    const path = partitionStatePath(topic, partition);
    return this.zk.watchNode(path, (node) => {
      if (node === undefined) return callback(undefined);
      try {
        return callback({ state: parsePartitionState(node.data.toString('utf8'), path), stateVersion: node.stat.version });
      } catch (error) {
        if (!(error instanceof InvalidZkValueError)) throw error;
        this.logger.error({ topic, partition, err: error }, 'unreadable partition state; the partition counts as offline');
        return callback(undefined);
      }
    });
  }

  /**
   * The leader's conditional ISR write (docs/replication.md §3.2, 2): writes `known.state` with
   * the ISR and/or `isNew` of `change` (nothing else: same `leader`, `leaderEpoch`,
   * `controllerEpoch`) at `known.stateVersion` (the `stateVersion` of its last LEADER_AND_ISR or
   * of its own last write). On `BadVersion` it reads the node again: the same leader and leader
   * epoch means the leader's own earlier attempt was applied (a write retried after a lost
   * connection) and it goes on from the value and version read (writing again if that value is
   * not the wanted one); another leader or epoch means the controller wrote: `fenced`.
   * @returns `written` with the state and version now in ZooKeeper, or `fenced` (also when the
   *   node is gone or does not parse)
   * @throws ZkError when `known.state.leader` is -1 or the wanted ISR does not hold the leader
   *   (a leader is always a member of its ISR, §3.1)
   */
  async updateIsrAsLeader(
    topic: string,
    partition: number,
    known: PartitionStateNode,
    change: { readonly isr?: readonly number[]; readonly isNew?: false },
  ): Promise<LeaderIsrWrite> {
    const path = partitionStatePath(topic, partition);
    const wanted: PartitionState = { ...known.state, isr: change.isr ?? known.state.isr, isNew: change.isNew ?? known.state.isNew };
    if (wanted.leader < 0 || !wanted.isr.includes(wanted.leader)) {
      throw new ZkError(`ISR write of ${topic}/${partition} refused: the ISR ${wanted.isr.join(',')} must hold the leader ${wanted.leader}`, { path });
    }
    const value = encodePartitionState(wanted);
    let version = known.stateVersion;
    for (let attempt = 0; attempt < maxLeaderWriteAttempts; attempt++) {
      try {
        const stat = await this.zk.setData(path, value, version);
        return { outcome: 'written', node: { state: wanted, stateVersion: stat.version } };
      } catch (error) {
        if (error instanceof ZkNoNodeError) return { outcome: 'fenced', node: undefined };
        if (!(error instanceof ZkBadVersionError)) throw error;
      }
      let current: PartitionStateNode | undefined;
      try {
        current = await this.readPartitionState(topic, partition);
      } catch (error) {
        if (!(error instanceof InvalidZkValueError)) throw error;
        this.logger.error({ topic, partition, err: error }, 'unreadable partition state; the leader is fenced for the partition');
        return { outcome: 'fenced', node: undefined };
      }
      if (current === undefined || current.state.leader !== wanted.leader || current.state.leaderEpoch !== wanted.leaderEpoch) {
        return { outcome: 'fenced', node: current };
      }
      if (sameIsrWrite(current.state, wanted)) return { outcome: 'written', node: current };
      version = current.stateVersion;
    }
    throw new ZkError(`ISR write of ${topic}/${partition} did not settle after ${maxLeaderWriteAttempts} attempts`, { path });
  }

  private topicNames(children: readonly string[]): string[] {
    return topicNames(children, (child) => this.logger.warn({ child }, 'ignoring a /brokers/topics child whose name is not a topic name'));
  }


  /** The definitions of the replicated topics among `children` of `/brokers/topics`, unreadable ones logged and left out. */
  private async definitionsOf(children: readonly string[]): Promise<Map<string, TopicDefinition>> {
    const out = new Map<string, TopicDefinition>();
    for (const topic of this.topicNames(children)) {
      const definition = await this.definitionOrLog(topic);
      if (definition !== undefined) out.set(topic, definition);
    }
    return out;
  }

  private async definitionOrLog(topic: string): Promise<TopicDefinition | undefined> {
    try {
      return await this.readDefinition(topic);
    } catch (error) {
      if (!(error instanceof InvalidZkValueError)) throw error;
      this.logger.error({ topic, err: error }, 'unreadable topic definition; the topic counts as offline');
      return undefined;
    }
  }

  private partitionNumbers(topic: string, children: string[]): number[] {
    const out: number[] = [];
    for (const child of children) {
      const p = parsePartitionNumber(child);
      if (p === undefined) this.logger.warn({ topic, child }, 'ignoring a partitions child whose name is not a partition number');
      else out.push(p);
    }
    return out.sort((a, b) => a - b);
  }
}

/** Whether two states agree on what the leader writes (ISR and `isNew`). */
function sameIsrWrite(a: PartitionState, b: PartitionState): boolean {
  return a.isNew === b.isNew && a.isr.length === b.isr.length && a.isr.every((id, i) => id === b.isr[i]);
}
