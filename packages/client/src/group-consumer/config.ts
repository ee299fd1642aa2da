/**
 * The settings of a group consumer (docs/design.md §4): what an application may set, the
 * defaults (as Kafka 0.7's consumer config) and the checks a {@link GroupConsumer} runs on them
 * before it connects anything.
 */
import type { Logger } from '@klog/logger';
import type { GroupPartition } from '@klog/zk-registry';
import { defaultDecompressedBytesPerFetchByte, defaultFetchBytes, defaultMaxFetchBytes } from '../simple-consumer.js';
import type { OffsetResetEvent } from './fetcher.js';
import { defaultQueuedChunksMax, type GroupMessage } from './message-stream.js';
import { type OffsetReset, parseOffsetReset } from './offset-reset.js';

/** Settings of a {@link GroupConsumer}; durations in ms, sizes in bytes. */
export interface GroupConsumerConfig {
  /** ZooKeeper connect string `host:port[,host:port...][/chroot]`. */
  zookeeper: string;
  /** The consumer group: consumers of one group share the partitions. */
  groupId: string;
  /** This consumer's id in the group; default `<groupId>_<hostname>-<epoch ms>-<8 hex>`. */
  consumerId?: string;
  /** Where a partition without a valid committed offset starts: its earliest (`smallest`) or its end (`largest`, default, as Kafka 0.7). */
  autoOffsetReset?: OffsetReset;
  /** Commit the consumed offsets every `autoCommitIntervalMs`, before a rebalance and on close. Default true. */
  autoCommit?: boolean;
  /** Auto-commit interval, ms. Default 1000. */
  autoCommitIntervalMs?: number;
  /** Bytes per fetch; grown (up to `maxFetchBytes`) for a message larger than it. Default 1 MiB. */
  fetchBytes?: number;
  /** Largest fetch, bytes; a larger message is an error the streams throw. Default 16 MiB. */
  maxFetchBytes?: number;
  /**
   * Most bytes one fetch decompresses (against decompression bombs); a single compressed set
   * larger than this is a DecompressedTooLargeError the streams throw. Default 4 × maxFetchBytes.
   */
  maxDecompressedBytes?: number;
  /** Long-poll wait per fetch at the log end, ms. Default 500. */
  maxWaitMs?: number;
  /** ZooKeeper session timeout, ms: how long after a crash this consumer's partitions move. Default 6000. */
  zkSessionTimeoutMs?: number;
  /** Attempts of one rebalance before it fails with {@link RebalanceFailedError}. Default 4. */
  rebalanceMaxRetries?: number;
  /** Wait between two attempts of a rebalance, ms. Default 2000. */
  rebalanceBackoffMs?: number;
  /** Fetched chunks a stream queues before its fetchers wait (back-pressure). Default 10. */
  queuedChunksMax?: number;
  /** pino-compatible logger. Default: silent. */
  logger?: Logger;
  /**
   * Called when a fetch met OffsetOutOfRange and `autoOffsetReset` moved the partition's
   * position, e.g. retention deleted data from `from` up to `earliest` before it was consumed.
   */
  onOffsetReset?: (event: OffsetResetEvent) => void;
  /**
   * Called when partitions are about to be released (a rebalance or {@link GroupConsumer.close}),
   * after the fetchers stopped (no message of them is handed out any more) and before the
   * ownership goes: the application finishes what it holds of them and returns the positions
   * to commit (as for {@link GroupConsumer.commitOffsets} with `processed`), committed before
   * the release. The rebalance waits for it, so keep it bounded. A throw is logged and ignored.
   */
  beforeRelease?: (
    partitions: readonly OwnedPartition[],
    why: 'rebalance' | 'close',
  ) => Promise<Iterable<ProcessedPosition> | undefined>;
}

/** The settings with every default filled in (the callbacks, logger and consumer id aside). */
export type ResolvedGroupConsumerConfig = Required<Omit<GroupConsumerConfig, 'consumerId' | 'logger' | 'onOffsetReset' | 'beforeRelease'>>;

/** A partition a consumer owns. */
export interface OwnedPartition {
  readonly topic: string;
  /** The broker holding it; {@link replicatedBrokerId} (−1) for a replicated topic's partition. */
  readonly brokerId: number;
  /** The partition on that broker, or the replicated topic's partition `0..N-1`. */
  readonly partition: number;
}

/** A position the application has finished with: commit `nextOffset` for its partition. */
export type ProcessedPosition = Pick<GroupMessage, 'topic' | 'brokerId' | 'partition' | 'nextOffset'>;

/**
 * The `brokerId` of a replicated topic's partition in a group consumer's shapes ({@link
 * OwnedPartition}, `GroupMessage`, {@link ProcessedPosition}): such a partition is not on one
 * broker but led by one of its replicas, so it is named by its number `0..N-1` alone
 * (docs/replication.md §14).
 */
export const replicatedBrokerId = -1;

/** Key of a partition in maps: `<topic>/<brokerId>-<partition>`, or `<topic>/<partition>` for a replicated one. */
export function partitionKey(p: OwnedPartition): string {
  return p.brokerId === replicatedBrokerId ? `${p.topic}/${p.partition}` : `${p.topic}/${p.brokerId}-${p.partition}`;
}

/** How ZooKeeper's owner and offset nodes name a partition (docs/replication.md §14): `<partition>` for a replicated one. */
export function groupPartition(p: { readonly brokerId: number; readonly partition: number }): GroupPartition {
  return p.brokerId === replicatedBrokerId ? { replicated: true, partition: p.partition } : { brokerId: p.brokerId, partition: p.partition };
}

/**
 * Fills in the defaults and checks every setting (the group id is checked by the caller, with
 * `checkGroup` of @klog/zk-registry).
 * @throws RangeError for a setting out of range, naming it and the value seen
 */
export function resolveGroupConsumerConfig(config: GroupConsumerConfig): ResolvedGroupConsumerConfig {
  const c: ResolvedGroupConsumerConfig = {
    zookeeper: config.zookeeper,
    groupId: config.groupId,
    autoOffsetReset: config.autoOffsetReset ?? 'largest',
    autoCommit: config.autoCommit ?? true,
    autoCommitIntervalMs: config.autoCommitIntervalMs ?? 1000,
    fetchBytes: config.fetchBytes ?? defaultFetchBytes,
    maxFetchBytes: config.maxFetchBytes ?? defaultMaxFetchBytes,
    maxDecompressedBytes: config.maxDecompressedBytes ?? defaultDecompressedBytesPerFetchByte * (config.maxFetchBytes ?? defaultMaxFetchBytes),
    maxWaitMs: config.maxWaitMs ?? 500,
    zkSessionTimeoutMs: config.zkSessionTimeoutMs ?? 6000,
    rebalanceMaxRetries: config.rebalanceMaxRetries ?? 4,
    rebalanceBackoffMs: config.rebalanceBackoffMs ?? 2000,
    queuedChunksMax: config.queuedChunksMax ?? defaultQueuedChunksMax,
  };
  parseOffsetReset(c.autoOffsetReset, 'autoOffsetReset');
  positive('autoCommitIntervalMs', c.autoCommitIntervalMs);
  positive('fetchBytes', c.fetchBytes);
  positive('maxFetchBytes', c.maxFetchBytes);
  positive('maxDecompressedBytes', c.maxDecompressedBytes);
  positive('zkSessionTimeoutMs', c.zkSessionTimeoutMs);
  positive('rebalanceMaxRetries', c.rebalanceMaxRetries);
  positive('queuedChunksMax', c.queuedChunksMax);
  if (!Number.isInteger(c.maxWaitMs) || c.maxWaitMs < 0) throw new RangeError(`maxWaitMs ${c.maxWaitMs} must be a non-negative integer`);
  if (!Number.isInteger(c.rebalanceBackoffMs) || c.rebalanceBackoffMs < 0) {
    throw new RangeError(`rebalanceBackoffMs ${c.rebalanceBackoffMs} must be a non-negative integer`);
  }
  if (c.fetchBytes > c.maxFetchBytes) throw new RangeError(`fetchBytes ${c.fetchBytes} exceeds maxFetchBytes ${c.maxFetchBytes}`);
  return c;
}

function positive(name: string, value: number): void {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${name} ${value} must be a positive integer`);
}
