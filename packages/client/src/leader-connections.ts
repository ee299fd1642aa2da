/**
 * A broker-list client's requests to replicated partitions (docs/replication.md §13.1, §13.2),
 * as {@link SimpleConsumer} makes them: a request goes to the client's own broker until that
 * broker answers `NotLeaderForPartition` or `LeaderNotAvailable` for the topic, which marks the
 * topic replicated (so a paper topic costs nothing more); from then on each request for the
 * topic goes to its partition's leader, found with TOPIC_METADATA ({@link MetadataLeaderView}),
 * and leader changes and lost connections are retried through {@link withLeaderRetry}. One warn
 * line is logged per leader change ridden through.
 */
import { type Logger, silentLogger } from '@klog/logger';
import { ErrorCode } from '@klog/protocol';
import { Connection } from './connection.js';
import { KlogBrokerError } from './errors.js';
import { type LeaderRetryOptions, RetryTally, withLeaderRetry } from './leader-retry.js';
import { MetadataLeaderView } from './leader-view.js';

/** The connection settings the leader connections copy from the client's own. */
export interface LeaderConnectionSettings extends LeaderRetryOptions {
  readonly requestTimeoutMs?: number | undefined;
  readonly connectTimeoutMs?: number | undefined;
  readonly maxResponseBytes?: number | undefined;
  readonly logger?: Logger | undefined;
}

/** Routes requests of replicated partitions to their leaders (see the file comment). */
export class LeaderConnections {
  /** Topics a broker answered as replicated. */
  private readonly replicated = new Set<string>();
  /** Connections to leaders, by `host:port`. */
  private readonly leaders = new Map<string, Connection>();
  private readonly view: MetadataLeaderView;
  private readonly logger: Logger;
  /** The leader each partition's last request went to, for the warn line of a change. */
  private readonly lastLeader = new Map<string, number>();
  private readonly tally = new RetryTally();

  constructor(
    private readonly own: Connection,
    private readonly settings: LeaderConnectionSettings,
  ) {
    this.logger = settings.logger ?? silentLogger;
    this.view = new MetadataLeaderView(() => [this.own, ...this.leaders.values()], this.logger);
  }

  /** Retries so far (docs/replication.md §13.2). */
  get retries(): number {
    return this.tally.total;
  }

  /** Retries so far by the code they followed (−1: a lost connection). */
  get retriesByCode(): ReadonlyMap<number, number> {
    return this.tally.byCode;
  }

  /**
   * Runs `attempt` on the connection that serves `topic`/`partition`: the client's own broker
   * for a paper topic, the partition's leader for a replicated one, retried across leader changes.
   * @throws what `attempt` throws when it is not a leader change; LeaderRetriesExhaustedError when the retries run out
   */
  async run<T>(topic: string, partition: number, attempt: (c: Connection) => Promise<T>): Promise<T> {
    if (!this.replicated.has(topic)) {
      try {
        return await attempt(this.own);
      } catch (error) {
        if (!(error instanceof KlogBrokerError && (error.code === ErrorCode.NotLeaderForPartition || error.code === ErrorCode.LeaderNotAvailable))) throw error;
        this.logger.debug({ topic, broker: this.own.address }, 'the topic is replicated: following its leaders');
        this.replicated.add(topic);
        await this.view.refresh(topic);
      }
    }
    const key = `${topic}\0${partition}`;
    let tried = -1;
    return withLeaderRetry(
      { topic, partition },
      async () => {
        if (this.view.cached(topic) === undefined) await this.view.refresh(topic);
        const leader = this.view.cached(topic)?.partitions[partition]?.leader ?? -1;
        tried = leader;
        const before = this.lastLeader.get(key);
        if (before !== undefined && before !== leader && leader >= 0) {
          this.logger.warn({ topic, partition, from: before, to: leader }, `topic ${topic} partition ${partition}: leader ${before < 0 ? 'none' : before} → ${leader}`);
        }
        this.lastLeader.set(key, leader);
        const a = leader >= 0 ? this.view.address(leader) : undefined;
        if (!a) throw new KlogBrokerError(ErrorCode.LeaderNotAvailable, { topic, partition }, 'no live leader known');
        return attempt(this.connection(a.host, a.port));
      },
      {
        ...this.settings,
        leader: () => tried,
        refresh: () => this.view.refresh(topic),
        onRetry: (e) => {
          this.tally.record(e.code);
          this.logger.debug({ ...e }, 'request failed on a leader change; retrying');
        },
      },
    );
  }

  /**
   * How many partitions `topic` has when it is a replicated topic (a TOPIC_METADATA, docs/replication.md
   * §13.1; its partitions `0..N-1`), and from then on its requests follow their leaders;
   * undefined for any other topic.
   * @throws KlogBrokerError, KlogConnectionError when no broker answers
   */
  async replicatedPartitionCount(topic: string): Promise<number | undefined> {
    const leaders = await this.view.topic(topic);
    if (leaders === undefined) return undefined;
    this.replicated.add(topic);
    return leaders.partitions.length;
  }

  /** Closes the leader connections (not the client's own). */
  async close(): Promise<void> {
    await Promise.all([...this.leaders.values()].map((c) => c.close()));
    this.leaders.clear();
  }

  private connection(host: string, port: number): Connection {
    const address = `${host}:${port}`;
    if (address === this.own.address) return this.own;
    let c = this.leaders.get(address);
    if (!c) {
      c = new Connection({
        host,
        port,
        ...(this.settings.requestTimeoutMs !== undefined ? { requestTimeoutMs: this.settings.requestTimeoutMs } : {}),
        ...(this.settings.connectTimeoutMs !== undefined ? { connectTimeoutMs: this.settings.connectTimeoutMs } : {}),
        ...(this.settings.maxResponseBytes !== undefined ? { maxResponseBytes: this.settings.maxResponseBytes } : {}),
      });
      this.leaders.set(address, c);
    }
    return c;
  }
}
