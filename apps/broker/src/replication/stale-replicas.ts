/**
 * Leftover replica directories (docs/replication.md §8.1): once a broker in cluster mode has
 * joined, it reads the replicated topics' definitions and renames aside, as
 * `<topic>-<partition>.<ms>.stale` (packages/storage's `LogManager.renameStaleReplica`, which
 * logs and counts it), every replica directory whose topic is gone from ZooKeeper or has another
 * topic id now (deleted while the broker was down, or deleted and created again). Nothing is
 * deleted. A topic whose definition cannot be read is left alone.
 */
import type { LogManager } from '@klog/storage';
import { ReplicatedTopicRegistry, type ZkClient } from '@klog/zk-registry';
import type { Logger } from 'pino';

/**
 * Renames the leftover replica directories of `logs` aside.
 * @returns how many were renamed
 * @throws the ZooKeeper error when the definitions cannot be read (nothing renamed then)
 */
export async function renameStaleReplicas(zk: ZkClient, logs: LogManager, logger: Logger): Promise<number> {
  const dirs = logs.replicaDirs();
  if (dirs.length === 0) return 0;
  const registry = new ReplicatedTopicRegistry(zk, { logger });
  const names = new Set(await registry.listTopics());
  const definitions = await registry.readDefinitions();
  let renamed = 0;
  for (const d of dirs) {
    const definition = definitions.get(d.topic);
    const gone = !names.has(d.topic);
    const otherId = definition !== undefined && d.topicId !== undefined && definition.id !== d.topicId;
    if (!gone && !otherId) continue;
    logger.warn({ topic: d.topic, partition: d.partition, dir: d.dir, topicId: d.topicId, zookeeperTopicId: definition?.id }, 'replica of a topic that is gone or has another id');
    if ((await logs.renameStaleReplica(d.topic, d.partition)) !== undefined) renamed++;
  }
  return renamed;
}
