/**
 * The group consumer (the paper §3.3, docs/design.md §4): consumers of a group share the partitions of
 * the topics they subscribe to, each partition read by exactly one consumer thread, with no
 * master: every consumer registers in ZooKeeper, watches the broker and consumer registries
 * and, on any change, runs the paper's Algorithm 1 (see {@link assignPartitions}).
 *
 * One rebalance attempt:
 * 1. stop the fetchers and drop the messages fetched but not handed out;
 * 2. run `beforeRelease` (if given) and commit what it returns, commit the consumed offsets
 *    (when `autoCommit`), then release every partition owned;
 * 3. read the live brokers, each subscribed topic's partitions and the group's consumers;
 * 4. compute this consumer's ranges and claim each partition (ephemeral owner node);
 * 5. if a partition is still owned by another consumer (it has not released it yet), release
 *    what this attempt claimed, back off and try again; after `rebalanceMaxRetries` attempts
 *    fail with {@link RebalanceFailedError};
 * 6. start the fetchers from the committed offsets (or `autoOffsetReset`).
 *
 * Rebalances run one at a time; triggers that arrive meanwhile are folded into one more run.
 * Delivery is at-least-once: the committed offset of a partition is the offset after the last
 * message an iterator returned, committed on an interval, on {@link GroupConsumer.commitOffsets},
 * before a rebalance releases the partition and on close. For a compressed message set that is
 * the wrapper's offset until its last inner message is returned (see {@link GroupMessage.nextOffset}),
 * so a consumer that stops inside a wrapper gets the whole wrapper again after a restart.
 *
 * ZooKeeper sessions: when the connection drops, the consumer stops fetching and drops what it
 * has not handed out at once (its ownership may vanish if the session expires), and starts again
 * when the session comes back; after an expiry it rebalances on the new session, claiming anew.
 *
 * This file holds the membership (registration, watches, session events) and the rebalance
 * loop; the settings are in config.ts, the fetchers in fetcher-pool.ts and fetcher.ts, the
 * offsets in offset-commits.ts and offset-reset.ts, Algorithm 1 in rebalance.ts.
 */
import {
  BrokerRegistry,
  ConsumerRegistry,
  OwnershipRegistry,
  ZkClient,
  allPartitions,
  checkGroup,
  checkTopic,
  consumerThreadIds,
  newConsumerId,
  type BrokerInfo,
  type OwnershipFence,
  type ZkSessionCredentials,
  type ZkWatch,
  ReplicatedTopicRegistry,
} from '@klog/zk-registry';
import { type Logger, silentLogger } from '@klog/logger';
import { KlogError } from '../errors.js';
import { sleep } from '../sleep.js';
import {
  type GroupConsumerConfig,
  type OwnedPartition,
  type ProcessedPosition,
  type ResolvedGroupConsumerConfig,
  groupPartition,
  partitionKey as keyOf,
  replicatedBrokerId,
  resolveGroupConsumerConfig,
} from './config.js';
import { FetcherPool } from './fetcher-pool.js';
import { MessageQueue, type MessageStream, type PartitionTopicInfo } from './message-stream.js';
import { OffsetCommitter } from './offset-commits.js';
import { applyResetPolicy } from './offset-reset.js';
import { assignPartitions, comparePartitions, type PartitionRef } from './rebalance.js';

export type { GroupConsumerConfig, OwnedPartition, ProcessedPosition } from './config.js';

/**
 * A rebalance ran out of attempts: some partition stayed owned by another consumer (or
 * ZooKeeper kept failing) `attempts` times in a row. The consumer owns nothing afterwards and
 * its streams throw this error; close it.
 */
export class RebalanceFailedError extends KlogError {
  override readonly name: string = 'RebalanceFailedError';
  constructor(
    readonly groupId: string,
    readonly consumerId: string,
    readonly attempts: number,
    options?: { cause?: unknown },
  ) {
    super(
      `consumer ${consumerId} of group ${groupId} could not rebalance after ${attempts} attempts ` +
        `(partitions stayed owned by other consumers or ZooKeeper failed); raise rebalanceMaxRetries or rebalanceBackoffMs`,
      options,
    );
  }
}

/** Why an attempt did not complete. */
type AttemptResult = { ok: true } | { ok: false; reason: string; cause?: unknown };

/**
 * A member of a consumer group (docs/design.md §4). Call {@link createMessageStreams} once, iterate the
 * streams, {@link close} when done.
 */
export class GroupConsumer {
  /** This consumer's id in the group; its threads are `<consumerId>-<i>`. */
  readonly consumerId: string;
  private readonly groupId: string;
  private readonly config: ResolvedGroupConsumerConfig;
  private readonly beforeRelease: GroupConsumerConfig['beforeRelease'];
  private readonly logger: Logger;

  private zk: ZkClient | undefined;
  private brokers!: BrokerRegistry;
  private consumers!: ConsumerRegistry;
  private ownership!: OwnershipRegistry;
  private replicated!: ReplicatedTopicRegistry;
  /** Reads and commits the offsets; set on connecting. */
  private committer: OffsetCommitter | undefined;
  private subscription: Record<string, number> = {};
  private readonly queues = new Map<string, MessageQueue[]>();
  /** Partitions owned now (claimed in the last successful rebalance), by {@link keyOf}. */
  private owned = new Map<string, PartitionTopicInfo>();
  /** Live brokers as of the last rebalance (where the fetchers connect). */
  private liveBrokers = new Map<number, BrokerInfo>();
  private readonly fetchers: FetcherPool;
  private watches: ZkWatch[] = [];
  /** Set once the watches delivered their first values: later changes trigger rebalances. */
  private watching = false;
  private rebalanceWanted = false;
  private rebalanceLoop: Promise<void> | undefined;
  private readonly closing = new AbortController();
  private failure: Error | undefined;
  private started = false;

  /**
   * Checks the settings; connects nothing (see {@link createMessageStreams}).
   * @throws RangeError for a setting out of range; InvalidNameError (@klog/zk-registry) for a bad group id
   */
  constructor(config: GroupConsumerConfig) {
    this.groupId = checkGroup(config.groupId);
    this.consumerId = config.consumerId ?? newConsumerId(config.groupId);
    this.logger = config.logger ?? silentLogger;
    this.beforeRelease = config.beforeRelease;
    this.config = resolveGroupConsumerConfig(config);
    this.fetchers = new FetcherPool({
      fetchBytes: this.config.fetchBytes,
      maxFetchBytes: this.config.maxFetchBytes,
      maxDecompressedBytes: this.config.maxDecompressedBytes,
      maxWaitMs: this.config.maxWaitMs,
      autoOffsetReset: this.config.autoOffsetReset,
      logger: this.logger,
      onOffsetReset: config.onOffsetReset,
    });
  }

  /**
   * Joins the group: connects to ZooKeeper, registers `/consumers/<group>/ids/<consumerId>`
   * (ephemeral, value the subscription), watches the registries, runs the first rebalance
   * and starts fetching. Call it once.
   * @param topicCountMap topic → number of streams (consumer threads) for it, each ≥ 1
   * @returns topic → its streams; stream `i` is fed by the partitions of thread `<consumerId>-<i>`
   * @throws RangeError for a bad map or a second call; ZkConnectError when ZooKeeper does not
   *   answer; RebalanceFailedError when the first rebalance runs out of attempts
   */
  async createMessageStreams(topicCountMap: Record<string, number>): Promise<Record<string, MessageStream[]>> {
    if (this.started) throw new RangeError('createMessageStreams may be called once per GroupConsumer');
    if (this.closing.signal.aborted) throw new KlogError('the consumer is closed');
    this.started = true;
    const topics = Object.keys(topicCountMap).sort();
    if (topics.length === 0) throw new RangeError('topicCountMap names no topic');
    for (const topic of topics) {
      checkTopic(topic);
      const n = topicCountMap[topic]!;
      if (!Number.isInteger(n) || n < 1) throw new RangeError(`stream count ${n} of topic ${topic} must be a positive integer`);
      this.subscription[topic] = n;
      // A message is handed out only while the session that owns its partition surely lives.
      const mayHandOut = (): boolean => this.zk?.holdsSession === true;
      this.queues.set(topic, Array.from({ length: n }, (_, i) => new MessageQueue(topic, i, this.config.queuedChunksMax, mayHandOut)));
    }

    const zk = await ZkClient.connect(this.config.zookeeper, { sessionTimeoutMs: this.config.zkSessionTimeoutMs, logger: this.logger });
    this.zk = zk;
    this.brokers = new BrokerRegistry(zk);
    this.consumers = new ConsumerRegistry(zk);
    this.ownership = new OwnershipRegistry(zk);
    this.replicated = new ReplicatedTopicRegistry(zk);
    const committer = new OffsetCommitter(zk, this.groupId, this.config.autoOffsetReset, this.logger);
    this.committer = committer;
    try {
      zk.on('disconnected', () => this.pauseFetching('lost the connection to ZooKeeper'));
      zk.on('expired', () => this.pauseFetching('ZooKeeper session expired'));
      zk.on('connected', ({ reconnect }) => {
        if (reconnect) this.resumeFetching();
      });
      zk.on('session', () => void this.requestRebalance('new ZooKeeper session'));
      await this.consumers.registerConsumer(this.groupId, this.consumerId, this.subscription);
      this.logger.info({ group: this.groupId, consumerId: this.consumerId, subscription: this.subscription, sessionId: zk.sessionId }, 'consumer registered');

      const trigger = (what: string) => () => {
        if (this.watching) void this.requestRebalance(what);
      };
      this.watches.push(this.brokers.watchBrokerIds(trigger('brokers changed')));
      this.watches.push(this.consumers.watchConsumers(this.groupId, trigger('group members changed')));
      for (const topic of topics) this.watches.push(this.brokers.watchTopicBrokers(topic, trigger(`brokers of topic ${topic} changed`)));
      await Promise.all(this.watches.map((w) => w.ready));
      this.watching = true;
      await this.requestRebalance('consumer started');
      if (this.failure) throw this.failure;
    } catch (error) {
      await this.close().catch(() => {});
      throw error;
    }
    if (this.config.autoCommit) committer.startAutoCommit(this.config.autoCommitIntervalMs, () => this.commitOffsets());
    const out: Record<string, MessageStream[]> = {};
    for (const [topic, queues] of this.queues) out[topic] = queues;
    return out;
  }

  /**
   * Commits, for each owned partition, the offset after the last message an iterator returned
   * (docs/design.md §4): `/consumers/<group>/offsets/<topic>/<brokerId>-<partition>`. Partitions whose
   * offset did not move since the last commit are skipped.
   * @param processed when given, commit only these positions instead: for each listed partition
   *   that this consumer still owns, its `nextOffset` (at most the offset after the last message
   *   handed out), e.g. the last message of each partition the application has finished with;
   *   unlisted and no longer owned partitions are left as they are
   * @throws ZkError when ZooKeeper fails (the offsets are committed again next time)
   */
  commitOffsets(processed?: Iterable<ProcessedPosition>): Promise<void> {
    // Before connecting nothing is owned, so there is nothing to commit.
    return this.committer?.commit([...this.owned.values()], processed) ?? Promise.resolve();
  }

  /**
   * Leaves the group: stops the fetchers, commits (when `autoCommit`), releases the owned
   * partitions, unregisters, closes ZooKeeper; the streams' iterators end. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closing.signal.aborted) return;
    this.closing.abort();
    this.committer?.stopAutoCommit();
    for (const w of this.watches) w.close();
    await this.rebalanceLoop;
    const owned = [...this.owned.values()];
    await this.stopFetchers();
    const zk = this.zk;
    if (zk) {
      try {
        if (owned.length > 0) await this.finishBeforeRelease(owned, 'close');
        if (this.config.autoCommit && owned.length > 0) await this.commitOffsets();
        await this.release(owned);
        await this.consumers.unregisterConsumer(this.groupId, this.consumerId);
      } catch (err) {
        this.logger.warn({ err }, 'could not commit or release everything on close; ZooKeeper drops the ownership with the session');
      }
      this.owned.clear();
      await zk.close();
    }
    for (const queues of this.queues.values()) for (const q of queues) q.end();
    this.logger.info({ group: this.groupId, consumerId: this.consumerId }, 'consumer closed');
  }

  /** The partitions this consumer owns now, sorted by topic, broker id, partition. */
  ownedPartitions(): OwnedPartition[] {
    return [...this.owned.values()]
      .map(({ topic, brokerId, partition }) => ({ topic, brokerId, partition }))
      .sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : comparePartitions(a, b)));
  }

  /**
   * The current ZooKeeper session's id and password, for tests that force its expiry
   * (`expireSession` of `@klog/zk-registry/testing`).
   * @throws KlogError before {@link createMessageStreams}
   */
  sessionCredentials(): ZkSessionCredentials {
    if (!this.zk) throw new KlogError('not connected: call createMessageStreams first');
    return this.zk.sessionCredentials();
  }

  // ------------------------------------------------------------------ rebalance

  /**
   * Asks for a rebalance; resolves when no rebalance is wanted or running any more. Never rejects:
   * a rebalance that fails for good ends in {@link fail}, which the streams throw.
   */
  private requestRebalance(reason: string): Promise<void> {
    if (this.closing.signal.aborted || this.failure) return Promise.resolve();
    this.logger.debug({ reason }, 'rebalance requested');
    this.rebalanceWanted = true;
    this.rebalanceLoop ??= this.runRebalances().finally(() => {
      this.rebalanceLoop = undefined;
    });
    return this.rebalanceLoop;
  }

  private async runRebalances(): Promise<void> {
    while (this.rebalanceWanted && !this.closing.signal.aborted && !this.failure) {
      this.rebalanceWanted = false;
      await this.syncedRebalance();
    }
    // A reconnect while the rebalance ran could not restart the fetchers; do it now.
    if (!this.closing.signal.aborted && !this.failure) this.resumeFetching(true);
  }

  /** Algorithm 1 with bounded retries. On exhaustion the consumer fails (see RebalanceFailedError). */
  private async syncedRebalance(): Promise<void> {
    const attempts = this.config.rebalanceMaxRetries;
    let last: AttemptResult = { ok: false, reason: 'not run' };
    for (let attempt = 1; attempt <= attempts; attempt++) {
      if (this.closing.signal.aborted) return;
      const started = Date.now();
      try {
        last = await this.rebalanceAttempt();
      } catch (cause) {
        last = { ok: false, reason: 'ZooKeeper failed', cause };
      }
      if (last.ok) {
        this.logger.info(
          { group: this.groupId, consumerId: this.consumerId, attempt, ms: Date.now() - started, owned: this.ownedPartitions().map(keyOf) },
          'rebalance done',
        );
        return;
      }
      this.logger.info({ attempt, attempts, reason: last.reason, err: last.cause, backoffMs: this.config.rebalanceBackoffMs }, 'rebalance attempt failed; backing off');
      if (attempt < attempts && !(await sleep(this.config.rebalanceBackoffMs, this.closing.signal))) return;
    }
    const error = new RebalanceFailedError(this.groupId, this.consumerId, attempts, { cause: last.cause ?? last.reason });
    this.logger.error({ err: error, reason: last.reason }, 'rebalance failed; the consumer leaves the group and its streams throw');
    await this.fail(error);
  }

  /** One attempt of Algorithm 1; a failed attempt leaves no claim of its own behind. */
  private async rebalanceAttempt(): Promise<AttemptResult> {
    // 1-2: stop, commit, release.
    const previous = [...this.owned.values()];
    await this.stopFetchers();
    if (previous.length > 0) await this.finishBeforeRelease(previous, 'rebalance');
    if (this.config.autoCommit && previous.length > 0) await this.commitOffsets();
    await this.release(previous);
    this.owned = new Map();

    // 3: read the registries.
    const live = new Map<number, BrokerInfo>();
    for (const b of await this.brokers.listBrokers()) live.set(b.id, b);
    const members = await this.consumers.listConsumers(this.groupId);
    if (!members.some((m) => m.consumerId === this.consumerId)) {
      return { ok: false, reason: 'this consumer is not (yet) in the group registry' };
    }
    const wanted: Array<{ topic: string; stream: number; threadId: string; partition: PartitionRef }> = [];
    /** Where the fetcher of each replicated partition starts, by {@link keyOf}. */
    const fetchFrom = new Map<string, number>();
    for (const [topic, streams] of Object.entries(this.subscription)) {
      const paper = async (): Promise<PartitionRef[]> => allPartitions(await this.brokers.topicPartitions(topic)).filter((p) => live.has(p.brokerId));
      const partitions = (await this.replicatedPartitions(topic, live, fetchFrom)) ?? (await paper());
      const threads = members.flatMap((m) => consumerThreadIds(m.consumerId, m.subscription[topic] ?? 0));
      const assignment = assignPartitions(partitions, threads);
      consumerThreadIds(this.consumerId, streams).forEach((threadId, stream) => {
        for (const partition of assignment.get(threadId) ?? []) wanted.push({ topic, stream, threadId, partition });
      });
    }
    if (this.closing.signal.aborted) return { ok: false, reason: 'closing' };

    // 4-5: claim; on a conflict give back what this attempt took.
    const claimed: OwnedPartition[] = [];
    const fences = new Map<string, OwnershipFence>();
    try {
      for (const w of wanted) {
        const fence = await this.ownership.claimFenced(this.groupId, w.topic, groupPartition(w.partition), w.threadId);
        if (fence) fences.set(keyOf({ topic: w.topic, ...w.partition }), fence);
        else {
          await this.release(claimed);
          const owner = await this.ownership.owner(this.groupId, w.topic, groupPartition(w.partition)).catch(() => undefined);
          return { ok: false, reason: `${keyOf({ topic: w.topic, ...w.partition })} is still owned by ${owner ?? 'another consumer'}` };
        }
        claimed.push({ topic: w.topic, ...w.partition });
      }
    } catch (error) {
      await this.release(claimed).catch(() => {});
      throw error;
    }

    // 6: start from the committed offsets.
    const owned = new Map<string, PartitionTopicInfo>();
    for (const w of wanted) {
      const from = fetchFrom.get(keyOf({ topic: w.topic, ...w.partition }));
      const info: PartitionTopicInfo = {
        topic: w.topic,
        brokerId: w.partition.brokerId,
        partition: w.partition.partition,
        ...(from !== undefined ? { fetchFrom: from } : {}),
        queue: this.queues.get(w.topic)![w.stream]!,
        consumedOffset: undefined,
        committedOffset: undefined,
      };
      info.consumedOffset = await this.committer!.read(info);
      info.committedOffset = info.consumedOffset;
      owned.set(keyOf(info), info);
    }
    await applyResetPolicy(this.config.autoOffsetReset, [...owned.values()].filter((i) => i.consumedOffset === undefined), live, this.logger);
    this.owned = owned;
    this.committer!.fences = fences;
    this.liveBrokers = live;
    if (this.closing.signal.aborted) return { ok: true };
    if (this.zk?.isConnected) this.startFetchers();
    return { ok: true };
  }

  /** Runs the `beforeRelease` callback and commits the positions it returns. */
  private async finishBeforeRelease(partitions: readonly OwnedPartition[], why: 'rebalance' | 'close'): Promise<void> {
    if (!this.beforeRelease) return;
    let positions;
    try {
      positions = await this.beforeRelease(partitions.map(({ topic, brokerId, partition }) => ({ topic, brokerId, partition })), why);
    } catch (err) {
      this.logger.warn({ err, why }, 'beforeRelease callback failed; releasing without its commit');
      return;
    }
    if (positions !== undefined) await this.commitOffsets(positions);
  }

  private async release(partitions: readonly OwnedPartition[]): Promise<void> {
    for (const p of partitions) await this.ownership.release(this.groupId, p.topic, groupPartition(p));
  }

  /**
   * A replicated topic's partitions `0..N-1` for Algorithm 1 (docs/replication.md §14), each
   * with the broker its fetcher asks first in `fetchFrom` (its leader when live, else the
   * lowest live broker); undefined for a paper topic. No live broker: none.
   */
  private async replicatedPartitions(
    topic: string,
    live: ReadonlyMap<number, BrokerInfo>,
    fetchFrom: Map<string, number>,
  ): Promise<PartitionRef[] | undefined> {
    const definition = await this.replicated.readDefinition(topic);
    if (!definition) return undefined;
    const anyLive = [...live.keys()].sort((a, b) => a - b)[0];
    if (anyLive === undefined) return [];
    const states = await this.replicated.readPartitionStates(topic);
    return definition.partitions.map((_replicas, partition) => {
      const leader = states.get(partition)?.state.leader ?? -1;
      fetchFrom.set(keyOf({ topic, brokerId: replicatedBrokerId, partition }), live.has(leader) ? leader : anyLive);
      return { brokerId: replicatedBrokerId, partition };
    });
  }

  // ------------------------------------------------------------------ fetchers

  private startFetchers(): void {
    this.fetchers.start(this.owned.values(), this.liveBrokers);
  }

  /**
   * Stops the fetchers and drops the messages they queued but no iterator took, at once (no
   * message is handed out after this call returns); resolves when they have finished.
   */
  private stopFetchers(): Promise<void> {
    return this.fetchers.stop(this.queues.values(), this.owned.values());
  }

  private pauseFetching(why: string): void {
    if (!this.fetchers.running) return;
    this.logger.warn({ group: this.groupId, consumerId: this.consumerId, owned: this.ownedPartitions().map(keyOf) }, `${why}: fetching stopped`);
    void this.stopFetchers();
  }

  /** Restarts the fetchers of the owned partitions after the session came back, unless a rebalance runs (it starts them). */
  private resumeFetching(fromRebalanceLoop = false): void {
    if (!fromRebalanceLoop && this.rebalanceLoop !== undefined) return;
    if (this.closing.signal.aborted || this.failure || !this.zk?.isConnected || this.fetchers.running || this.owned.size === 0) return;
    this.logger.info({ owned: this.ownedPartitions().map(keyOf) }, 'ZooKeeper session kept; fetching again');
    this.startFetchers();
  }

  /** Leaves the group (so the other members take its share), then makes the streams throw `error`. */
  private async fail(error: Error): Promise<void> {
    this.failure = error;
    await this.consumers.unregisterConsumer(this.groupId, this.consumerId).catch((err: unknown) => {
      this.logger.warn({ err }, 'could not unregister after a failed rebalance');
    });
    for (const queues of this.queues.values()) for (const q of queues) q.fail(error);
  }
}
