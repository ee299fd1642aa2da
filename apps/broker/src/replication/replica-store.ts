/**
 * Where this broker keeps its replica logs (docs/replication.md §8.1): packages/storage's
 * LogManager, which holds them apart from paper logs (`getReplicaLog`, `createReplicaLog`,
 * `deleteReplicaLog`), opens them at start, flushes, retains and closes them.
 */
import { ReplicaDirError, type LogManager } from '@klog/storage';
import type { ReplicaStore } from './replica-manager.js';

/** A {@link ReplicaStore} over the broker's log manager. */
export function logManagerReplicaStore(logs: LogManager): ReplicaStore {
  return {
    async open(topic, partition, topicId) {
      let log;
      try {
        log = logs.getReplicaLog(topic, partition);
      } catch {
        return 'taken'; // a replica found at start that did not open (logged by the log manager)
      }
      if (log !== undefined) return log.topicId === topicId ? log : 'taken';
      if (logs.getLog(topic, partition) !== undefined || logs.partitionCount(topic) !== undefined) return 'taken';
      return 'missing';
    },
    async create(topic, partition, topicId) {
      return logs.createReplicaLog(topic, partition, topicId);
    },
    async delete(topic, partition) {
      await logs.deleteReplicaLog(topic, partition);
    },
  };
}

/** True for the error a replica directory that is taken (a paper partition, another topic id) is created with. */
export function isReplicaDirTaken(err: unknown): boolean {
  return err instanceof ReplicaDirError;
}
