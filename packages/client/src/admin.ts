/**
 * The admin API of replicated topics (docs/replication.md §15.1), what `klog topics` runs:
 *
 * - {@link Admin.createTopic}: checks the request against the live brokers (admin-checks.ts),
 *   assigns the replicas (`assignReplicas`, §4), writes the topic definition with one `create`
 *   (which fails when the name is taken, by either kind of topic, §3), and waits until the
 *   controller has elected every partition's leader;
 * - {@link Admin.deleteTopic}: creates `/admin/delete-topics/<topic>` and waits until the
 *   controller has removed the topic;
 * - {@link Admin.describeTopics}: each partition's leader, epoch, replicas, ISR and status, with
 *   the high watermark from an OFFSETS request to the leader;
 * - {@link Admin.electPreferredLeaders}: creates `/admin/preferred-leader-election` and waits for
 *   the controller, then says which partitions moved.
 *
 * The admin writes only the definition and the two request nodes (§3.2); every other change is
 * the controller's, which is why each write is followed by a wait, bounded by `timeoutMs`.
 */
import { type Logger, silentLogger } from '@klog/logger';
import {
  AdminRequestRegistry,
  assignReplicas,
  BrokerRegistry,
  checkTopic,
  newTopicId,
  type PartitionState,
  PreferredLeaderElectionInProgressError,
  ReplicatedTopicRegistry,
  type TopicDefinition,
  TopicExistsError,
  ZkClient,
} from '@klog/zk-registry';
import { checkCreateTopic, paperTopicDeleteRefusal, type PartitionStatus, partitionStatus, TopicRefusedError } from './admin-checks.js';
import { KlogError, UnknownTopicError } from './errors.js';
import { SimpleConsumer } from './simple-consumer.js';
import { sleep } from './sleep.js';

export { TopicRefusedError, type PartitionStatus } from './admin-checks.js';

/** Default most ms the admin waits for the controller. */
export const defaultAdminTimeoutMs = 10_000;
/** How often the admin looks at ZooKeeper again while it waits for the controller, ms. */
const pollMs = 100;

/** Options of an {@link Admin}. */
export interface AdminOptions {
  /** ZooKeeper connect string `host:port[,host:port...][/chroot]`. */
  readonly zookeeper: string;
  /** Most ms to wait for the first ZooKeeper session. Default 10,000. */
  readonly zkConnectTimeoutMs?: number;
  readonly logger?: Logger;
}

/** What {@link Admin.createTopic} takes. */
export interface CreateTopicOptions {
  readonly partitions: number;
  readonly replicationFactor: number;
  /** The topic's `min.insync.replicas` (§11); absent: the brokers' default. */
  readonly minInsyncReplicas?: number;
  /** The topic's `unclean.leader.election.enable` (§12); absent: the controller's setting. */
  readonly uncleanLeaderElection?: boolean;
  /** Most ms to wait until every partition has a leader. Default 10,000. */
  readonly timeoutMs?: number;
}

/** A partition of a topic just created: its first leader (null while none), replicas and ISR. */
export interface CreatedPartition {
  readonly partition: number;
  readonly leader: number | null;
  readonly replicas: readonly number[];
  readonly isr: readonly number[];
}

/** What {@link Admin.createTopic} returns. */
export interface CreatedTopic {
  readonly topic: string;
  readonly id: string;
  readonly replicationFactor: number;
  readonly minInsyncReplicas: number | undefined;
  readonly partitions: readonly CreatedPartition[];
}

/** One partition of {@link ReplicatedTopicDescription} (docs/replication.md §15.1). */
export interface PartitionDescription {
  readonly partition: number;
  /** The leader's broker id; null while the partition has none (`leader` −1). */
  readonly leader: number | null;
  readonly leaderEpoch: number;
  readonly replicas: readonly number[];
  readonly isr: readonly number[];
  /** From OFFSETS (latest) to the leader; null when there is no live leader or it did not answer. */
  readonly highWatermark: number | null;
  readonly status: PartitionStatus;
}

/** A replicated topic as {@link Admin.describeTopics} reports it. */
export interface ReplicatedTopicDescription {
  readonly kind: 'replicated';
  readonly topic: string;
  readonly id: string;
  readonly replicationFactor: number;
  readonly minInsyncReplicas: number | undefined;
  readonly partitions: readonly PartitionDescription[];
}

/** A paper topic named in {@link Admin.describeTopics}: described as before replication (`klog topics --describe`). */
export interface PaperTopicReference {
  readonly kind: 'paper';
  readonly topic: string;
}

/** What {@link Admin.deleteTopic} returns. */
export interface DeletedTopic {
  readonly topic: string;
  readonly partitions: number;
  /** Partitions × replication factor. */
  readonly replicas: number;
}

/** What {@link Admin.electPreferredLeaders} returns. */
export interface PreferredLeaderElection {
  /** Partitions whose leader became their preferred (first) replica. */
  readonly moved: readonly { readonly topic: string; readonly partition: number; readonly from: number; readonly to: number }[];
  /** Partitions already led by their preferred replica. */
  readonly alreadyPreferred: number;
  /** Partitions whose preferred replica is not live or not in the ISR. */
  readonly notPossible: number;
}

/** A partition's replicas and leader at one moment (before and after an election). */
interface PartitionLeaderAt {
  readonly topic: string;
  readonly partition: number;
  readonly replicas: readonly number[];
  readonly leader: number;
}

/** The controller did not finish within the admin's timeout; the message says what is left. */
export class AdminTimeoutError extends KlogError {
  override readonly name: string = 'AdminTimeoutError';
}

/**
 * Creates, describes and deletes replicated topics (see the file comment). One ZooKeeper session
 * per Admin, opened on first use; close it when done.
 */
export class Admin {
  private readonly logger: Logger;
  private session: Promise<ZkClient> | undefined;

  constructor(private readonly options: AdminOptions) {
    this.logger = options.logger ?? silentLogger;
  }

  /**
   * Creates a replicated topic (docs/replication.md §15.1) and waits until every partition has a leader.
   * @throws TopicRefusedError (nothing written) for a request the live brokers cannot hold or a
   *   name that is taken; AdminTimeoutError when the definition is written but some partition has
   *   no leader after `timeoutMs` (is a controller running?); ZkError when ZooKeeper fails
   */
  async createTopic(topic: string, options: CreateTopicOptions): Promise<CreatedTopic> {
    checkTopic(topic);
    const zk = await this.zk();
    const topics = new ReplicatedTopicRegistry(zk, { logger: this.logger });
    const live = (await new BrokerRegistry(zk, { logger: this.logger }).listBrokers()).map((b) => b.id);
    checkCreateTopic(options, live);
    const assignment = assignReplicas(live, options.partitions, options.replicationFactor);
    const definition: TopicDefinition = {
      id: newTopicId(),
      partitions: assignment,
      ...(options.minInsyncReplicas !== undefined ? { minInsyncReplicas: options.minInsyncReplicas } : {}),
      ...(options.uncleanLeaderElection !== undefined ? { uncleanLeaderElection: options.uncleanLeaderElection } : {}),
      createdMs: Date.now(),
    };
    try {
      await topics.createTopic(topic, definition);
    } catch (error) {
      // The name is taken, by either kind of topic (docs/replication.md §3, one namespace).
      if (error instanceof TopicExistsError) throw new TopicRefusedError(error.message);
      throw error;
    }
    this.logger.info({ topic, id: definition.id, partitions: assignment.length }, 'topic definition written; waiting for the controller');
    const timeoutMs = options.timeoutMs ?? defaultAdminTimeoutMs;
    const states = await this.waitFor(timeoutMs, async () => {
      const s = await this.states(topics, topic, assignment.length);
      return s.every((p) => p !== undefined && p.leader >= 0) ? s : undefined;
    }, async () => {
      const s = await this.states(topics, topic, assignment.length).catch(() => []);
      const missing = assignment.map((_r, p) => p).filter((p) => !(s[p] && s[p].leader >= 0));
      return `topic ${topic} is defined, but the controller elected no leader for partition${missing.length === 1 ? '' : 's'} ${missing.join(', ')} within ${timeoutMs} ms (is a controller running?)`;
    });
    return {
      topic,
      id: definition.id,
      replicationFactor: options.replicationFactor,
      minInsyncReplicas: options.minInsyncReplicas,
      partitions: assignment.map((replicas, p) => ({ partition: p, leader: states[p]!.leader, replicas, isr: states[p]!.isr })),
    };
  }

  /**
   * Deletes a replicated topic: asks the controller (`/admin/delete-topics/<topic>`) and waits until the definition is gone.
   * @throws UnknownTopicError for a topic that does not exist; TopicRefusedError for a paper topic;
   *   AdminTimeoutError when the controller has not removed it after `timeoutMs` (the request stays; a controller finishes it)
   */
  async deleteTopic(topic: string, options: { readonly timeoutMs?: number } = {}): Promise<DeletedTopic> {
    checkTopic(topic);
    const zk = await this.zk();
    const topics = new ReplicatedTopicRegistry(zk, { logger: this.logger });
    const definition = await this.definitionOrRefuse(zk, topics, topic, paperTopicDeleteRefusal);
    await new AdminRequestRegistry(zk, { logger: this.logger }).requestTopicDeletion(topic);
    const timeoutMs = options.timeoutMs ?? defaultAdminTimeoutMs;
    await this.waitFor(
      timeoutMs,
      async () => ((await topics.readDefinition(topic)) === undefined ? true : undefined),
      async () => `topic ${topic}: deletion asked, but the controller has not removed it within ${timeoutMs} ms (is a controller running? the request stays until one does)`,
    );
    const n = definition.partitions.length;
    return { topic, partitions: n, replicas: definition.partitions.reduce((s, r) => s + r.length, 0) };
  }

  /**
   * Describes topics: every topic when `topics` is absent, sorted by name. A replicated topic
   * comes with its partitions; a paper topic only by name (its description is the paper's).
   * @throws UnknownTopicError for a named topic that does not exist; ZkError when ZooKeeper fails
   */
  async describeTopics(topics?: readonly string[]): Promise<Array<ReplicatedTopicDescription | PaperTopicReference>> {
    const zk = await this.zk();
    const registry = new ReplicatedTopicRegistry(zk, { logger: this.logger });
    const brokers = new BrokerRegistry(zk, { logger: this.logger });
    const known = [...new Set([...(await brokers.listTopics()), ...(await registry.listTopics())])].sort();
    const names = topics ?? known;
    for (const t of names) if (!known.includes(t)) throw new UnknownTopicError(t, known);
    const live = new Map((await brokers.listBrokers()).map((b) => [b.id, b]));
    const consumers = new Map<number, SimpleConsumer>();
    try {
      const out: Array<ReplicatedTopicDescription | PaperTopicReference> = [];
      for (const topic of [...names].sort()) {
        const definition = await registry.readDefinition(topic);
        if (!definition) {
          out.push({ kind: 'paper', topic });
          continue;
        }
        const n = definition.partitions.length;
        const states = await this.states(registry, topic, n);
        const partitions = await Promise.all(
          Array.from({ length: n }, async (_x, p): Promise<PartitionDescription> => {
            const replicas = definition.partitions[p] ?? [];
            const s = states[p];
            const leader = s?.leader ?? -1;
            const isr = s?.isr ?? [];
            const status = partitionStatus(leader, replicas, isr, new Set(live.keys()));
            let highWatermark: number | null = null;
            const at = status === 'offline' ? undefined : live.get(leader);
            if (at) {
              let c = consumers.get(leader);
              if (!c) consumers.set(leader, (c = new SimpleConsumer({ host: at.host, port: at.port, connectTimeoutMs: 5000, requestTimeoutMs: 10_000 })));
              highWatermark = await c.latestOffset(topic, p).catch((e: Error) => {
                this.logger.warn({ topic, partition: p, leader, err: e.message }, 'could not read the high watermark');
                return null;
              });
            }
            return { partition: p, leader: leader < 0 ? null : leader, leaderEpoch: s?.leaderEpoch ?? 0, replicas, isr, highWatermark, status };
          }),
        );
        out.push({
          kind: 'replicated',
          topic,
          id: definition.id,
          replicationFactor: definition.partitions[0]?.length ?? 0,
          minInsyncReplicas: definition.minInsyncReplicas,
          partitions,
        });
      }
      return out;
    } finally {
      await Promise.all([...consumers.values()].map((c) => c.close()));
    }
  }

  /**
   * Moves each partition of `topic` (every replicated topic when absent) to its preferred
   * replica where that one is live and in the ISR: asks the controller
   * (`/admin/preferred-leader-election`) and waits until it has removed the request.
   * @throws UnknownTopicError; TopicRefusedError for a paper topic or while another election
   *   runs; AdminTimeoutError when the controller has not finished after `timeoutMs`
   */
  async electPreferredLeaders(topic?: string, options: { readonly timeoutMs?: number } = {}): Promise<PreferredLeaderElection> {
    const zk = await this.zk();
    const registry = new ReplicatedTopicRegistry(zk, { logger: this.logger });
    const names: string[] = [];
    if (topic !== undefined) {
      await this.definitionOrRefuse(zk, registry, topic, (t) => new TopicRefusedError(`topic ${t} is a paper topic: its partitions have no leaders to elect`));
      names.push(topic);
    } else {
      names.push(...(await registry.listTopics()));
    }
    const before = await this.allStates(registry, names);
    const requests = new AdminRequestRegistry(zk, { logger: this.logger });
    try {
      await requests.requestPreferredLeaderElection(
        topic === undefined ? { all: true } : { all: false, partitions: before.map((b) => ({ topic: b.topic, partition: b.partition })) },
      );
    } catch (error) {
      if (error instanceof PreferredLeaderElectionInProgressError) throw new TopicRefusedError('a preferred-leader election is already running: wait for it, then ask again');
      throw error;
    }
    const timeoutMs = options.timeoutMs ?? defaultAdminTimeoutMs;
    await this.waitFor(
      timeoutMs,
      async () => ((await requests.readPreferredLeaderElection()) ? undefined : true),
      async () => `preferred-leader election asked, but the controller has not finished it within ${timeoutMs} ms (is a controller running? the request stays until one does)`,
    );
    const after = await this.allStates(registry, names);
    const moved: Array<{ topic: string; partition: number; from: number; to: number }> = [];
    let alreadyPreferred = 0;
    let notPossible = 0;
    after.forEach((a, i) => {
      const b = before[i]!;
      const preferred = a.replicas[0];
      if (b.leader === preferred) alreadyPreferred++;
      else if (a.leader === preferred) moved.push({ topic: a.topic, partition: a.partition, from: b.leader, to: a.leader });
      else notPossible++;
    });
    return { moved, alreadyPreferred, notPossible };
  }

  /** Closes the ZooKeeper session. Safe to call twice. */
  async close(): Promise<void> {
    const s = this.session;
    this.session = undefined;
    await (await s?.catch(() => undefined))?.close();
  }

  private zk(): Promise<ZkClient> {
    if (!this.session) {
      this.session = ZkClient.connect(this.options.zookeeper, {
        logger: this.logger,
        ...(this.options.zkConnectTimeoutMs !== undefined ? { connectTimeoutMs: this.options.zkConnectTimeoutMs } : {}),
      });
      this.session.catch(() => (this.session = undefined));
    }
    return this.session;
  }

  /** The definition of a replicated topic; `paper` makes the refusal of a paper topic. */
  private async definitionOrRefuse(
    zk: ZkClient,
    topics: ReplicatedTopicRegistry,
    topic: string,
    paper: (t: string) => TopicRefusedError,
  ): Promise<TopicDefinition> {
    const definition = await topics.readDefinition(topic);
    if (definition) return definition;
    const known = await new BrokerRegistry(zk, { logger: this.logger }).listTopics();
    if (known.includes(topic)) throw paper(topic);
    throw new UnknownTopicError(topic, known);
  }

  /** The state of partitions `0..n-1` (undefined where none is written yet). */
  private async states(topics: ReplicatedTopicRegistry, topic: string, n: number): Promise<Array<PartitionState | undefined>> {
    return Promise.all(Array.from({ length: n }, async (_x, p) => (await topics.readPartitionState(topic, p))?.state));
  }

  /** Every partition of `names` with its replicas and leader, in topic then partition order. */
  private async allStates(registry: ReplicatedTopicRegistry, names: readonly string[]): Promise<PartitionLeaderAt[]> {
    const out: PartitionLeaderAt[] = [];
    for (const topic of names) {
      const definition = await registry.readDefinition(topic);
      if (!definition) continue;
      const n = definition.partitions.length;
      const states = await this.states(registry, topic, n);
      for (let p = 0; p < n; p++) out.push({ topic, partition: p, replicas: definition.partitions[p] ?? [], leader: states[p]?.leader ?? -1 });
    }
    return out;
  }

  /** Polls `check` until it returns a value, at most `timeoutMs`; then throws AdminTimeoutError with `explain()`. */
  private async waitFor<T>(timeoutMs: number, check: () => Promise<T | undefined>, explain: () => Promise<string>): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = await check();
      if (v !== undefined) return v;
      if (Date.now() >= deadline) throw new AdminTimeoutError(await explain());
      await sleep(Math.min(pollMs, Math.max(0, deadline - Date.now())));
    }
  }
}
