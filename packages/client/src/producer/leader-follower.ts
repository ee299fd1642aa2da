/**
 * A producer's sends to one replicated partition across leader changes (docs/replication.md
 * §13.2). Records go to the partition's current leader through the {@link ProducerPool}, pipelined
 * as any other; when a record fails with a leader change ({@link isLeaderChange}: the leader moved,
 * the partition is offline, the ISR is short, or the connection was lost), the partition is
 * **held**: records sent meanwhile wait, the requests already in flight are let settle, and then
 * every failed record is sent again, in the order it was first sent, to the leader looked up
 * anew, before the held records. So a partition's records reach its log in the order they were
 * sent, except that a request in flight may succeed after an earlier one failed (with
 * `NotEnoughReplicas`, if the ISR grew in between); a record retried may be stored twice (its
 * leader appended it and lost leadership before answering): at-least-once, as in the paper.
 *
 * Between two rounds the partition backs off (100 ms doubling to 1,000 ms), cut short when the
 * producer's view learns of a new leader (a ZooKeeper watch); a round sent to another leader
 * than the last one that failed starts the back-off again from 100 ms.
 *
 * Retries stop after `maxRetries` rounds or `retryTimeoutMs` from the first failure of a round of
 * failures, or once the leader has refused with `NotEnoughReplicas` for `notEnoughReplicasTimeoutMs`
 * in a row; then the failed records reject with {@link LeaderRetriesExhaustedError}. With acks 0
 * nothing is answered, so nothing is retried.
 */
import { Backoff, sleep } from '@klog/retry';
import type { Logger } from '@klog/logger';
import { ErrorCode } from '@klog/protocol';
import { KlogBrokerError } from '../errors.js';
import {
  defaultMaxRetries,
  defaultRetryTimeoutMs,
  failureCode,
  ShortIsrWindow,
  isLeaderChange,
  LeaderRetriesExhaustedError,
  type LeaderRetryOptions,
  leaderRetryBackoff,
} from '../leader-retry.js';
import type { StampedFields } from './metadata-stamp.js';
import type { PartitionMeta, PartitionTarget, SendResult } from './types.js';

/** Where a replicated partition's records go now: the leader's target, or none while it has no (reachable) leader. */
export interface LeaderRoute<M extends PartitionMeta> {
  /** The broker id of the leader, −1 when there is none. */
  readonly leader: number;
  /** The leader's pooled target; undefined when there is no leader or its address is unknown. */
  readonly target: PartitionTarget<M> | undefined;
}

/** What a {@link PartitionLeaderFollower} needs of its producer. */
export interface LeaderFollowerHost<M extends PartitionMeta> {
  /** The pool's send, per record (settle each). */
  send(
    targets: readonly PartitionTarget<M>[],
    payloads: readonly Buffer[],
    records: readonly StampedFields[],
    each: true,
  ): Promise<Array<SendResult<M> | Error>>;
  /** The current route, from the producer's leader view (no I/O). */
  route(): LeaderRoute<M>;
  /** Asks for the partition's leader again (a TOPIC_METADATA, or a fresh read of the state node). */
  refresh(): Promise<void>;
  /**
   * Calls `listener` after each change of the partition's topic that the producer's view learns
   * of unasked (a ZooKeeper watch); returns the function that stops it. Absent for a view that
   * only learns on {@link refresh}.
   */
  onViewChange?(listener: () => void): () => void;
  /** Counts one retry after a failure with `code` (−1: a lost connection), for the producer's summary. */
  retried(code: number): void;
  readonly logger: Logger;
}

/** One record waiting for its final result. */
interface Entry<M extends PartitionMeta> {
  readonly seq: number;
  readonly payload: Buffer;
  readonly record: StampedFields;
  readonly settle: (r: SendResult<M> | Error) => void;
  /** The failure that put it in `failed`. */
  error?: Error;
}

/** Sends to one replicated partition, following its leader (see the file comment). */
export class PartitionLeaderFollower<M extends PartitionMeta> {
  private nextSeq = 0;
  /** pool.send calls not yet settled. */
  private outstanding = 0;
  /** True from a leader-change failure until the failed records are sent again. */
  private holding = false;
  /** Records that failed with a leader change, to send again. */
  private failed: Entry<M>[] = [];
  /** Records sent while holding, in order. */
  private held: Entry<M>[] = [];
  /** Rounds of retries since the last request that went through without a leader change. */
  private rounds = 0;
  /** When the current run of failures began, ms; 0 when none. */
  private failingSince = 0;
  private readonly backoff = new Backoff(leaderRetryBackoff);
  /** The leader the last failed request went to, for the warn line of a leader change. */
  private lastFailedLeader = -1;
  private readonly maxRetries: number;
  private readonly retryTimeoutMs: number;
  private readonly shortIsr: ShortIsrWindow;

  constructor(
    private readonly topic: string,
    private readonly partition: number,
    private readonly host: LeaderFollowerHost<M>,
    options: LeaderRetryOptions,
  ) {
    this.maxRetries = options.maxRetries ?? defaultMaxRetries;
    this.retryTimeoutMs = options.retryTimeoutMs ?? defaultRetryTimeoutMs;
    this.shortIsr = new ShortIsrWindow(options.notEnoughReplicasTimeoutMs);
  }

  /**
   * Sends records to the partition; resolves with each record's final result (its metadata, or
   * the Error it failed with), in the order given.
   */
  send(payloads: readonly Buffer[], records: readonly StampedFields[]): Promise<Array<SendResult<M> | Error>> {
    const results = new Array<SendResult<M> | Error>(payloads.length);
    let left = payloads.length;
    if (left === 0) return Promise.resolve(results);
    return new Promise((resolve) => {
      const entries = payloads.map(
        (payload, i): Entry<M> => ({
          seq: this.nextSeq++,
          payload,
          record: records[i]!,
          settle: (r) => {
            results[i] = r;
            if (--left === 0) resolve(results);
          },
        }),
      );
      if (this.holding) this.held.push(...entries);
      else this.dispatch(entries);
    });
  }

  /** Hands records to the pool for the current leader; failures with a leader change hold the partition. */
  private dispatch(entries: readonly Entry<M>[]): void {
    const { leader, target } = this.host.route();
    if (!target) {
      const e = new KlogBrokerError(ErrorCode.LeaderNotAvailable, { topic: this.topic, partition: this.partition }, 'no live leader known');
      this.lastFailedLeader = leader;
      for (const entry of entries) entry.error = e;
      this.failed.push(...entries);
      this.holding = true;
      if (this.outstanding === 0) void this.recover();
      return;
    }
    this.outstanding++;
    this.host
      .send(
        entries.map(() => target),
        entries.map((e) => e.payload),
        entries.map((e) => e.record),
        true,
      )
      .then(
        (results) => {
          let clean = true;
          results.forEach((r, i) => {
            const entry = entries[i]!;
            if (r instanceof Error && isLeaderChange(r)) {
              entry.error = r;
              this.failed.push(entry);
              clean = false;
            } else entry.settle(r);
          });
          if (!clean) {
            this.holding = true;
            this.lastFailedLeader = leader;
          } else if (!this.holding) {
            this.rounds = 0;
            this.failingSince = 0;
            this.backoff.reset();
            this.shortIsr.reset();
          }
        },
        // A failure of the whole call (the producer closed): every record fails with it.
        (error: Error) => {
          for (const entry of entries) entry.settle(error);
        },
      )
      .finally(() => {
        if (--this.outstanding === 0 && this.holding) void this.recover();
      });
  }

  /** Every request has settled and some records failed: wait, look the leader up, send them again, then the held ones. */
  private async recover(): Promise<void> {
    const failed = this.failed.sort((a, b) => a.seq - b.seq);
    this.failed = [];
    const last = failed[failed.length - 1]?.error;
    if (this.failingSince === 0) this.failingSince = Date.now();
    const elapsed = Date.now() - this.failingSince;
    if (last !== undefined && (this.rounds >= this.maxRetries || elapsed >= this.retryTimeoutMs || this.shortIsr.exhausted(last, Date.now()))) {
      const e = new LeaderRetriesExhaustedError(this.topic, this.partition, this.lastFailedLeader, failureCode(last), this.rounds, last);
      for (const entry of failed) entry.settle(e);
      this.release([]);
      return;
    }
    this.rounds++;
    this.host.retried(failureCode(last));
    const delayMs = Math.min(this.backoff.next(), Math.max(0, this.retryTimeoutMs - elapsed));
    this.host.logger.debug({ topic: this.topic, partition: this.partition, leader: this.lastFailedLeader, code: failureCode(last), retry: this.rounds, delayMs }, 'produce failed on a leader change; retrying');
    await this.backOff(delayMs);
    try {
      await this.host.refresh();
    } catch (error) {
      this.host.logger.debug({ topic: this.topic, partition: this.partition, err: (error as Error).message }, 'leader refresh failed; retrying with what is known');
    }
    const now = this.host.route().leader;
    if (now !== this.lastFailedLeader && now >= 0) {
      this.backoff.reset(); // a new leader: if it does not lead yet, try it again soon
      this.host.logger.warn(
        { topic: this.topic, partition: this.partition, from: this.lastFailedLeader, to: now, retry: this.rounds },
        `topic ${this.topic} partition ${this.partition}: leader ${this.lastFailedLeader < 0 ? 'none' : this.lastFailedLeader} → ${now}; resending ${failed.length} record${failed.length === 1 ? '' : 's'}`,
      );
    }
    this.release(failed);
  }

  /**
   * Waits `delayMs` before a retry, or less: until the view names a live leader other than the
   * one the last attempt failed on (the controller elected one), so that a producer resends as
   * soon as a new leader is known rather than at its next back-off step (docs/replication.md §13.2).
   */
  private async backOff(delayMs: number): Promise<void> {
    const moved = (): boolean => {
      const leader = this.host.route().leader;
      return leader >= 0 && leader !== this.lastFailedLeader;
    };
    if (this.host.onViewChange === undefined) {
      await sleep(delayMs);
      return;
    }
    const woken = new AbortController();
    const stop = this.host.onViewChange(() => {
      if (moved()) woken.abort();
    });
    try {
      await sleep(delayMs, woken.signal);
    } finally {
      stop();
    }
  }

  /** Ends a hold: sends `first` (the records retried), then what was held, in order. */
  private release(first: Entry<M>[]): void {
    const held = this.held;
    this.held = [];
    this.holding = false;
    const all = first.length === 0 ? held : held.length === 0 ? first : [...first, ...held];
    if (all.length > 0) this.dispatch(all);
  }
}
