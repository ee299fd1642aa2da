/**
 * A replicated cluster for the system tests of docs/replication.md §17: brokers as child
 * processes over the real ZooKeeper (a random chroot), a replicated topic created through the
 * admin, producers with `acks all` that record every acknowledged (partition, offset, value),
 * and the end checks: every acknowledged message is read back, in order per partition, and the
 * replicas' segment files are byte-identical.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Admin, Connection, SimpleConsumer, ZkProducer, type LeaderRetryOptions, type ZkProducerOptions } from '@klog/client';
import { decodeTopicMetadataResponse, encodeTopicMetadataRequest, errorCodeName } from '@klog/protocol';
import { ControllerRegistry, ReplicatedTopicRegistry, type ControllerInfo, type PartitionState } from '@klog/zk-registry';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { BrokerProcess, ZkClient, killAll, removeLogDirs, sleep, waitFor } from './harness.js';
import { describeDifferences, diffAllReplicas } from './replica-files.js';

/** Settings of a {@link ReplicatedCluster}. */
export interface ClusterSettings {
  readonly brokers: number;
  /** ZooKeeper session timeout of the brokers, ms: one for all, or one per broker id. */
  readonly sessionTimeoutMs: number | readonly number[];
  /** Broker properties (docs/replication.md §15.4), written to each broker's `--config` file. */
  readonly properties?: Readonly<Record<string, string | number | boolean>>;
  /** More command-line flags for every broker. */
  readonly flags?: readonly string[];
}

/** A message a producer sent and the leader acknowledged with `acks all`. */
export interface Acked {
  readonly partition: number;
  readonly offset: number;
  readonly value: string;
}

/** Brokers 0..n-1 over one ZooKeeper chroot, with an admin and a ZooKeeper session of the test's own. */
export class ReplicatedCluster {
  readonly brokers: BrokerProcess[] = [];
  connect = '';
  /** Holds the brokers' config files and log dirs. */
  root = '';
  zk!: ZkClient;
  admin!: Admin;
  registry!: ReplicatedTopicRegistry;

  constructor(readonly settings: ClusterSettings) {}

  /** Starts ZooKeeper's chroot, the brokers (one after the other) and the admin. */
  async start(): Promise<this> {
    await assertZooKeeperRunning();
    this.connect = testConnectString('klog-replication');
    this.zk = await ZkClient.connect(this.connect);
    this.registry = new ReplicatedTopicRegistry(this.zk);
    this.root = mkdtempSync(join(tmpdir(), 'klog-replication-'));
    for (let id = 0; id < this.settings.brokers; id++) {
      const logDir = join(this.root, `broker-${id}`);
      mkdirSync(logDir);
      const config = join(this.root, `broker-${id}.properties`);
      const props = Object.entries(this.settings.properties ?? {}).map(([k, v]) => `${k}=${String(v)}`);
      writeFileSync(config, `${props.join('\n')}\n`);
      const flags = ['--config', config, '--zk-session-timeout-ms', String(this.sessionTimeoutOf(id)), ...(this.settings.flags ?? [])];
      this.brokers.push(await new BrokerProcess(id, this.connect, logDir, flags).start());
    }
    this.admin = new Admin({ zookeeper: this.connect });
    return this;
  }

  /** The ZooKeeper session timeout of broker `id`, ms. */
  sessionTimeoutOf(id: number): number {
    const s = this.settings.sessionTimeoutMs;
    return typeof s === 'number' ? s : s[id]!;
  }

  /** The broker id of the controller (docs/replication.md §5.1), undefined while nobody is. */
  async controller(): Promise<number | undefined> {
    return (await new ControllerRegistry(this.zk).readController())?.brokerId;
  }

  /** Kills what still runs, removes the log dirs and the chroot. */
  async close(): Promise<void> {
    await this.admin?.close();
    await killAll();
    await this.zk?.close();
    removeLogDirs(this.brokers);
    if (this.root !== '') rmSync(this.root, { recursive: true, force: true });
    if (this.connect !== '') await removeChroot(this.connect);
  }

  /** The log dirs of the brokers, by broker id. */
  get logDirs(): string[] {
    return this.brokers.map((b) => b.logDir);
  }

  /** The partition's state in ZooKeeper, undefined while it has none. */
  async state(topic: string, partition: number): Promise<PartitionState | undefined> {
    return (await this.registry.readPartitionState(topic, partition))?.state;
  }

  /** The leader of every partition of `topic`, by partition (−1: offline). */
  async leaders(topic: string, partitions: number): Promise<number[]> {
    return Promise.all(Array.from({ length: partitions }, async (_, p) => (await this.state(topic, p))?.leader ?? -1));
  }

  /** Waits until every partition of `topic` has a live leader and an ISR of `isrSize`. */
  async waitForIsr(topic: string, partitions: number, isrSize: number, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const states = await Promise.all(Array.from({ length: partitions }, (_, p) => this.state(topic, p)));
      if (states.every((s) => s !== undefined && s.leader >= 0 && this.brokers[s.leader]!.running && s.isr.length === isrSize)) return;
      if (Date.now() > deadline) {
        const last = JSON.stringify(states.map((s) => s && { leader: s.leader, epoch: s.leaderEpoch, isr: s.isr }));
        throw new Error(`timed out after ${timeoutMs} ms waiting for every ISR of ${topic} at ${isrSize}; states ${last}\n${this.problems()}`);
      }
      await sleep(100);
    }
  }

  /**
   * When a broker (any of them) first logged a line with message `msg` at or after `since`
   * (pino's `time`, ms since the epoch), undefined when none did.
   */
  firstLogged(msg: string, since: number): number | undefined {
    const times = this.brokers.flatMap((b) => b.logged((l) => l['msg'] === msg && typeof l['time'] === 'number' && l['time'] >= since).map((l) => l['time'] as number));
    return times.length === 0 ? undefined : Math.min(...times);
  }

  /** The controller named in `/controller` (docs/replication.md §5.1) with its epoch, undefined while there is none. */
  async controllerInfo(): Promise<ControllerInfo | undefined> {
    return new ControllerRegistry(this.zk).readController();
  }

  /**
   * What every running broker (frozen ones left out, see `paused`) says about the leaders of
   * `topic` against ZooKeeper (docs/replication.md §17.7): each partition has a leader in its
   * state that is a running broker; every running broker's TOPIC_METADATA answer (its metadata
   * cache, §13.1) names the same leader at the same leader epoch; and each running broker's
   * `klog_partitions_led` (its own role, §15.3) equals the partitions ZooKeeper says it leads,
   * so that no two brokers lead one partition. Needs the brokers started with `--metrics-port`.
   * @returns a list of disagreements, empty when all agree
   */
  async leaderDisagreements(topic: string, partitions: number, paused: ReadonlySet<number> = new Set()): Promise<string[]> {
    const problems: string[] = [];
    const states = await this.registry.readPartitionStates(topic);
    const live = this.brokers.filter((b) => b.running && !paused.has(b.id));
    const ledInZk = new Map<number, number>();
    for (let p = 0; p < partitions; p++) {
      const s = states.get(p)?.state;
      if (s === undefined || s.leader < 0) problems.push(`${topic}/${p}: no leader in ZooKeeper`);
      else if (!live.some((b) => b.id === s.leader)) problems.push(`${topic}/${p}: ZooKeeper names broker ${s.leader}, which is not running`);
      else ledInZk.set(s.leader, (ledInZk.get(s.leader) ?? 0) + 1);
    }
    for (const b of live) {
      const c = new Connection({ host: '127.0.0.1', port: b.port, connectTimeoutMs: 5000, requestTimeoutMs: 10_000 });
      try {
        const r = await c.request(encodeTopicMetadataRequest([topic]));
        const m = decodeTopicMetadataResponse(r.errorCode, r.body);
        const entry = m.topics.find((t) => t.topic === topic);
        if (m.errorCode !== 0 || entry === undefined || entry.errorCode !== 0) {
          problems.push(`broker ${b.id}: TOPIC_METADATA answered ${errorCodeName(entry?.errorCode ?? m.errorCode)}`);
        } else {
          for (const e of entry.partitions) {
            const s = states.get(e.partition)?.state;
            if (s !== undefined && (e.leader !== s.leader || e.leaderEpoch !== s.leaderEpoch)) {
              problems.push(`broker ${b.id}: ${topic}/${e.partition} led by ${e.leader} at epoch ${e.leaderEpoch} in its metadata, by ${s.leader} at epoch ${s.leaderEpoch} in ZooKeeper`);
            }
          }
          if (entry.partitions.length !== partitions) problems.push(`broker ${b.id}: its metadata has ${entry.partitions.length} partitions of ${topic}`);
        }
      } catch (err) {
        problems.push(`broker ${b.id}: TOPIC_METADATA failed: ${(err as Error).message}`);
      } finally {
        await c.close();
      }
      const led = await b.metric('klog_partitions_led').catch((err: Error) => `unreadable (${err.message})`);
      if (led !== (ledInZk.get(b.id) ?? 0)) problems.push(`broker ${b.id}: klog_partitions_led ${led}, ZooKeeper names it leader of ${ledInZk.get(b.id) ?? 0}`);
    }
    return problems;
  }

  /** Polls {@link leaderDisagreements} until there is none; throws with the last ones after `timeoutMs`. */
  async waitForLeaderAgreement(topic: string, partitions: number, timeoutMs = 30_000, paused?: ReadonlySet<number>): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const problems = await this.leaderDisagreements(topic, partitions, paused);
      if (problems.length === 0) return;
      if (Date.now() > deadline) throw new Error(`leaders still disagree after ${timeoutMs} ms:\n${problems.slice(0, 30).join('\n')}\n${this.problems()}`);
      await sleep(200);
    }
  }

  /** The warn and error lines the brokers logged (the last 20 of each), for a failure message. */
  problems(): string {
    return this.brokers
      .map((b) => {
        const lines = b.logged((l) => typeof l['level'] === 'number' && l['level'] >= 40).slice(-20);
        return `broker ${b.id}:\n${lines.map((l) => JSON.stringify(l)).join('\n')}`;
      })
      .join('\n');
  }

  /**
   * Waits until every replica of every partition of `topic` is byte-identical (followers
   * catch up after the producers stopped); throws naming the differences left after `timeoutMs`.
   * A partition's replicas are the brokers of its replica list in the topic's definition.
   */
  async waitForIdenticalReplicas(topic: string, partitions: number, timeoutMs = 30_000): Promise<void> {
    const definition = await this.registry.readDefinition(topic);
    if (definition === undefined) throw new Error(`topic ${topic} has no definition in ZooKeeper`);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const diffs: string[] = [];
      for (let p = 0; p < partitions; p++) {
        const dirs = (definition.partitions[p] ?? []).map((id) => this.logDirs[id]!);
        for (const [dir, d] of await diffAllReplicas(dirs, topic, p)) diffs.push(`${topic}-${p} of ${dirs[0]} against ${dir}:\n${describeDifferences(d)}`);
      }
      if (diffs.length === 0) return;
      if (Date.now() > deadline) throw new Error(`replicas still differ after ${timeoutMs} ms:\n${diffs.join('\n')}`);
      await sleep(200);
    }
  }

  /**
   * Reads every partition of `topic` from offset 0 up to its high watermark through a consumer
   * that follows the leaders, starting at broker `via`.
   * @returns per partition, the messages (offset, value) in log order
   */
  async readAll(topic: string, partitions: number, via: number): Promise<Array<Array<{ offset: number; value: string }>>> {
    const b = this.brokers[via]!;
    const consumer = new SimpleConsumer({ host: '127.0.0.1', port: b.port, retryTimeoutMs: 30_000 });
    try {
      const out: Array<Array<{ offset: number; value: string }>> = [];
      for (let p = 0; p < partitions; p++) {
        const end = await consumer.latestOffset(topic, p);
        const messages: Array<{ offset: number; value: string }> = [];
        for (let offset = 0; offset < end; ) {
          const r = await consumer.fetch({ topic, partition: p, offset, maxBytes: 1 << 20 });
          for (const m of r.messages) messages.push({ offset: m.offset, value: m.payload.toString() });
          if (r.nextOffset === offset) throw new Error(`${topic}/${p}: no progress at offset ${offset} below the high watermark ${end}`);
          offset = r.nextOffset;
        }
        out.push(messages);
      }
      return out;
    } finally {
      await consumer.close();
    }
  }
}

/** One acknowledged send of an {@link AckedLoad}: when it was started and when its acknowledgement came, ms since the epoch. */
export interface AckedSend {
  readonly partition: number;
  readonly sentMs: number;
  readonly ackedMs: number;
}

/** A producer with `acks all` that sends to every partition in turn until stopped, recording every acknowledgement. */
export class AckedLoad {
  readonly acked: Acked[] = [];
  /** Every acknowledged send (a batch of {@link batch} records), in the order of acknowledgement. */
  readonly sends: AckedSend[] = [];
  /** Sends that failed, with their error's message (their records may or may not be stored). */
  readonly failures: Array<{ t: number; partition: number; message: string }> = [];
  /** The producer's retries across leader changes (docs/replication.md §13.2), by the error code that caused each (−1: the connection failed). */
  readonly retriesByCode = new Map<number, number>();
  private stopped = false;
  private running: Promise<void> | undefined;
  /** The partitions {@link start} sends to. */
  private sending: readonly number[] = [];
  private readonly producer: ZkProducer;

  constructor(
    connect: string,
    readonly topic: string,
    readonly partitions: number,
    /** Records per send. */
    readonly batch = 5,
    /**
     * How long the producer retries a send across leader changes and refusals before it fails
     * it, ms (with at most 1000 retries); or the producer's own bounds (`{}`: the client's
     * defaults, as an application gets them, docs/replication.md §13.2).
     */
    retry: number | LeaderRetryOptions = 60_000,
  ) {
    const bounds = typeof retry === 'number' ? { retryTimeoutMs: retry, maxRetries: 1000 } : retry;
    this.producer = new ZkProducer({ zookeeper: connect, acks: 'all', ...bounds, logger: this.retryCounter() });
  }

  /** Retries across leader changes so far (the producer's own count). */
  get retries(): number {
    return this.producer.leaderRetries;
  }

  /** A logger that counts the producer's retries by code (its debug line of each retry). */
  private retryCounter(): NonNullable<ZkProducerOptions['logger']> {
    const ignore = (): void => {};
    return {
      debug: (obj, msg) => {
        const code = (obj as { code?: unknown }).code;
        if (msg === 'produce failed on a leader change; retrying' && typeof code === 'number') this.retriesByCode.set(code, (this.retriesByCode.get(code) ?? 0) + 1);
      },
      info: ignore,
      warn: ignore,
      error: ignore,
    };
  }

  /** Starts one sender per partition (or only for `only`). */
  start(only?: readonly number[]): this {
    const partitions = only ?? Array.from({ length: this.partitions }, (_, p) => p);
    this.sending = partitions;
    this.running = Promise.all(partitions.map((p) => this.sendLoop(p))).then(() => undefined);
    return this;
  }

  /** Acknowledged messages of one partition so far. */
  countOf(partition: number): number {
    return this.acked.filter((a) => a.partition === partition).length;
  }

  private async sendLoop(partition: number): Promise<void> {
    for (let i = 0; !this.stopped; ) {
      const values = Array.from({ length: this.batch }, (_, j) => `${partition}-${i + j}`);
      const sentMs = Date.now();
      try {
        const metas = await this.producer.send(this.topic, values.map((value) => ({ value, partition })));
        metas.forEach((m, j) => this.acked.push({ partition, offset: m.offset!, value: values[j]! }));
        this.sends.push({ partition, sentMs, ackedMs: Date.now() });
      } catch (err) {
        this.failures.push({ t: Date.now(), partition, message: (err as Error).message });
        await sleep(100);
      }
      i += values.length;
    }
  }

  /** Acknowledged messages so far. */
  get count(): number {
    return this.acked.length;
  }

  /** Waits until at least `n` messages are acknowledged. @throws Error naming the last failures after `timeoutMs` */
  async waitForCount(n: number, timeoutMs = 30_000): Promise<void> {
    try {
      await waitFor(`${n} acknowledged messages`, () => this.count >= n, timeoutMs);
    } catch (err) {
      throw new Error(`${(err as Error).message}; ${this.count} acknowledged, last failures ${JSON.stringify(this.failures.slice(-3))}`, { cause: err });
    }
  }

  /**
   * The failover time of docs/replication.md §17.1: waits until every partition of the load
   * has an acknowledged send that was started at `startedAfter` or later (ms since the epoch),
   * and returns how long after `from` (ms since the epoch, e.g. the kill) the last partition
   * got the first such acknowledgement, in ms. A send started after `startedAfter` cannot
   * have been acknowledged by a broker killed before it; one started earlier may have been.
   * @throws Error from `waitFor` when some partition has none after `timeoutMs`
   */
  async succeedsAfter(from: number, startedAfter: number, timeoutMs: number): Promise<number> {
    const firstAck = (p: number): number | undefined => this.sends.find((s) => s.partition === p && s.sentMs >= startedAfter)?.ackedMs;
    const all = this.sending;
    await waitFor(`every partition acknowledged a send started after ${new Date(startedAfter).toISOString()}`, () => all.every((p) => firstAck(p) !== undefined), timeoutMs);
    return Math.max(...all.map((p) => firstAck(p)!)) - from;
  }

  /** Stops sending, waits for the sends in flight, closes the producer. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
    await this.producer.close();
  }
}

/**
 * Checks that every acknowledged message is in `read` at its offset with its value, that the
 * acknowledged messages of each partition have increasing offsets in the order they were
 * acknowledged, and that each partition was read in increasing offset order.
 * @returns a list of problems, empty when all is well
 */
export function checkAcked(acked: readonly Acked[], read: ReadonlyArray<ReadonlyArray<{ offset: number; value: string }>>): string[] {
  const problems: string[] = [];
  read.forEach((messages, p) => {
    for (let i = 1; i < messages.length; i++) {
      if (messages[i]!.offset <= messages[i - 1]!.offset) problems.push(`partition ${p}: read offset ${messages[i]!.offset} after ${messages[i - 1]!.offset}`);
    }
  });
  const byOffset = read.map((messages) => new Map(messages.map((m) => [m.offset, m.value])));
  const lastOffset = new Map<number, number>();
  for (const a of acked) {
    const value = byOffset[a.partition]?.get(a.offset);
    if (value !== a.value) problems.push(`partition ${a.partition} offset ${a.offset}: acknowledged ${a.value}, read ${value ?? 'nothing'}`);
    const before = lastOffset.get(a.partition) ?? -1;
    if (a.offset <= before) problems.push(`partition ${a.partition}: ${a.value} acknowledged at ${a.offset}, after one at ${before}`);
    lastOffset.set(a.partition, a.offset);
  }
  return problems;
}
