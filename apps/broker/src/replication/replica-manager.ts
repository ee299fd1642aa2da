/**
 * The roles of every replicated partition on this broker (docs/replication.md §9.1): the
 * entry points of the controller's LEADER_AND_ISR and STOP_REPLICA (§6.1, §6.2), whether they
 * come over a socket (handlers/leader-and-isr.ts, handlers/stop-replica.ts) or from the
 * controller running in this broker, the fetchers of the partitions it follows (§9.2), the
 * periodic ISR check of the partitions it leads (§9.4), the high-watermark checkpoints of its
 * replicas (§8.1), and the fencing of every leadership when the broker's ZooKeeper session expires.
 */
import {
  ErrorCode,
  type BrokerAddress,
  type ErrorCodeValue,
  type LeaderAndIsrRequest,
  type LeaderAndIsrResponse,
  type PartitionError,
  type PartitionState,
  type StopReplicaRequest,
  type StopReplicaResponse,
} from '@klog/protocol';
import type { Logger } from 'pino';
import type { BrokerConfig } from '../config.js';
import { errorCodeOf } from '../handlers/produce.js';
import { FetcherManager } from './fetcher.js';
import { HighWatermarkCheckpoints } from './hw-checkpoints.js';
import type { ReplicaLog } from '@klog/storage';
import { Partition, type IsrWriter } from './partition.js';
import type { ReplicationMetrics } from './replication-metrics.js';
import { isReplicaDirTaken } from './replica-store.js';

/**
 * Where replica logs live (packages/storage's LogManager, docs/replication.md §8.1), as the
 * replica manager uses it.
 */
export interface ReplicaStore {
  /**
   * The replica log of `topic`/`partition` when the broker has one for the topic id `topicId`.
   * @returns the log, `'missing'` when there is none, or `'taken'` when its directory holds a
   *   paper partition or a replica of another topic id
   */
  open(topic: string, partition: number, topicId: string): Promise<ReplicaLog | 'missing' | 'taken'>;
  /** Creates an empty replica log for `topicId` (replica.properties first). */
  create(topic: string, partition: number, topicId: string): Promise<ReplicaLog>;
  /** Closes the replica log and deletes its directory. */
  delete(topic: string, partition: number): Promise<void>;
}

/** What a replica manager runs with. */
export interface ReplicaManagerOptions {
  readonly config: BrokerConfig;
  readonly logger: Logger;
  readonly metrics: ReplicationMetrics;
  readonly store: ReplicaStore;
  /** The leader's ISR writes (undefined without ZooKeeper: the ISR of each LEADER_AND_ISR is kept as sent). */
  readonly isrWriter: IsrWriter | undefined;
}

const key = (topic: string, partition: number): string => `${topic}\u0000${partition}`;

/** The replicated partitions of one broker. */
export class ReplicaManager {
  readonly #partitions = new Map<string, Partition>();
  /** Topics this broker has been told are replicated (a produce to one never auto-creates it). */
  readonly #topics = new Set<string>();
  /** The highest controller epoch seen (docs/replication.md §6.1). */
  #controllerEpoch = -1;
  readonly #fetchers: FetcherManager;
  readonly #isrTimer: NodeJS.Timeout;
  readonly #hwCheckpoints: HighWatermarkCheckpoints;
  readonly #hwTimer: NodeJS.Timeout;
  #closed = false;
  /** False once the broker began to stop ({@link stopFollowing}): no fetcher starts again. */
  #following = true;

  constructor(private readonly o: ReplicaManagerOptions) {
    this.#fetchers = new FetcherManager({ config: o.config, logger: o.logger, metrics: o.metrics });
    this.#isrTimer = setInterval(() => this.#checkIsrs(), Math.max(10, Math.floor(o.config.replicaLagTimeMaxMs / 2)));
    this.#isrTimer.unref();
    this.#hwCheckpoints = new HighWatermarkCheckpoints(o.logger);
    const hwIntervalMs = Math.max(10, o.config.replicaHighWatermarkCheckpointIntervalMs);
    this.#hwTimer = setInterval(() => void this.#hwCheckpoints.writeAll(this.#partitions.values()), hwIntervalMs);
    this.#hwTimer.unref();
    o.metrics.setSource({ leaderCounts: () => this.#leaderCounts(), followerLags: () => this.#followerLags() });
  }

  /** The highest controller epoch this broker has seen (−1: none). */
  get controllerEpoch(): number {
    return this.#controllerEpoch;
  }

  /** The replicated partition, or undefined when this broker was never told of it. */
  get(topic: string, partition: number): Partition | undefined {
    return this.#partitions.get(key(topic, partition));
  }

  /** Every replicated partition this broker holds. */
  partitions(): Iterable<Partition> {
    return this.#partitions.values();
  }

  /**
   * True when `topic` is a replicated topic this broker has been told of, or one the topic
   * directory given to {@link useTopicDirectory} knows (a replicated topic this broker holds no
   * replica of: a produce to it must not auto-create a paper topic, docs/replication.md §3).
   */
  isReplicatedTopic(topic: string): boolean {
    return this.#topics.has(topic) || this.#directory(topic);
  }

  /** Makes {@link isReplicatedTopic} also ask `isReplicated` (the broker's metadata cache, §13.1). */
  useTopicDirectory(isReplicated: (topic: string) => boolean): void {
    this.#directory = isReplicated;
  }

  #directory: (topic: string) => boolean = () => false;

  /**
   * LEADER_AND_ISR (docs/replication.md §6.1, §9.1): takes each partition's role in turn and
   * answers once each has taken it (a leader accepts produces; a follower has been handed to its
   * fetcher, which truncates and fetches on its own). Called by handlers/leader-and-isr.ts for a
   * request over a socket, and directly by the controller for its own broker.
   * @returns error-only StaleControllerEpoch for an older controller epoch; otherwise per
   *   partition 0, FencedLeaderEpoch (an older epoch than held), NotReplica (not in the replica
   *   list), ReplicaLost (named leader or ISR member, `isNew` 0, no replica log) or a storage error
   */
  async handleLeaderAndIsr(req: LeaderAndIsrRequest): Promise<LeaderAndIsrResponse> {
    if (req.controllerEpoch < this.#controllerEpoch) return { errorCode: ErrorCode.StaleControllerEpoch, partitions: [] };
    this.#controllerEpoch = req.controllerEpoch;
    const brokers = new Map(req.brokers.map((b) => [b.brokerId, b]));
    const results = await Promise.all(req.partitions.map((s) => this.#leaderAndIsr(s, brokers)));
    return { errorCode: ErrorCode.None, partitions: results };
  }

  async #leaderAndIsr(s: PartitionState, brokers: Map<number, BrokerAddress>): Promise<PartitionError> {
    const result = (errorCode: ErrorCodeValue): PartitionError => ({ topic: s.topic, partition: s.partition, errorCode });
    const me = this.o.config.brokerId;
    if (!s.replicas.includes(me)) return result(ErrorCode.NotReplica);
    this.#topics.add(s.topic);
    let p = this.get(s.topic, s.partition);
    if (p === undefined) {
      p = new Partition(s.topic, s.partition, s.topicId, {
        brokerId: me,
        logger: this.o.logger,
        replicaLagTimeMaxMs: this.o.config.replicaLagTimeMaxMs,
        isrWriter: this.o.isrWriter,
        onIsrChanged: (_p, proposal) => this.o.metrics.isrChanged(proposal.removed.length > 0 ? 'shrink' : 'expand'),
      });
      this.#partitions.set(key(s.topic, s.partition), p);
    }
    const epoch = p.acceptEpoch(s.leaderEpoch);
    if (epoch === 'older') return result(ErrorCode.FencedLeaderEpoch);
    const part = p;
    try {
      return await part.enqueue(async () => {
        if (part.leaderEpoch !== s.leaderEpoch) return result(ErrorCode.FencedLeaderEpoch); // a newer request came meanwhile
        if (s.leader === -1) {
          this.#fetchers.remove(part);
          part.becomeNone(s);
          return result(ErrorCode.None);
        }
        const lost = await this.#ensureReplica(part, s);
        if (lost !== undefined) {
          this.#fetchers.remove(part);
          part.becomeNone(s);
          return result(lost);
        }
        if (s.leader === me) {
          this.#fetchers.remove(part);
          await part.becomeLeader(s, epoch === 'same', Date.now());
          this.o.logger.info({ ...part.describe(), replicas: s.replicas, stateVersion: s.stateVersion }, 'leading partition');
          return result(ErrorCode.None);
        }
        const leader = brokers.get(s.leader);
        if (epoch === 'same' && part.role === 'follower' && leader !== undefined && this.#fetchers.follows(part, leader)) return result(ErrorCode.None);
        part.becomeFollower(s);
        if (leader === undefined) {
          this.o.logger.error({ topic: s.topic, partition: s.partition, leader: s.leader }, 'LEADER_AND_ISR names a leader without its address: not fetching');
          this.#fetchers.remove(part);
        } else if (this.#following) {
          this.#fetchers.add(part, leader, s.leaderEpoch);
        }
        this.o.logger.info({ ...part.describe(), leaderAddress: leader }, 'following partition');
        return result(ErrorCode.None);
      });
    } catch (err) {
      this.o.logger.error({ topic: s.topic, partition: s.partition, leaderEpoch: s.leaderEpoch, err }, 'taking a partition role failed');
      return result(errorCodeOf(err));
    }
  }

  /**
   * Opens or creates the partition's replica log (the KIP-966 rule, docs/replication.md §8.1).
   * @returns undefined when the partition has a log; ReplicaLost otherwise
   */
  async #ensureReplica(p: Partition, s: PartitionState): Promise<ErrorCodeValue | undefined> {
    if (p.log !== undefined) return undefined;
    const found = await this.o.store.open(s.topic, s.partition, s.topicId);
    if (found === 'taken') {
      this.o.logger.error({ topic: s.topic, partition: s.partition, topicId: s.topicId }, 'the replica directory is taken by a paper partition or another topic id: ReplicaLost');
      return ErrorCode.ReplicaLost;
    }
    if (found !== 'missing') {
      p.attach(found);
      await this.#hwCheckpoints.load(p);
      return undefined;
    }
    const me = this.o.config.brokerId;
    const counted = s.leader === me || s.isr.includes(me);
    if (counted && !s.isNew) {
      this.o.logger.error({ topic: s.topic, partition: s.partition, leader: s.leader, isr: s.isr }, 'replica log missing for a partition this broker leads or is in the ISR of: ReplicaLost');
      return ErrorCode.ReplicaLost;
    }
    try {
      p.attach(await this.o.store.create(s.topic, s.partition, s.topicId));
    } catch (err) {
      if (!isReplicaDirTaken(err)) throw err;
      this.o.logger.error({ topic: s.topic, partition: s.partition, err }, 'the replica directory is taken: ReplicaLost');
      return ErrorCode.ReplicaLost;
    }
    return undefined;
  }

  /**
   * STOP_REPLICA (docs/replication.md §6.2): each partition takes no role (its waiting `acks
   * all` produces get NotLeaderForPartition, its fetching stops); with `delete` its replica log
   * is deleted. Called by handlers/stop-replica.ts and by the controller for its own broker.
   * @returns error-only StaleControllerEpoch for an older controller epoch; otherwise per
   *   partition 0, FencedLeaderEpoch (the broker holds a newer epoch) or a storage error
   */
  async handleStopReplica(req: StopReplicaRequest): Promise<StopReplicaResponse> {
    if (req.controllerEpoch < this.#controllerEpoch) return { errorCode: ErrorCode.StaleControllerEpoch, partitions: [] };
    this.#controllerEpoch = req.controllerEpoch;
    const results = await Promise.all(
      req.partitions.map(async ({ topic, partition, leaderEpoch }): Promise<PartitionError> => {
        const result = (errorCode: ErrorCodeValue): PartitionError => ({ topic, partition, errorCode });
        const p = this.get(topic, partition);
        if (p === undefined) {
          if (req.delete) await this.o.store.delete(topic, partition).catch(() => {});
          return result(ErrorCode.None);
        }
        if (p.acceptEpoch(leaderEpoch) === 'older') return result(ErrorCode.FencedLeaderEpoch);
        try {
          return await p.enqueue(async () => {
            this.#fetchers.remove(p);
            p.becomeNone();
            if (req.delete) {
              p.detach();
              this.#partitions.delete(key(topic, partition));
              await this.o.store.delete(topic, partition);
            }
            this.o.logger.info({ topic, partition, leaderEpoch, delete: req.delete }, 'stopped replica');
            return result(ErrorCode.None);
          });
        } catch (err) {
          this.o.logger.error({ topic, partition, err }, 'stopping a replica failed');
          return result(errorCodeOf(err));
        }
      }),
    );
    return { errorCode: ErrorCode.None, partitions: results };
  }

  /**
   * The broker's ZooKeeper session expired (docs/replication.md §9.1): every partition it leads
   * is fenced at once, since another leader may have been elected already.
   */
  fenceAll(reason: string): void {
    for (const p of this.#partitions.values()) p.fence(reason);
  }

  /** Every `replica.lag.time.max.ms / 2`: the ISR shrinks due (docs/replication.md §9.4). */
  #checkIsrs(): void {
    const now = Date.now();
    for (const p of this.#partitions.values()) p.maybeChangeIsr(now);
  }

  *#followerLags(): Iterable<{ topic: string; partition: number; lagBytes: number }> {
    for (const p of this.#partitions.values()) if (p.role === 'follower') yield { topic: p.topic, partition: p.partition, lagBytes: p.followerLagBytes };
  }

  #leaderCounts(): { led: number; underReplicated: number; underMinIsr: number } {
    let led = 0;
    let underReplicated = 0;
    let underMinIsr = 0;
    for (const p of this.#partitions.values()) {
      if (p.role !== 'leader') continue;
      led++;
      if (p.isr.length < p.replicas.length) underReplicated++;
      if (p.isr.length < p.minInsyncReplicas) underMinIsr++;
    }
    return { led, underReplicated, underMinIsr };
  }

  /**
   * The first step of stopping (docs/replication.md §15.2): stops every fetcher, and none starts
   * again, so that while a controlled shutdown takes this broker out of every ISR no leader sees
   * a fresh fetch of it and adds it back (it would stay there, dead, until
   * `replica.lag.time.max.ms` passed, holding up `acks all`). Partitions keep their roles.
   */
  async stopFollowing(): Promise<void> {
    this.#following = false;
    await this.#fetchers.close();
  }

  /**
   * Stops every fetcher and the timers, writes every high-watermark checkpoint that moved (§8.1);
   * waiting produces get NotLeaderForPartition. The logs are closed by the log manager.
   */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#isrTimer);
    clearInterval(this.#hwTimer);
    await this.#fetchers.close();
    await this.#hwCheckpoints.writeAll(this.#partitions.values());
    for (const p of this.#partitions.values()) p.becomeNone();
  }
}
