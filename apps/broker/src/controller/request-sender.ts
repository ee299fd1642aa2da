/**
 * The controller's request sender (docs/replication.md §5.3, "requests to brokers"): one queue
 * per broker, whose requests go out one at a time in the order queued, each retried with
 * back-off (@klog/retry) until the broker answers, leaves `/brokers/ids` ({@link
 * RequestSender.removeBroker}) or a newer request for the same partitions replaces it (a
 * partition queued again leaves every request queued before it for that broker). A target is
 * how one broker is reached: over a socket, or, for the controller's own broker, its handlers
 * called in-process.
 */
import type { PartitionErrorsResponse } from '@klog/protocol';
import { isRetriable, retry } from '@klog/retry';
import { BrokerConnectionError } from '../replication/broker-connection.js';
import type { Logger } from 'pino';
import type { LeaderAndIsrBody, LeaderAndIsrPartition, StopReplicaBody } from './requests.js';
import { partitionKey } from './view.js';

/** The answer of LEADER_AND_ISR and STOP_REPLICA: an error code, and one per partition (§6.1, §6.2). */
export type PartitionErrorsAnswer = PartitionErrorsResponse;

/** How the controller reaches one broker. A method rejects with a `retriable` error when the request may be sent again. */
export interface RequestTarget {
  leaderAndIsr(body: LeaderAndIsrBody): Promise<PartitionErrorsAnswer>;
  stopReplica(body: StopReplicaBody): Promise<PartitionErrorsAnswer>;
  close(): void;
}

type Queued =
  | { readonly kind: 'leader-and-isr'; readonly body: LeaderAndIsrBody; readonly keys: Set<string>; readonly done: (a: PartitionErrorsAnswer | undefined) => void }
  | { readonly kind: 'stop-replica'; readonly body: StopReplicaBody; readonly keys: Set<string>; readonly done: (a: PartitionErrorsAnswer | undefined) => void };

/** Back-off between attempts of one request, ms. */
const backoff = { initialMs: 100, maxMs: 2000 } as const;

class BrokerQueue {
  readonly items: Queued[] = [];
  readonly abort = new AbortController();
  #running = false;

  constructor(
    readonly brokerId: number,
    readonly target: RequestTarget,
    private readonly logger: Logger,
  ) {}

  put(item: Queued): void {
    for (const earlier of this.items) for (const k of item.keys) earlier.keys.delete(k);
    this.items.push(item);
    if (!this.#running) void this.#drain();
  }

  async #drain(): Promise<void> {
    this.#running = true;
    while (this.items.length > 0 && !this.abort.signal.aborted) {
      const item = this.items[0]!;
      let answer: PartitionErrorsAnswer | undefined;
      try {
        answer = await retry(
          async () => {
            if (item.keys.size === 0) return undefined; // superseded while waiting
            if (item.kind === 'leader-and-isr') {
              const partitions = item.body.partitions.filter((p) => item.keys.has(partitionKey(p.topic, p.partition)));
              const brokers = item.body.brokers.filter((b) => partitions.some((p) => p.leader === b.brokerId));
              return this.target.leaderAndIsr({ ...item.body, partitions, brokers });
            }
            const partitions = item.body.partitions.filter((p) => item.keys.has(partitionKey(p.topic, p.partition)));
            return this.target.stopReplica({ ...item.body, partitions });
          },
          {
            ...backoff,
            signal: this.abort.signal,
            retriable: (e) => e instanceof BrokerConnectionError || isRetriable(e),
            onRetry: ({ error, attempt, delayMs }) =>
              this.logger[attempt === 0 ? 'warn' : 'debug']({ brokerId: this.brokerId, request: item.kind, err: error, delayMs }, 'controller request failed; sending it again'),
          },
        );
      } catch (err) {
        if (!this.abort.signal.aborted) this.logger.error({ brokerId: this.brokerId, request: item.kind, err }, 'controller request failed and is not sent again');
      }
      this.items.shift();
      item.done(answer);
    }
    this.#running = false;
  }

  close(): void {
    this.abort.abort();
    this.target.close();
    for (const item of this.items.splice(0)) item.done(undefined);
  }
}

/** The per-broker queues of one controller (a controller that resigns closes its sender). */
export class RequestSender {
  readonly #queues = new Map<number, BrokerQueue>();
  #closed = false;

  /** @param connect makes the target of a broker when its first request is queued */
  constructor(
    private readonly connect: (brokerId: number) => RequestTarget | undefined,
    private readonly logger: Logger,
  ) {}

  #queue(brokerId: number): BrokerQueue | undefined {
    if (this.#closed) return undefined;
    let q = this.#queues.get(brokerId);
    if (q === undefined) {
      const target = this.connect(brokerId);
      if (target === undefined) return undefined;
      this.#queues.set(brokerId, (q = new BrokerQueue(brokerId, target, this.logger)));
    }
    return q;
  }

  /**
   * Queues a LEADER_AND_ISR for `brokerId`.
   * @returns its answer, or undefined when it was not sent (the broker left, the request was
   *   superseded, the sender closed, or it failed without a retriable error)
   */
  leaderAndIsr(brokerId: number, body: LeaderAndIsrBody): Promise<PartitionErrorsAnswer | undefined> {
    return this.#put(brokerId, 'leader-and-isr', body, body.partitions);
  }

  /** Queues a STOP_REPLICA for `brokerId`; resolves as {@link leaderAndIsr}. */
  stopReplica(brokerId: number, body: StopReplicaBody): Promise<PartitionErrorsAnswer | undefined> {
    return this.#put(brokerId, 'stop-replica', body, body.partitions);
  }

  #put(
    brokerId: number,
    kind: Queued['kind'],
    body: LeaderAndIsrBody | StopReplicaBody,
    partitions: readonly Pick<LeaderAndIsrPartition, 'topic' | 'partition'>[],
  ): Promise<PartitionErrorsAnswer | undefined> {
    const q = this.#queue(brokerId);
    if (q === undefined || partitions.length === 0) return Promise.resolve(undefined);
    return new Promise((done) => {
      const keys = new Set(partitions.map((p) => partitionKey(p.topic, p.partition)));
      q.put({ kind, body, keys, done } as Queued);
    });
  }

  /** Drops the queue of a broker that left `/brokers/ids` (its requests resolve undefined). */
  removeBroker(brokerId: number): void {
    this.#queues.get(brokerId)?.close();
    this.#queues.delete(brokerId);
  }

  /** Drops every queue; nothing is sent after this. */
  close(): void {
    this.#closed = true;
    for (const q of this.#queues.values()) q.close();
    this.#queues.clear();
  }
}
