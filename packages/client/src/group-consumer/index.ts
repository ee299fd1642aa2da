/**
 * The group consumer (the paper §3.3, docs/design.md §4): {@link GroupConsumer}, its streams, the fetchers
 * and the pure Algorithm 1 ({@link assignPartitions}).
 */
export * from './group-consumer.js';
export { groupPartition, partitionKey, replicatedBrokerId } from './config.js';
export * from './message-stream.js';
export { type OffsetResetEvent } from './fetcher.js';
export * from './offset-reset.js';
export * from './rebalance.js';
