/**
 * The fetchers of a group consumer (docs/design.md §3-§4): after a rebalance, one
 * {@link BrokerFetcher} per live broker that leads an owned partition; all of them stopped
 * together before the next rebalance releases the partitions, or while the ZooKeeper session
 * is in doubt.
 */
import type { BrokerInfo } from '@klog/zk-registry';
import { BrokerFetcher, type FetcherOptions } from './fetcher.js';
import type { MessageQueue, PartitionTopicInfo } from './message-stream.js';

/** Settings of the fetchers, as {@link FetcherOptions} without the error callback (the pool fails the partition's stream). */
export type FetcherPoolOptions = Omit<FetcherOptions, 'onFatal'>;

/** The running fetchers of one consumer. */
export class FetcherPool {
  private fetchers: BrokerFetcher[] = [];
  /** Resolves when the fetchers last stopped have finished. */
  private stopped: Promise<void> = Promise.resolve();

  constructor(private readonly options: FetcherPoolOptions) {}

  /** True while fetchers run (started and not stopped since). */
  get running(): boolean {
    return this.fetchers.length > 0;
  }

  /**
   * Starts one fetcher per broker of `partitions` that is in `live` (a partition of a broker
   * not in it waits for the next rebalance); does nothing while fetchers run.
   */
  start(partitions: Iterable<PartitionTopicInfo>, live: ReadonlyMap<number, BrokerInfo>): void {
    if (this.running) return;
    const byBroker = new Map<number, PartitionTopicInfo[]>();
    for (const info of partitions) {
      // A replicated partition is fetched from its leader at the rebalance; its fetcher follows the leader from there.
      const from = info.fetchFrom ?? info.brokerId;
      const list = byBroker.get(from) ?? [];
      list.push(info);
      byBroker.set(from, list);
    }
    for (const [brokerId, infos] of byBroker) {
      const broker = live.get(brokerId);
      if (!broker) continue;
      const fetcher = new BrokerFetcher(broker, infos, { ...this.options, onFatal: (info, error) => info.queue.fail(error) });
      fetcher.start();
      this.fetchers.push(fetcher);
    }
  }

  /**
   * Stops the fetchers and drops the messages of `partitions` they queued in `queues` but no
   * iterator took, at once (no message is handed out after this call returns); resolves when
   * every fetcher stopped so far has finished.
   */
  stop(queues: Iterable<readonly MessageQueue[]>, partitions: Iterable<PartitionTopicInfo>): Promise<void> {
    const fetchers = this.fetchers;
    this.fetchers = [];
    const infos = new Set(partitions);
    for (const list of queues) for (const q of list) q.clear(infos);
    const stopping = Promise.all(fetchers.map((f) => f.stop())).then(() => undefined);
    this.stopped = Promise.all([this.stopped, stopping]).then(() => undefined);
    return this.stopped;
  }
}
