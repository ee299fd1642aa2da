/**
 * How both producers send to a replicated topic (docs/replication.md §13.2): partitions are
 * `0..N-1`, a key goes to `partitioner(key, N)` (which does not change when brokers come and go),
 * and each partition's records go to its current leader through a {@link PartitionLeaderFollower},
 * which holds the partition and sends again, in order, across leader changes. Where the leaders
 * are is the producer's {@link LeaderView}: ZooKeeper for {@link ZkProducer}, TOPIC_METADATA for
 * {@link Producer}.
 */
import type { Logger } from '@klog/logger';
import { KlogError } from '../errors.js';
import { RetryTally, type LeaderRetryOptions } from '../leader-retry.js';
import type { LeaderView, ReplicatedTopicLeaders } from '../leader-view.js';
import type { ProducerPool } from '../producer-pool.js';
import { type LeaderRoute, PartitionLeaderFollower } from './leader-follower.js';
import { type PartitionMeta, type PartitionTarget, type PooledBroker, type RecordFields, type SendResult, toBuffer } from './types.js';

/** What the router needs of its producer. */
export interface RouterHost<M extends PartitionMeta> {
  readonly pool: ProducerPool;
  readonly view: LeaderView;
  /** The pooled connection of a live broker; undefined when its address is unknown. */
  broker(brokerId: number): PooledBroker | undefined;
  /** What a record sent to `partition`, led by `leader`, reports. */
  meta(topic: string, partition: number, leader: number): M;
  readonly retry: LeaderRetryOptions;
  readonly logger: Logger;
}

/** Sends records to replicated topics (see the file comment). */
export class ReplicatedRouter<M extends PartitionMeta> {
  private readonly followers = new Map<string, PartitionLeaderFollower<M>>();
  /** Targets by `topic\0partition`, kept while the leader stays (the accumulator's fast path compares targets). */
  private readonly targets = new Map<string, PartitionTarget<M>>();
  private readonly tally = new RetryTally();

  constructor(private readonly host: RouterHost<M>) {}

  /** Retries so far (each a resend of a partition's failed records, docs/replication.md §13.2). */
  get retries(): number {
    return this.tally.total;
  }

  /** Retries so far by the code they followed (−1: a lost connection). */
  get retriesByCode(): ReadonlyMap<number, number> {
    return this.tally.byCode;
  }

  /**
   * Sends records to their partitions of a replicated topic.
   * @param partitionOf the partition of record `i` among `n` (the producer's choice: named, keyed, or for a keyless record ProducerPool.keylessPartition)
   * @param each settle per record (an Error in a failed record's place) rather than reject at the first failure
   * @throws KlogError with acks 0 when a partition has no known leader; what a record failed with (without `each`)
   */
  async send(
    leaders: ReplicatedTopicLeaders,
    records: readonly RecordFields[],
    partitionOf: (record: RecordFields, index: number, n: number) => number,
    each: boolean,
  ): Promise<Array<SendResult<M> | Error>> {
    const { topic } = leaders;
    const n = leaders.partitions.length;
    if (n === 0) throw new KlogError(`topic ${topic} has no partitions yet (the controller has not created them)`);
    const parts = records.map((r, i) => partitionOf(r, i, n));
    const payloads = records.map((r) => toBuffer(r.value));
    if (this.host.pool.acks === 0) {
      // Nothing answers a fire-and-forget produce: it goes to the leader known now, and is not retried.
      const targets = parts.map((p) => {
        const t = this.route(topic, p).target;
        if (!t) throw new KlogError(`topic ${topic} partition ${p}: no live leader known (acks 0 does not wait for one)`);
        return t;
      });
      return this.host.pool.send(targets, payloads, records, each);
    }
    const byPartition = new Map<number, number[]>();
    parts.forEach((p, i) => {
      let list = byPartition.get(p);
      if (!list) byPartition.set(p, (list = []));
      list.push(i);
    });
    const results = new Array<SendResult<M> | Error>(records.length);
    await Promise.all(
      [...byPartition].map(async ([p, indexes]) => {
        const out = await this.follower(topic, p).send(
          indexes.map((i) => payloads[i]!),
          indexes.map((i) => records[i]!),
        );
        out.forEach((r, k) => (results[indexes[k]!] = r));
      }),
    );
    if (!each) {
      const failed = results.find((r): r is Error => r instanceof Error);
      if (failed) throw failed;
    }
    return results;
  }

  /** Where `topic`/`partition` goes now, from the view (no I/O). */
  private route(topic: string, partition: number): LeaderRoute<M> {
    const leader = this.host.view.cached(topic)?.partitions[partition]?.leader ?? -1;
    const key = `${topic}\0${partition}`;
    const broker = leader >= 0 ? this.host.broker(leader) : undefined;
    if (!broker) return { leader, target: undefined };
    let target = this.targets.get(key);
    if (!target || target.broker !== broker) {
      target = { broker, brokerPartition: partition, meta: this.host.meta(topic, partition, leader) };
      this.targets.set(key, target);
    }
    return { leader, target };
  }

  private follower(topic: string, partition: number): PartitionLeaderFollower<M> {
    const key = `${topic}\0${partition}`;
    let f = this.followers.get(key);
    if (!f) {
      f = new PartitionLeaderFollower<M>(
        topic,
        partition,
        {
          send: (targets, payloads, records, each) => this.host.pool.send(targets, payloads, records, each),
          route: () => this.route(topic, partition),
          refresh: () => this.host.view.refresh(topic),
          onViewChange: (listener) => this.host.view.onChange(topic, listener),
          retried: (code) => this.tally.record(code),
          logger: this.host.logger,
        },
        this.host.retry,
      );
      this.followers.set(key, f);
    }
    return f;
  }
}
