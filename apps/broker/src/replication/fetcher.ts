/**
 * A follower's fetching (docs/replication.md §9.2, §9.3, §10): one {@link Fetcher} per leader
 * broker, holding every partition this broker follows from it. Each partition handed to a
 * fetcher first waits `replica.fetch.start.delay.ms` (a test hook, 0 by default), then
 * truncates against the leader with OFFSET_FOR_LEADER_EPOCH (§10), then joins the fetch loop:
 * one REPLICA_FETCH for all fetching partitions, each at its log end with its flushed end and
 * leader epoch; each answer's bytes checked, the epoch recorded, appended with
 * `appendAsFollower`; every log appended to flushed before the next fetch, which reports the
 * new flushed ends. An answer for an epoch the partition no longer follows is dropped (§9.3).
 */
import {
  ErrorCode,
  decodeOffsetForLeaderEpochResponse,
  decodeReplicaFetchResponse,
  encodeOffsetForLeaderEpochRequest,
  encodeReplicaFetchRequest,
  errorCodeName,
  scanMessageSet,
  type BrokerAddress,
  type FetchedPartition,
} from '@klog/protocol';
import type { Logger } from 'pino';
import type { BrokerConfig } from '../config.js';
import type { ReplicationMetrics } from './replication-metrics.js';
import { BrokerConnection } from './broker-connection.js';
import type { Partition } from './partition.js';

/** What fetchers run with. */
export interface FetcherContext {
  readonly config: BrokerConfig;
  readonly logger: Logger;
  readonly metrics: ReplicationMetrics;
}

/** A partition's place in its fetcher. */
interface Entry {
  readonly p: Partition;
  /** The leader epoch it follows; requests carry it, answers of another are dropped. */
  readonly epoch: number;
  /** `truncating` until OFFSET_FOR_LEADER_EPOCH settled its log, then `fetching`; `stopped` waits for the controller. */
  phase: 'truncating' | 'fetching' | 'stopped';
  /** Not before this time (ms since the epoch): the start delay, or a back-off after an error. */
  notBeforeMs: number;
}

/** Most ms a request to the leader waits for its answer beyond a fetch's long poll, before the connection is closed and opened again. */
const requestTimeoutMs = 30_000;

const key = (p: Partition): string => `${p.topic}\u0000${p.partition}`;

/** The fetchers of one broker, by leader. */
export class FetcherManager {
  readonly #fetchers = new Map<number, Fetcher>();

  constructor(private readonly ctx: FetcherContext) {}

  /**
   * Hands `p` to the fetcher of `leader` for `epoch`. From another fetcher the partition leaves
   * at once; within the same one its entry is replaced, and an answer in flight for the old entry
   * is dropped (docs/replication.md §9.3). A leader whose address changed gets a new fetcher
   * (the partitions of the old one wait for their next LEADER_AND_ISR, which names the new address).
   */
  add(p: Partition, leader: BrokerAddress, epoch: number): void {
    let f = this.#fetchers.get(leader.brokerId);
    if (f !== undefined && (f.leader.host !== leader.host || f.leader.port !== leader.port)) {
      f.close();
      this.#fetchers.delete(leader.brokerId);
      f = undefined;
    }
    for (const [id, other] of this.#fetchers) if (other !== f) this.#removeFrom(id, other, p);
    if (f === undefined) {
      f = new Fetcher(leader, this.ctx);
      this.#fetchers.set(leader.brokerId, f);
    }
    f.add(p, epoch);
  }

  /** Takes `p` from its fetcher, if any: an answer in flight for it is dropped. */
  remove(p: Partition): void {
    for (const [id, f] of this.#fetchers) this.#removeFrom(id, f, p);
  }

  /** Takes `p` from fetcher `f` of leader `id`; a fetcher left without partitions is closed. */
  #removeFrom(id: number, f: Fetcher, p: Partition): void {
    if (!f.remove(p) || f.size > 0) return;
    f.close();
    this.#fetchers.delete(id);
  }

  /**
   * True when `p` is fetched from `leader` at its address (at any epoch). A leader that came back
   * on another address within its epoch (restarted while no controller watched, docs/replication.md
   * §17.3) is not followed until the partition is handed to it again with {@link add}.
   */
  follows(p: Partition, leader: BrokerAddress): boolean {
    const f = this.#fetchers.get(leader.brokerId);
    return f !== undefined && f.leader.host === leader.host && f.leader.port === leader.port && f.has(p);
  }

  /** Stops every fetcher. */
  async close(): Promise<void> {
    const all = [...this.#fetchers.values()];
    this.#fetchers.clear();
    for (const f of all) f.close();
    await Promise.all(all.map((f) => f.stopped));
  }
}

/** The fetcher of one leader broker. */
export class Fetcher {
  readonly #entries = new Map<string, Entry>();
  readonly #connection: BrokerConnection;
  #closed = false;
  /** Wakes the loop when it sleeps (a partition was added). */
  #wake: (() => void) | undefined;
  /** Resolves once the loop has ended after {@link close}. */
  readonly stopped: Promise<void>;

  constructor(
    readonly leader: BrokerAddress,
    private readonly ctx: FetcherContext,
  ) {
    const maxResponseBytes = Math.max(ctx.config.replicaFetchMaxBytes * 4, 64 * 1024 * 1024);
    this.#connection = new BrokerConnection({ host: leader.host, port: leader.port, maxResponseBytes });
    this.stopped = this.#run();
  }

  get size(): number {
    return this.#entries.size;
  }

  has(p: Partition): boolean {
    return this.#entries.get(key(p))?.p === p;
  }

  /** Adds `p` at `epoch`: it waits the start delay, truncates, then fetches. */
  add(p: Partition, epoch: number): void {
    this.#entries.set(key(p), { p, epoch, phase: 'truncating', notBeforeMs: Date.now() + this.ctx.config.replicaFetchStartDelayMs });
    this.#wake?.();
  }

  /** @returns true when `p` was in this fetcher */
  remove(p: Partition): boolean {
    return this.#entries.delete(key(p));
  }

  close(): void {
    this.#closed = true;
    this.#connection.close();
    this.#wake?.();
  }

  /** True while `e` is still the partition's entry (not removed, not replaced by a newer epoch). */
  #current(e: Entry): boolean {
    return !this.#closed && this.#entries.get(key(e.p)) === e;
  }

  async #run(): Promise<void> {
    while (!this.#closed) {
      const now = Date.now();
      const ready = [...this.#entries.values()].filter((e) => e.phase !== 'stopped' && e.notBeforeMs <= now);
      for (const e of ready.filter((x) => x.phase === 'truncating')) await this.#truncate(e);
      const fetching = [...this.#entries.values()].filter((e) => e.phase === 'fetching' && e.notBeforeMs <= Date.now());
      if (fetching.length > 0) {
        await this.#fetch(fetching);
        continue;
      }
      if (this.#closed) break;
      const next = Math.min(...[...this.#entries.values()].filter((e) => e.phase !== 'stopped').map((e) => e.notBeforeMs));
      await this.#sleep(Number.isFinite(next) ? Math.max(1, next - Date.now()) : 1000);
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = () => {
        this.#wake = undefined;
        done();
      };
    });
  }

  #backOff(e: Entry, code: string, err?: unknown): void {
    this.ctx.metrics.replicaFetchError(code);
    this.ctx.logger.warn({ topic: e.p.topic, partition: e.p.partition, leader: this.leader.brokerId, leaderEpoch: e.epoch, code, err }, 'replica fetch failed; retrying after the back-off');
    e.notBeforeMs = Date.now() + this.ctx.config.replicaFetchBackoffMs;
  }

  #stop(e: Entry, code: string): void {
    this.ctx.metrics.replicaFetchError(code);
    this.ctx.logger.warn({ topic: e.p.topic, partition: e.p.partition, leader: this.leader.brokerId, leaderEpoch: e.epoch, code }, 'replica fetch refused; waiting for the controller');
    e.phase = 'stopped';
  }

  /**
   * Truncates `e`'s log against the leader (docs/replication.md §10), on the partition's chain:
   * asks where its latest epoch ends on the leader and cuts what it holds beyond that, until
   * both agree on an epoch; then the partition fetches.
   */
  async #truncate(e: Entry): Promise<void> {
    const p = e.p;
    const log = p.log;
    if (log === undefined) return this.#stop(e, 'NoReplicaLog');
    const checkpoint = log.leaderEpochs;
    try {
      await p.enqueue(async () => {
        for (;;) {
          if (!this.#current(e)) return;
          const mine = checkpoint.latestEpoch;
          if (mine === undefined) {
            if (log.logEndOffset === log.earliestOffset) break;
            this.ctx.logger.error({ topic: p.topic, partition: p.partition, logEndOffset: log.logEndOffset }, 'replica log holds bytes without a leader epoch: not fetching');
            return this.#stop(e, 'NoLeaderEpoch');
          }
          const frame = encodeOffsetForLeaderEpochRequest({
            replicaId: this.ctx.config.brokerId,
            partitions: [{ topic: p.topic, partition: p.partition, currentLeaderEpoch: e.epoch, leaderEpoch: mine }],
          });
          const response = await this.#connection.request(frame, requestTimeoutMs);
          const answer = decodeOffsetForLeaderEpochResponse(response.errorCode, response.body);
          const a = answer.partitions[0];
          if (!this.#current(e)) return;
          const code = answer.errorCode !== ErrorCode.None ? answer.errorCode : (a?.errorCode ?? ErrorCode.Unknown);
          if (code === ErrorCode.NotLeaderForPartition || code === ErrorCode.FencedLeaderEpoch || code === ErrorCode.NotReplica) {
            return this.#stop(e, errorCodeName(code));
          }
          if (code !== ErrorCode.None || a === undefined) return this.#backOff(e, errorCodeName(code));
          const end = log.logEndOffset;
          if (a.leaderEpoch > mine) return this.#backOff(e, 'BadEpochAnswer', `asked for epoch ${mine}, answered ${a.leaderEpoch}`);
          if (a.leaderEpoch === mine) {
            await this.#cut(p, Math.min(a.endOffset, end), end);
            break;
          }
          if (a.leaderEpoch === -1) {
            // The leader has no epoch ≤ mine: nothing of this log is the leader's. Start empty where
            // the log starts; a fetch below the leader's log start then moves it (§9.2).
            await this.#cutFully(p, log.earliestOffset, end);
            break;
          }
          await this.#cut(p, checkpoint.startOfEpochAfter(a.leaderEpoch, end), end);
        }
        if (this.#current(e)) e.phase = 'fetching';
      });
    } catch (err) {
      if (this.#current(e)) this.#backOff(e, 'ConnectionOrStorage', (err as Error).message);
    }
  }

  /** Cuts the log to `offset` (the log first, then its checkpoint: `ReplicaLog.truncateTo`, docs/replication.md §8.2). */
  async #cut(p: Partition, offset: number, end: number): Promise<void> {
    const log = p.log!;
    if (offset >= end) {
      // No bytes to cut, but epochs that start there wrote nothing and go (else the loop would ask for them again).
      await log.leaderEpochs.truncateFromEnd(offset);
      return;
    }
    if (offset < log.earliestOffset) return this.#cutFully(p, offset, end);
    this.#truncated(p, end, offset, await log.truncateTo(offset));
  }

  /** Starts the log over, empty, at `offset` (`ReplicaLog.truncateFullyAndStartAt`). */
  async #cutFully(p: Partition, offset: number, end: number): Promise<void> {
    const log = p.log!;
    const size = log.sizeInBytes;
    await log.truncateFullyAndStartAt(offset);
    this.ctx.metrics.truncated(size);
    this.ctx.logger.warn({ topic: p.topic, partition: p.partition, from: end, startAt: offset, bytes: size }, 'replica log truncated fully');
    p.setFollowerHighWatermark(p.highWatermark);
  }

  #truncated(p: Partition, from: number, to: number, bytes: number): void {
    this.ctx.metrics.truncated(bytes);
    this.ctx.logger.warn({ topic: p.topic, partition: p.partition, from, to, bytes }, 'replica log truncated against the leader');
    p.setFollowerHighWatermark(p.highWatermark);
  }

  /** One REPLICA_FETCH for `entries`, its answers appended, then every log appended to flushed. */
  async #fetch(entries: Entry[]): Promise<void> {
    const sent = entries.map((e) => {
      const log = e.p.log!;
      return { e, fetchOffset: log.logEndOffset, flushedOffset: log.visibleEnd };
    });
    const frame = encodeReplicaFetchRequest({
      replicaId: this.ctx.config.brokerId,
      maxWaitMs: this.ctx.config.replicaFetchWaitMaxMs,
      partitions: sent.map(({ e, fetchOffset, flushedOffset }) => ({
        topic: e.p.topic,
        partition: e.p.partition,
        leaderEpoch: e.epoch,
        fetchOffset,
        flushedOffset,
        maxBytes: this.ctx.config.replicaFetchMaxBytes,
      })),
    });
    let answers: FetchedPartition[];
    try {
      const response = await this.#connection.request(frame, this.ctx.config.replicaFetchWaitMaxMs + requestTimeoutMs);
      const decoded = decodeReplicaFetchResponse(response.errorCode, response.body);
      if (decoded.errorCode !== ErrorCode.None) throw new Error(`REPLICA_FETCH answered ${errorCodeName(decoded.errorCode)}`);
      answers = [...decoded.partitions];
    } catch (err) {
      for (const { e } of sent) if (this.#current(e)) this.#backOff(e, 'Connection', (err as Error).message);
      return;
    }
    const appended = new Set<Partition>();
    await Promise.all(
      sent.map(async (s, i) => {
        const a = answers[i];
        if (a === undefined || a.topic !== s.e.p.topic || a.partition !== s.e.p.partition) return this.#backOff(s.e, 'BadAnswer');
        if (await this.#apply(s.e, s.fetchOffset, a)) appended.add(s.e.p);
      }),
    );
    await Promise.all(
      [...appended].map(async (p) => {
        try {
          await p.log!.flush();
        } catch (err) {
          const e = this.#entries.get(key(p));
          if (e !== undefined) this.#backOff(e, 'FlushFailed', (err as Error).message);
        }
      }),
    );
  }

  /**
   * Applies one partition's answer (docs/replication.md §9.2 step 2), on its chain; an answer for
   * an epoch the partition no longer follows here is dropped (§9.3).
   * @returns true when bytes were appended
   */
  async #apply(e: Entry, fetchOffset: number, a: FetchedPartition): Promise<boolean> {
    if (!this.#current(e) || e.phase !== 'fetching') {
      this.ctx.logger.debug({ topic: e.p.topic, partition: e.p.partition, leaderEpoch: e.epoch }, 'answer of a partition no longer fetched at that epoch dropped');
      return false;
    }
    const p = e.p;
    const log = p.log!;
    switch (a.errorCode) {
      case ErrorCode.None:
        break;
      case ErrorCode.NotLeaderForPartition:
      case ErrorCode.FencedLeaderEpoch:
      case ErrorCode.NotReplica:
        this.#stop(e, errorCodeName(a.errorCode));
        return false;
      case ErrorCode.OffsetOutOfRange:
        if (a.logStartOffset >= 0 && fetchOffset < a.logStartOffset) {
          await p.enqueue(async () => {
            if (this.#current(e)) await this.#cutFully(p, a.logStartOffset, log.logEndOffset);
          });
          return false;
        }
        e.phase = 'truncating';
        this.#backOff(e, errorCodeName(a.errorCode));
        return false;
      default:
        this.#backOff(e, errorCodeName(a.errorCode));
        return false;
    }
    p.followerLagBytes = Math.max(0, a.logEndOffset - fetchOffset - a.messageSet.length);
    const set = a.messageSet;
    // The leader checked each message's size when it took it: only lengths, magic and CRCs here.
    const scan = scanMessageSet(set, set.length);
    if (scan.validBytes < set.length && !scan.partial) {
      this.#backOff(e, 'InvalidMessage', `message at ${fetchOffset + scan.validBytes} does not check`);
      return false;
    }
    if (scan.validBytes === 0) {
      if (set.length > 0 && set.length >= this.ctx.config.replicaFetchMaxBytes) {
        this.#backOff(e, 'MessageLargerThanFetch', `a message at ${fetchOffset} is larger than replica.fetch.max.bytes ${this.ctx.config.replicaFetchMaxBytes}`);
      }
      p.setFollowerHighWatermark(a.highWatermark);
      return false;
    }
    return p.enqueue(async () => {
      if (!this.#current(e)) return false;
      const checkpoint = log.leaderEpochs;
      if (log.logEndOffset !== fetchOffset) {
        this.ctx.logger.error({ topic: p.topic, partition: p.partition, fetchOffset, logEndOffset: log.logEndOffset }, 'log end moved while a fetch was out: partition stopped');
        this.#stop(e, 'LogEndMismatch');
        return false;
      }
      try {
        if (a.epoch >= 0 && (checkpoint.latestEpoch === undefined || a.epoch > checkpoint.latestEpoch)) await checkpoint.assign(a.epoch, fetchOffset);
        await log.appendAsFollower(scan.validBytes === set.length ? set : set.subarray(0, scan.validBytes), scan.count, a.segmentStart);
      } catch (err) {
        this.ctx.logger.error({ topic: p.topic, partition: p.partition, fetchOffset, err }, 'follower append failed');
        this.#backOff(e, 'AppendFailed', (err as Error).message);
        return false;
      }
      p.setFollowerHighWatermark(a.highWatermark);
      return true;
    });
  }
}
