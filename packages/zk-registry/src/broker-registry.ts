/**
 * The broker registry (docs/design.md §4): which brokers are alive and which topics they hold.
 *
 * - `/brokers/ids/<brokerId>`, ephemeral, value `<creatorId>:<host>:<port>` (Kafka 0.7's
 *   `Broker.getZKString`): `creatorId` names the process that registered (by default
 *   `<hostname>-<epoch ms>`, without `:`), `host` may itself contain `:` (IPv6), so the value
 *   splits at its first and its last `:`.
 * - `/brokers/topics/<topic>/<brokerId>`, ephemeral, value the topic's partition count on
 *   that broker as a decimal string (Kafka 0.7), partitions being numbered `0..count-1`.
 *
 * Both are registered through {@link ZkClient.registerEphemeral}, so a broker whose session
 * expires is registered again on its new session.
 *
 * Replicated topics share `/brokers/topics` (docs/replication.md §3, "Paper readers"): their node
 * holds a topic definition and their only child is `partitions`, never a broker id. The readers
 * here are the paper's: they read the topic node's data first and skip a replicated topic
 * (replicated-topics.ts reads it), and {@link BrokerRegistry.registerTopic} refuses to register
 * a paper topic under a replicated topic's name.
 */
import { hostname } from 'node:os';
import { BrokerIdInUseError, TopicIsReplicatedError, ZkError, ZkNodeExistsError } from './errors.js';
import type { Logger } from '@klog/logger';
import {
  brokerIdPath,
  brokerIdsPath,
  brokerTopicBrokerPath,
  brokerTopicPath,
  brokerTopicsPath,
  checkBrokerId,
  parseBrokerId,
  topicPartitionsNodeName,
  type BrokerPartition,
} from './paths.js';
import { holdsTopicDefinition } from './replicated-values.js';
import type { ZkClient, ZkWatch } from './zk-client.js';

/** A live broker as registered in `/brokers/ids/<id>`. */
export interface BrokerInfo {
  /** Broker id, a non-negative integer. */
  readonly id: number;
  /** Host name or address clients connect to. */
  readonly host: string;
  /** TCP port clients connect to (1-65535). */
  readonly port: number;
  /** Who registered it: `<hostname>-<epoch ms>` by default. */
  readonly creatorId: string;
}

/** A live broker with its broker epoch (docs/replication.md §2). */
export interface RegisteredBroker extends BrokerInfo {
  /**
   * The `czxid` of its `/brokers/ids/<id>` node: a new, larger value each time the broker
   * registers (after a restart or a session expiry). The controller tells a broker that came back
   * from one that stayed by it (§5.2).
   */
  readonly brokerEpoch: number;
}

/** How many partitions of a topic one broker holds (`/brokers/topics/<topic>/<brokerId>`). */
export interface TopicBrokerPartitions {
  readonly brokerId: number;
  /** Partition count on that broker; its partitions are `0..partitions-1`. */
  readonly partitions: number;
}

/** Encodes a broker registration value: `<creatorId>:<host>:<port>`. */
export function encodeBrokerInfo(info: Omit<BrokerInfo, 'id'>): string {
  return `${info.creatorId}:${info.host}:${info.port}`;
}

/**
 * Decodes `<creatorId>:<host>:<port>` (split at the first and last `:`, so an IPv6 host
 * survives). Returns undefined when the value does not have that form or the port is not
 * 1-65535.
 */
export function decodeBrokerInfo(id: number, value: string): BrokerInfo | undefined {
  const first = value.indexOf(':');
  const last = value.lastIndexOf(':');
  if (first < 0 || last <= first) return undefined;
  const host = value.slice(first + 1, last);
  const portText = value.slice(last + 1);
  const port = Number(portText);
  if (host === '' || !/^\d{1,5}$/.test(portText) || port < 1 || port > 65535) return undefined;
  return { id, host, port, creatorId: value.slice(0, first) };
}

/** The default creator id: `<hostname>-<epoch ms>`, with any `:` replaced by `_`. */
export function defaultCreatorId(now: number = Date.now()): string {
  return `${hostname()}-${now}`.replace(/:/g, '_');
}

/**
 * Expands per-broker partition counts into the sorted list of every (broker, partition) of
 * a topic: by broker id, then partition. This order is the one the paper's Algorithm 1 and
 * key partitioning rely on.
 */
export function allPartitions(counts: readonly TopicBrokerPartitions[]): BrokerPartition[] {
  const out: BrokerPartition[] = [];
  for (const { brokerId, partitions } of [...counts].sort((a, b) => a.brokerId - b.brokerId)) {
    for (let partition = 0; partition < partitions; partition++) out.push({ brokerId, partition });
  }
  return out;
}

/** Options of {@link BrokerRegistry.registerBroker}. */
export interface RegisterBrokerOptions {
  /** Value written as creator id; default {@link defaultCreatorId}. */
  creatorId?: string;
  /**
   * When the id is held by another session, wait up to this many ms for it to go before
   * failing (a broker restarted right after a crash finds its previous session's node until
   * that session times out). Default 0: fail at once.
   */
  waitForIdMs?: number;
}

/** Reads and writes `/brokers/ids` and `/brokers/topics` (docs/design.md §4). */
export class BrokerRegistry {
  private readonly logger: Logger;

  constructor(
    private readonly zk: ZkClient,
    options: { logger?: Logger } = {},
  ) {
    this.logger = options.logger ?? zk.logger;
  }

  /**
   * Registers this broker: ephemeral `/brokers/ids/<id>` = `<creatorId>:<host>:<port>`,
   * re-created after session expiry. Registering again from the same client updates it.
   * Throws {@link BrokerIdInUseError} when another live session holds the id (after waiting
   * `waitForIdMs`), {@link InvalidNameError} for a bad id, {@link ZkError} for a bad port.
   */
  async registerBroker(id: number, host: string, port: number, options: RegisterBrokerOptions = {}): Promise<BrokerInfo> {
    const path = brokerIdPath(id);
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new ZkError(`invalid broker port ${port}: must be 1-65535`);
    if (host === '') throw new ZkError('invalid broker host: empty');
    const info: BrokerInfo = { id, host, port, creatorId: options.creatorId ?? defaultCreatorId() };
    const deadline = Date.now() + (options.waitForIdMs ?? 0);
    for (;;) {
      try {
        await this.zk.registerEphemeral(path, encodeBrokerInfo(info));
        this.logger.info({ brokerId: id, host, port, path }, 'broker registered in ZooKeeper');
        return info;
      } catch (error) {
        if (!(error instanceof ZkNodeExistsError)) throw error;
        const holder = (await this.zk.getData(path))?.data.toString('utf8');
        if (Date.now() >= deadline) throw new BrokerIdInUseError(id, holder, path);
        this.logger.warn({ brokerId: id, holder }, 'broker id still registered by another session; waiting for it to go');
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  }

  /** Removes this broker's registration (only if this session holds it). Returns whether it was removed. */
  async unregisterBroker(id: number): Promise<boolean> {
    return this.zk.unregisterEphemeral(brokerIdPath(id));
  }

  /**
   * Registers that broker `brokerId` holds `partitions` partitions of the paper topic `topic`:
   * ephemeral `/brokers/topics/<topic>/<brokerId>` = decimal count, re-created after session
   * expiry; registering again updates the count. The topic node is created (empty) first and
   * read: a node that holds a topic definition is a replicated topic's, and nothing is
   * registered. Once the empty node exists, no replicated topic can take the name (its create
   * fails), so the check has no window (docs/replication.md §3). While ZooKeeper is unreachable
   * the check is skipped (logged) and the registration kept, to be written once ZooKeeper is back,
   * as every registration is.
   * Throws {@link TopicIsReplicatedError} for a replicated topic's name,
   * {@link ZkNodeExistsError} when another session holds the node, {@link InvalidNameError} for
   * a bad topic or id.
   */
  async registerTopic(topic: string, brokerId: number, partitions: number): Promise<void> {
    if (!Number.isInteger(partitions) || partitions < 1 || partitions > 0x7fffffff) {
      throw new ZkError(`invalid partition count ${partitions} for topic ${topic}: must be a positive int32`);
    }
    const topicPath = brokerTopicPath(topic);
    try {
      await this.zk.mkdirp(topicPath);
      const node = await this.zk.getData(topicPath);
      if (node !== undefined && holdsTopicDefinition(node.data)) throw new TopicIsReplicatedError(topic, topicPath);
    } catch (error) {
      // ZooKeeper unreachable: the registration still converges once it is back (ephemerals.ts).
      if (!(error instanceof ZkError) || !error.retriable) throw error;
      this.logger.warn({ topic, err: error }, 'could not check that the topic is no replicated topic (ZooKeeper unreachable); registering it anyway');
    }
    await this.zk.registerEphemeral(brokerTopicBrokerPath(topic, brokerId), String(partitions));
  }

  /** Removes a topic registration of this broker (only if this session holds it). */
  async unregisterTopic(topic: string, brokerId: number): Promise<boolean> {
    return this.zk.unregisterEphemeral(brokerTopicBrokerPath(topic, brokerId));
  }

  /** The registration of one broker; undefined when it is not alive (or its value is unreadable, with a warning). */
  async getBroker(id: number): Promise<BrokerInfo | undefined> {
    const node = await this.zk.getData(brokerIdPath(id));
    if (node === undefined) return undefined;
    const value = node.data.toString('utf8');
    const info = decodeBrokerInfo(checkBrokerId(id), value);
    if (info === undefined) this.logger.warn({ brokerId: id, value }, 'ignoring unreadable broker registration');
    return info;
  }

  /** The broker epoch of a live broker (the `czxid` of `/brokers/ids/<id>`); undefined when it is not registered. */
  async getBrokerEpoch(id: number): Promise<number | undefined> {
    return (await this.zk.exists(brokerIdPath(id)))?.czxid;
  }

  /**
   * Every live broker with its broker epoch, by ascending id (a broker that goes while it is
   * read is left out; an unreadable registration is skipped with a warning).
   */
  async listRegisteredBrokers(): Promise<RegisteredBroker[]> {
    const out: RegisteredBroker[] = [];
    for (const id of await this.listBrokerIds()) {
      const node = await this.zk.getData(brokerIdPath(id));
      if (node === undefined) continue;
      const value = node.data.toString('utf8');
      const info = decodeBrokerInfo(id, value);
      if (info === undefined) this.logger.warn({ brokerId: id, value }, 'ignoring unreadable broker registration');
      else out.push({ ...info, brokerEpoch: node.stat.czxid });
    }
    return out;
  }

  /** Ids of the live brokers, ascending. Child names that are not ids are skipped. */
  async listBrokerIds(): Promise<number[]> {
    return this.parseIds(await this.zk.getChildren(brokerIdsPath()));
  }

  /** Every live broker, by ascending id (a broker that goes while it is read is left out). */
  async listBrokers(): Promise<BrokerInfo[]> {
    const out: BrokerInfo[] = [];
    for (const id of await this.listBrokerIds()) {
      const info = await this.getBroker(id);
      if (info) out.push(info);
    }
    return out;
  }

  /**
   * Names of every paper topic ever registered (a topic whose brokers are all gone stays
   * listed), sorted. Replicated topics are left out (ReplicatedTopicRegistry.listTopics lists
   * them); telling them apart reads each topic node.
   */
  async listTopics(): Promise<string[]> {
    const out: string[] = [];
    for (const topic of await this.zk.getChildren(brokerTopicsPath())) {
      let node;
      try {
        node = await this.zk.getData(brokerTopicPath(topic));
      } catch (error) {
        this.logger.warn({ topic, err: error }, 'ignoring an unreadable /brokers/topics child');
        continue;
      }
      if (node !== undefined && !holdsTopicDefinition(node.data)) out.push(topic);
    }
    return out;
  }

  /**
   * The live brokers holding the paper topic `topic` and their partition counts, by ascending
   * broker id. Empty when no live broker holds it, and for a replicated topic (its node holds a
   * definition: read it with ReplicatedTopicRegistry). Unreadable counts are skipped with a
   * warning.
   */
  async topicPartitions(topic: string): Promise<TopicBrokerPartitions[]> {
    const topicNode = await this.zk.getData(brokerTopicPath(topic));
    if (topicNode === undefined || holdsTopicDefinition(topicNode.data)) return [];
    const out: TopicBrokerPartitions[] = [];
    for (const brokerId of this.parseIds(await this.zk.getChildren(brokerTopicPath(topic)))) {
      const node = await this.zk.getData(brokerTopicBrokerPath(topic, brokerId));
      if (node === undefined) continue;
      const value = node.data.toString('utf8');
      const partitions = /^\d{1,10}$/.test(value) ? Number(value) : NaN;
      if (!(partitions >= 1 && partitions <= 0x7fffffff)) {
        this.logger.warn({ topic, brokerId, value }, 'ignoring unreadable topic partition count');
        continue;
      }
      out.push({ brokerId, partitions });
    }
    return out;
  }

  /** Every topic with its live brokers and partition counts (see {@link topicPartitions}). */
  async listTopicPartitions(): Promise<Map<string, TopicBrokerPartitions[]>> {
    const out = new Map<string, TopicBrokerPartitions[]>();
    for (const topic of await this.listTopics()) {
      try {
        out.set(topic, await this.topicPartitions(topic));
      } catch (error) {
        this.logger.warn({ topic, err: error }, 'skipping unreadable topic');
      }
    }
    return out;
  }

  /** Calls back with the live broker ids (ascending) now and on every change, until closed. */
  watchBrokerIds(callback: (brokerIds: number[]) => void | Promise<void>): ZkWatch {
    return this.zk.watchChildren(brokerIdsPath(), (children) => callback(this.parseIds(children)));
  }

  /**
   * Calls back with the topic names (sorted) now and whenever a topic appears or goes, until
   * closed. The names include replicated topics' ({@link topicPartitions} reads them as held by
   * no broker).
   */
  watchTopics(callback: (topics: string[]) => void | Promise<void>): ZkWatch {
    return this.zk.watchChildren(brokerTopicsPath(), callback);
  }

  /**
   * Calls back with the ids of the live brokers holding the paper topic `topic` now and on every
   * change, until closed. A replicated topic (its `partitions` child) reads as held by no broker.
   */
  watchTopicBrokers(topic: string, callback: (brokerIds: number[]) => void | Promise<void>): ZkWatch {
    return this.zk.watchChildren(brokerTopicPath(topic), (children) => callback(children.includes(topicPartitionsNodeName) ? [] : this.parseIds(children)));
  }

  private parseIds(children: string[]): number[] {
    const ids: number[] = [];
    for (const child of children) {
      const id = parseBrokerId(child);
      if (id === undefined) this.logger.warn({ child }, 'ignoring a broker znode whose name is not a broker id');
      else ids.push(id);
    }
    return ids.sort((a, b) => a - b);
  }
}
