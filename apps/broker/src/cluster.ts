/**
 * Cluster mode (the paper §3.3, docs/design.md §4): the broker registers itself and every topic it holds
 * in ZooKeeper, ephemerally, so producers and consumers find it and notice when it goes.
 *
 * - `/brokers/ids/<brokerId>` = `<creatorId>:<host>:<port>`
 * - `/brokers/topics/<topic>/<brokerId>` = the topic's partition count on this broker,
 *   for topics on disk at start and for every topic created later.
 *
 * The registrations converge: the ZooKeeper client keeps them and writes them again until they
 * hold, after a session expiry, after a server lost its data, and when a registration made
 * while ZooKeeper was away did not get through (docs/architecture.md, "ZooKeeper").
 */
import { join } from 'node:path';
import { BrokerRegistry, TopicIsReplicatedError, ZkClient, ZkNodeExistsError } from '@klog/zk-registry';
import type { LogManager } from '@klog/storage';
import type { Logger } from 'pino';
import type { BrokerConfig } from './config.js';

/** A broker's membership in a cluster. */
export interface ClusterMembership {
  /** The ZooKeeper client holding the broker's session. */
  readonly zk: ZkClient;
  /** Removes the registrations and closes the session. */
  leave(): Promise<void>;
}

/**
 * Registers the broker at `host:port` and its topics under `config.zookeeper`. A broker id
 * still held by a session that is going away (a restart right after a crash) is waited for up
 * to the session timeout plus 2 s.
 * @throws BrokerIdInUseError when a live broker holds `config.brokerId`; ZkConnectError when no
 *   ZooKeeper answers
 */
export async function joinCluster(config: BrokerConfig, port: number, logs: LogManager, logger: Logger): Promise<ClusterMembership> {
  const zk = await ZkClient.connect(config.zookeeper!, { sessionTimeoutMs: config.zkSessionTimeoutMs, logger });
  try {
    const registry = new BrokerRegistry(zk, { logger });
    await registry.registerBroker(config.brokerId, config.host, port, { waitForIdMs: zk.negotiatedSessionTimeoutMs + 2000 });
    const register = (topic: string, partitions: number): Promise<void> =>
      registry.registerTopic(topic, config.brokerId, partitions).catch((err: unknown) => {
        if (err instanceof TopicIsReplicatedError) {
          // A replicated topic took the name before this broker's paper topic was registered
          // (docs/replication.md §3): its directories stay on disk, unregistered, for the operator.
          const dirs = Array.from({ length: partitions }, (_, p) => join(config.logDir, `${topic}-${p}`));
          logger.error({ topic, dirs }, 'paper topic not registered: a replicated topic has this name; its directories are kept for the operator');
        } else if (err instanceof ZkNodeExistsError) logger.error({ topic, err }, 'registering topic in ZooKeeper failed: another session holds it');
        else logger.warn({ topic, err }, 'topic not registered in ZooKeeper yet; it is registered once ZooKeeper answers');
      });
    const stopListening = logs.onTopicCreated((topic, partitions) => void register(topic, partitions));
    await Promise.all([...logs.topics()].map(([topic, partitions]) => register(topic, partitions)));
    logger.info({ zookeeper: config.zookeeper, brokerId: config.brokerId, sessionId: zk.sessionId, topics: logs.topics().size }, 'joined cluster');
    return {
      zk,
      async leave() {
        stopListening();
        await zk.close();
      },
    };
  } catch (err) {
    await zk.close();
    throw err;
  }
}
