/**
 * The controller (docs/replication.md §5): every broker in cluster mode runs the election
 * (§5.1); the winner loads the cluster's state, watches it (§5.2) and handles one event at a
 * time (event-queue.ts): what to write and send is decided by the pure functions of
 * decisions.ts, written by apply.ts in fenced multis, sent by request-sender.ts. A controller
 * resigns (drops its queued work, closes its connections, goes back to the election) when its
 * session expires, a fenced write fails its epoch check, or `/controller` names another.
 */
import { ErrorCode, type ControlledShutdownResponse } from '@klog/protocol';
import {
  AdminRequestRegistry,
  BrokerRegistry,
  ControllerFencedError,
  ControllerRegistry,
  removePartitionStateOps,
  removeTopicOps,
  ReplicatedTopicRegistry,
  topicPartitionsPath,
  ZkMultiError,
  type ControllerInfo,
  type ControllerLease,
  type PreferredLeaderElectionNode,
  type TopicDefinition,
  type ZkClient,
  type ZkOp,
  type ZkWatch,
} from '@klog/zk-registry';
import { retry } from '@klog/retry';
import type { Logger } from 'pino';
import { sendRequests, writeStates, type ApplyContext, type SentRequests } from './apply.js';
import type { ControllerMetrics } from './controller-metrics.js';
import {
  brokerChanges,
  decideBrokerChange,
  decideControlledShutdown,
  decideNewTopic,
  decideOnBecomingController,
  decidePreferredLeaders,
  decideReplicaLost,
  decideTopicDeletion,
  type PreferredOutcome,
} from './decisions.js';
import { EventQueue } from './event-queue.js';
import type { Plan } from './plan.js';
import { RequestSender, type RequestTarget } from './request-sender.js';
import { offlinePartitionCount, parsePartitionKey, partitionKey } from './view.js';
import { loadView, MutableView, readLiveBrokers, readTopicStates } from './zk-view.js';

/** What a controller runs with. */
export interface ControllerOptions {
  readonly zk: ZkClient;
  readonly brokerId: number;
  readonly logger: Logger;
  readonly metrics: ControllerMetrics;
  /** `unclean.leader.election.enable` (§12). */
  readonly uncleanLeaderElection: boolean;
  /** The brokers' default `min.insync.replicas` (§11), sent for topics without their own. */
  readonly defaultMinInsyncReplicas: number;
  /** `controller.batch.delay.ms` (tests only). */
  readonly batchDelayMs: number;
  /** How to reach a broker: this one through its handlers, others over a socket. */
  readonly target: (brokerId: number, address: { host: string; port: number }) => RequestTarget;
}

/** One tenure as controller. */
interface Term {
  readonly lease: ControllerLease;
  readonly view: MutableView;
  readonly sender: RequestSender;
  readonly ctx: ApplyContext;
  readonly watches: ZkWatch[];
  /** Topics whose STOP_REPLICA requests are out (§5.3, deletion). */
  readonly deletions: Set<string>;
  ended: boolean;
  /** Resolves when the term ends. */
  readonly over: Promise<void>;
  end(): void;
}

/** Most attempts of one event's writes when a partition state changed under them (a leader's ISR write). */
const maxDecideAttempts = 10;

/** The controller of one broker. {@link start} joins the election; {@link stop} leaves it. */
export class Controller {
  readonly #o: ControllerOptions;
  readonly #queue: EventQueue;
  readonly #registry: ControllerRegistry;
  readonly #brokers: BrokerRegistry;
  readonly #topics: ReplicatedTopicRegistry;
  readonly #admin: AdminRequestRegistry;
  #term: Term | undefined;
  #electionWatch: ZkWatch | undefined;
  #stopped = false;
  readonly #onExpired = (): void => this.#resign('the ZooKeeper session expired');

  constructor(o: ControllerOptions) {
    this.#o = o;
    this.#queue = new EventQueue(o.logger);
    this.#registry = new ControllerRegistry(o.zk, { logger: o.logger });
    this.#brokers = new BrokerRegistry(o.zk, { logger: o.logger });
    this.#topics = new ReplicatedTopicRegistry(o.zk, { logger: o.logger });
    this.#admin = new AdminRequestRegistry(o.zk, { logger: o.logger });
  }

  /** True while this broker is the controller. */
  get active(): boolean {
    return this.#term !== undefined && !this.#term.ended;
  }

  /** This controller's epoch while active. */
  get epoch(): number | undefined {
    return this.#term?.lease.epoch;
  }

  /** Resolves once every queued event has been handled (tests). */
  idle(): Promise<void> {
    return this.#queue.idle();
  }

  /** Joins the election (§5.1): watches `/controller` and tries to win whenever it is missing. */
  start(): void {
    this.#o.zk.on('expired', this.#onExpired);
    this.#electionWatch = this.#registry.watchController((info, present) => this.#onController(info, present));
  }

  async #onController(info: ControllerInfo | undefined, present: boolean): Promise<void> {
    if (this.#stopped) return;
    if (info !== undefined) this.#o.metrics.sawEpoch(info.epoch);
    const term = this.#term;
    if (term !== undefined && present && (info?.brokerId !== this.#o.brokerId || info.epoch !== term.lease.epoch)) {
      this.#resign(`/controller names broker ${info?.brokerId ?? '?'} at epoch ${info?.epoch ?? '?'}`);
    }
    if (present || this.active) return;
    const lease = await this.#registry.elect(this.#o.brokerId);
    if (lease !== undefined && !this.#stopped) this.#become(lease);
  }

  #become(lease: ControllerLease): void {
    const o = this.#o;
    this.#o.metrics.sawEpoch(lease.epoch);
    const view = new MutableView(o.brokerId, lease.epoch, o.uncleanLeaderElection, o.defaultMinInsyncReplicas);
    const logger = o.logger.child({ controllerEpoch: lease.epoch });
    const sender = new RequestSender((b) => {
      const live = view.live.get(b);
      return live === undefined ? undefined : o.target(b, live);
    }, logger);
    let end!: () => void;
    const over = new Promise<void>((resolve) => (end = resolve));
    const term: Term = {
      lease,
      view,
      sender,
      ctx: { registry: this.#registry, lease, view, sender, metrics: o.metrics, logger, batchDelayMs: o.batchDelayMs },
      watches: [],
      deletions: new Set(),
      ended: false,
      over,
      end,
    };
    this.#term = term;
    o.metrics.setActive(true, () => offlinePartitionCount(view));
    logger.info({ brokerId: o.brokerId }, 'became controller');
    this.#event(term, 'become controller', async () => {
      // A failure to read or write (ZooKeeper away longer than the operation timeout) is tried
      // again: this broker holds /controller, so no other can take over meanwhile.
      const abort = new AbortController();
      void term.over.then(() => abort.abort());
      await retry(
        async () => {
          await loadView(o.zk, view);
          for (const topic of await this.#admin.listTopicDeletions()) if (view.topics.has(topic)) view.deleting.add(topic);
          await this.#decideAndApply(term, () => decideOnBecomingController(view));
        },
        {
          initialMs: 200,
          maxMs: 5000,
          signal: abort.signal,
          retriable: (err) => !(err instanceof ControllerFencedError) && !term.ended,
          onRetry: ({ error, delayMs }) => logger.warn({ err: error, delayMs }, 'loading the cluster state failed; trying again'),
        },
      );
      if (term.ended) return;
      term.watches.push(
        this.#brokers.watchBrokerIds(() => this.#event(term, 'brokers changed', () => this.#onBrokers(term))),
        this.#topics.watchDefinitions((defs) => this.#event(term, 'topics changed', () => this.#onTopics(term, defs))),
        this.#admin.watchTopicDeletions((topics) => this.#event(term, 'topic deletions', () => this.#onDeletions(term, topics))),
        this.#admin.watchPreferredLeaderElection((node) => this.#event(term, 'preferred-leader election', () => this.#onPreferred(term, node))),
      );
    });
  }

  /** Ends the current term: queued work dropped, connections closed, watches stopped. */
  #resign(reason: string): void {
    const term = this.#term;
    if (term === undefined || term.ended) return;
    term.ended = true;
    this.#term = undefined;
    this.#queue.clear();
    term.sender.close();
    for (const w of term.watches) w.close();
    term.end();
    this.#o.metrics.setActive(false);
    this.#o.logger.warn({ controllerEpoch: term.lease.epoch, reason }, 'resigned as controller');
  }

  /** Queues `run` for `term`; skipped once the term ended; a fenced write resigns. */
  #event(term: Term, name: string, run: () => Promise<void>): void {
    this.#queue.put({
      name,
      run: async () => {
        if (term.ended) return;
        try {
          await run();
        } catch (err) {
          if (err instanceof ControllerFencedError) {
            this.#o.logger.warn({ controllerEpoch: term.lease.epoch, event: name, reason: err.reason, err }, 'a fenced write was refused: this controller was replaced');
            this.#resign(err.message);
          } else if (!term.ended) throw err;
        }
      },
    });
  }

  /**
   * Decides with `decide` and carries the plan out. A partition state that changed under the
   * write (`BadVersion`: a leader's ISR write) is read again and the event decided again.
   */
  async #decideAndApply(term: Term, decide: () => Plan): Promise<SentRequests> {
    for (let attempt = 0; ; attempt++) {
      const plan = decide();
      try {
        await writeStates(term.ctx, plan);
        const sent = sendRequests(term.ctx, plan);
        this.#watchAnswers(term, sent);
        return sent;
      } catch (err) {
        if (!(err instanceof ZkMultiError) || err.reason !== 'BadVersion' || attempt >= maxDecideAttempts) throw err;
        term.ctx.logger.info({ attempt, writes: plan.writes.length, op: err.op.path }, 'a partition state changed under the write; reading the states again and deciding again');
        const topics = new Set(plan.writes.map((w) => parsePartitionKey(w.key).topic));
        for (const topic of topics) await readTopicStates(this.#topics, term.view, topic);
      }
    }
  }

  /**
   * Reads the partition states of `topics` (every known topic by default) again before a
   * decision: the leaders change their ISRs themselves (§3.2), and an election, a preferred
   * leader or a controlled shutdown decided on an ISR the leader has since grown would miss a
   * candidate (a write on a stale version is refused and redone anyway, §3.3).
   */
  async #refresh(term: Term, topics: Iterable<string> = [...term.view.topics.keys()]): Promise<void> {
    for (const topic of topics) await readTopicStates(this.#topics, term.view, topic);
  }

  /** A `ReplicaLost` answer becomes an event (§5.3). */
  #watchAnswers(term: Term, sent: SentRequests): void {
    for (const { brokerId, body, answer } of sent.leaderAndIsr) {
      void answer.then((a) => {
        for (const p of a?.partitions ?? []) {
          if (p.errorCode !== ErrorCode.ReplicaLost) continue;
          const key = partitionKey(p.topic, p.partition);
          const leaderEpoch = body.partitions.find((x) => x.topic === p.topic && x.partition === p.partition)?.leaderEpoch ?? -1;
          term.ctx.logger.warn({ brokerId, partition: key, leaderEpoch }, 'broker lost its replica; taking it out of the ISR');
          this.#event(term, 'replica lost', async () => {
            await this.#refresh(term, [p.topic]);
            await this.#decideAndApply(term, () => decideReplicaLost(term.view, key, brokerId, leaderEpoch));
          });
        }
      });
    }
  }

  async #onBrokers(term: Term): Promise<void> {
    const live = await readLiveBrokers(this.#brokers);
    const changes = brokerChanges(term.view.liveEpochs(), new Map([...live].map(([id, b]) => [id, b.epoch])));
    if (changes.gone.length === 0 && changes.back.length === 0) return;
    term.ctx.logger.info({ gone: changes.gone, back: changes.back }, 'brokers changed');
    for (const b of changes.gone) {
      term.sender.removeBroker(b);
      term.view.shuttingDown.delete(b);
    }
    term.view.live = live;
    await this.#refresh(term);
    await this.#decideAndApply(term, () => decideBrokerChange(term.view, changes));
  }

  async #onTopics(term: Term, definitions: ReadonlyMap<string, TopicDefinition>): Promise<void> {
    const view = term.view;
    for (const [topic, definition] of definitions) {
      const known = view.topics.get(topic);
      if (known?.id === definition.id) continue;
      if (known !== undefined) view.dropTopic(topic);
      view.setTopic(topic, definition);
      await readTopicStates(this.#topics, view, topic);
      term.ctx.logger.info({ topic, id: definition.id, partitions: definition.partitions.length }, 'new replicated topic');
      await this.#decideAndApply(term, () => decideNewTopic(view, topic));
    }
    for (const topic of [...view.topics.keys()]) if (!definitions.has(topic) && !term.deletions.has(topic)) view.dropTopic(topic);
  }

  async #onDeletions(term: Term, topics: readonly string[]): Promise<void> {
    for (const topic of topics) {
      if (term.deletions.has(topic)) continue;
      if (!term.view.topics.has(topic)) {
        const definition = await this.#topics.readDefinition(topic);
        if (definition === undefined) {
          term.ctx.logger.warn({ topic }, 'deletion asked for a topic that is not a replicated topic; removing the request');
          await this.#commit(term, [this.#admin.removeTopicDeletionOp(topic)]);
          continue;
        }
        term.view.setTopic(topic, definition);
        await readTopicStates(this.#topics, term.view, topic);
      }
      term.deletions.add(topic);
      term.view.deleting.add(topic);
      term.ctx.logger.info({ topic }, 'deleting topic');
      const sent = await this.#decideAndApply(term, () => decideTopicDeletion(term.view, topic));
      void Promise.all(sent.stopReplica.map((s) => s.answer)).then(() => this.#event(term, 'topic deleted', () => this.#finishDeletion(term, topic)));
    }
  }

  /** Removes a deleted topic's nodes (§5.3): states and partition nodes, then the definition and the request node, last. */
  async #finishDeletion(term: Term, topic: string): Promise<void> {
    const partitions = await this.#topics.listPartitions(topic);
    const perPartition = partitions.flatMap((p) => removePartitionStateOps(topic, p));
    for (let i = 0; i < perPartition.length; i += 200) await this.#commit(term, perPartition.slice(i, i + 200));
    const hasPartitionsNode = (await this.#o.zk.exists(topicPartitionsPath(topic))) !== undefined;
    await this.#commit(term, [...removeTopicOps(topic, { hasPartitionsNode }), this.#admin.removeTopicDeletionOp(topic)]);
    term.deletions.delete(topic);
    term.view.dropTopic(topic);
    term.ctx.logger.info({ topic, partitions: partitions.length }, 'topic deleted');
  }

  async #onPreferred(term: Term, node: PreferredLeaderElectionNode | undefined): Promise<void> {
    if (node === undefined) return;
    const request = node.request;
    let outcome: PreferredOutcome | undefined;
    if (request !== undefined) {
      const keys = request.all ? undefined : request.partitions.map((p) => partitionKey(p.topic, p.partition));
      await this.#refresh(term, request.all ? undefined : new Set(request.partitions.map((p) => p.topic).filter((t) => term.view.topics.has(t))));
      await this.#decideAndApply(term, () => {
        const r = decidePreferredLeaders(term.view, keys);
        outcome = r.outcome;
        return r.plan;
      });
    }
    await this.#commit(term, [this.#admin.removePreferredLeaderElectionOp(node.version)]);
    term.ctx.logger.info(
      { moved: outcome?.moved.map((m) => `${m.key}: ${m.from} → ${m.to}`), already: outcome?.already, notPossible: outcome?.impossible },
      'preferred-leader election done',
    );
  }

  /** One fenced multi of the term; a node already gone (`NoNode` of a remove) is fine. */
  async #commit(term: Term, ops: ZkOp[]): Promise<void> {
    try {
      await this.#registry.commitFenced(term.lease, ops);
    } catch (err) {
      if (!(err instanceof ZkMultiError && err.reason === 'NoNode' && err.op.op === 'remove')) throw err;
      const rest = ops.filter((_, i) => i !== err.index);
      if (rest.length > 0) await this.#commit(term, rest);
    }
  }

  /**
   * CONTROLLED_SHUTDOWN from broker `brokerId` at `brokerEpoch` (§6.5, §15.2), through the event
   * queue: the broker is marked shutting down, its leaderships move, it leaves every ISR. Answers
   * once the new leaders have answered their LEADER_AND_ISR (or `waitMs` passed).
   * @returns NotController when this broker is not (or stops being) the controller,
   *   StaleBrokerEpoch for an epoch other than the broker's registration; else the partitions it still leads
   */
  async controlledShutdown(brokerId: number, brokerEpoch: number, waitMs: number): Promise<ControlledShutdownResponse> {
    const term = this.#term;
    const notController: ControlledShutdownResponse = { errorCode: ErrorCode.NotController, remaining: [] };
    if (term === undefined || term.ended) return notController;
    const decided = new Promise<{ response: ControlledShutdownResponse; sent?: SentRequests }>((resolve) => {
      this.#event(term, 'controlled shutdown', async () => {
        if ((term.view.live.get(brokerId)?.epoch ?? -1) < brokerEpoch) await this.#onBrokers(term);
        if (term.view.live.get(brokerId)?.epoch !== brokerEpoch) {
          resolve({ response: { errorCode: ErrorCode.StaleBrokerEpoch, remaining: [] } });
          return;
        }
        term.view.shuttingDown.add(brokerId);
        await this.#refresh(term);
        let remaining: string[] = [];
        const sent = await this.#decideAndApply(term, () => {
          const r = decideControlledShutdown(term.view, brokerId);
          remaining = r.remaining;
          return r.plan;
        });
        term.ctx.logger.info({ brokerId, remaining }, 'controlled shutdown: leaderships moved');
        resolve({ response: { errorCode: ErrorCode.None, remaining: remaining.map(parsePartitionKey) }, sent });
      });
    });
    const result = await Promise.race([decided, term.over.then(() => undefined)]);
    if (result === undefined) return notController;
    if (result.sent !== undefined) {
      const told = Promise.all(result.sent.leaderAndIsr.map((s) => s.answer));
      await Promise.race([told, new Promise((r) => setTimeout(r, waitMs).unref()), term.over]);
    }
    return result.response;
  }

  /**
   * Leaves the election: a controller removes `/controller` (if its session holds it) so that
   * the next one is elected at once (§5.1). Call after this broker's own controlled shutdown.
   */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#electionWatch?.close();
    this.#o.zk.off('expired', this.#onExpired);
    const term = this.#term;
    this.#resign('the broker is shutting down');
    await this.#queue.idle();
    if (term !== undefined) await this.#registry.resign(term.lease).catch((err: unknown) => this.#o.logger.warn({ err }, 'could not remove /controller'));
  }
}
