/**
 * @klog/storage: klog's log on disk (docs/design.md §2). Segments named by byte offset, one log per
 * partition, flush by count or time with reads limited to the flushed end, retention by age
 * and size, recovery of the last segment after an unclean shutdown, and the read path that
 * sends segment bytes to sockets with sendfile(2) or a pooled read-and-write fallback (docs/design.md §3);
 * replica logs of replicated topics with their follower operations (docs/replication.md §8).
 */
export * from './buffer-pool.js';
export * from './config.js';
export * from './errors.js';
export * from './file-region.js';
export * from './log.js';
export { lastMessageOf } from './log-flush.js';
export * from './log-manager.js';
export * from './recovery.js';
export * from './segment.js';
export * from './send-region.js';
export * from './segment-list.js';
export * from './log-dir-lock.js';
export { makeDirs } from './make-dirs.js';
export * from './flusher.js';
export * from './sync-check.js';
export * from './leader-epoch-checkpoint.js';
export * from './high-watermark-checkpoint.js';
export * from './replica-log.js';
export * from './replica-metadata.js';
export { deletingReplicaSuffix, type ReplicaDirInfo, staleReplicaSuffix } from './replica-dirs.js';
