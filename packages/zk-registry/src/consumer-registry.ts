/**
 * The consumer registry (SPEC §4): which consumers of a group are alive and what they read.
 *
 * `/consumers/<group>/ids/<consumerId>`, ephemeral, value the subscription as JSON
 * `{"<topic>": <streamCount>, ...}` (Kafka 0.7's `TopicCount`), re-created after session
 * expiry. A consumer's threads (streams) are named `<consumerId>-<i>`, `i` from 0 per topic
 * (Kafka 0.7), and those names are what the ownership registry stores.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { ZkError } from './errors.js';
import type { Logger } from '@klog/logger';
import { checkGroup, checkTopic, consumerIdPath, consumerIdsPath, consumersPath } from './paths.js';
import type { ZkClient, ZkWatch } from './zk-client.js';

/** A consumer's subscription: topic → number of streams (threads), each ≥ 1. */
export type TopicSubscription = Readonly<Record<string, number>>;

/** A live consumer of a group. */
export interface ConsumerInfo {
  readonly consumerId: string;
  /** Its subscription; empty when the stored value is unreadable (logged). */
  readonly subscription: TopicSubscription;
}

/** Encodes a subscription as JSON `{"topic": streams}`; topics sorted. Throws {@link ZkError} for a count that is not a positive integer. */
export function encodeSubscription(subscription: TopicSubscription): string {
  const sorted: Record<string, number> = {};
  for (const topic of Object.keys(subscription).sort()) {
    checkTopic(topic);
    const streams = subscription[topic];
    if (!Number.isInteger(streams) || streams === undefined || streams < 1) {
      throw new ZkError(`invalid stream count ${String(streams)} for topic ${topic}: must be a positive integer`);
    }
    sorted[topic] = streams;
  }
  return JSON.stringify(sorted);
}

/** Decodes a subscription; undefined when the value is not a JSON object of topic → positive integer. */
export function decodeSubscription(value: string): TopicSubscription | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return undefined;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return undefined;
  const out: Record<string, number> = {};
  for (const [topic, streams] of Object.entries(parsed)) {
    if (typeof streams !== 'number' || !Number.isInteger(streams) || streams < 1) return undefined;
    out[topic] = streams;
  }
  return out;
}

/** A new consumer id, Kafka 0.7 style: `<group>_<hostname>-<epoch ms>-<8 hex>`. */
export function newConsumerId(group: string, now: number = Date.now()): string {
  return `${checkGroup(group)}_${hostname()}-${now}-${randomBytes(4).toString('hex')}`.replace(/[/\s]/g, '_');
}

/** The thread (stream) ids of a consumer for one topic: `<consumerId>-0 .. <consumerId>-(streams-1)`. */
export function consumerThreadIds(consumerId: string, streams: number): string[] {
  return Array.from({ length: streams }, (_, i) => `${consumerId}-${i}`);
}

/** Reads and writes `/consumers/<group>/ids` (SPEC §4). */
export class ConsumerRegistry {
  private readonly logger: Logger;

  constructor(
    private readonly zk: ZkClient,
    options: { logger?: Logger } = {},
  ) {
    this.logger = options.logger ?? zk.logger;
  }

  /**
   * Registers a consumer of `group` with its subscription (ephemeral, re-created after
   * session expiry); registering again updates the subscription. Throws
   * {@link ZkNodeExistsError} when another live session holds the consumer id.
   */
  async registerConsumer(group: string, consumerId: string, subscription: TopicSubscription): Promise<void> {
    await this.zk.registerEphemeral(consumerIdPath(group, consumerId), encodeSubscription(subscription));
  }

  /** Removes a consumer's registration (only if this session holds it). Returns whether it was removed. */
  async unregisterConsumer(group: string, consumerId: string): Promise<boolean> {
    return this.zk.unregisterEphemeral(consumerIdPath(group, consumerId));
  }

  /** Ids of the live consumers of `group`, sorted. */
  async listConsumerIds(group: string): Promise<string[]> {
    return this.zk.getChildren(consumerIdsPath(group));
  }

  /** The live consumers of `group` with their subscriptions, sorted by id. */
  async listConsumers(group: string): Promise<ConsumerInfo[]> {
    const out: ConsumerInfo[] = [];
    for (const consumerId of await this.listConsumerIds(group)) {
      const node = await this.zk.getData(consumerIdPath(group, consumerId));
      if (node === undefined) continue;
      const value = node.data.toString('utf8');
      const subscription = decodeSubscription(value);
      if (subscription === undefined) {
        this.logger.warn({ group, consumerId, value }, 'unreadable consumer subscription; treating it as empty');
      }
      out.push({ consumerId, subscription: subscription ?? {} });
    }
    return out;
  }

  /** Names of every consumer group with a node under `/consumers`, sorted. */
  async listGroups(): Promise<string[]> {
    return this.zk.getChildren(consumersPath());
  }

  /** Calls back with the live consumer ids of `group` (sorted) now and on every change, until closed. */
  watchConsumers(group: string, callback: (consumerIds: string[]) => void | Promise<void>): ZkWatch {
    return this.zk.watchChildren(consumerIdsPath(group), callback);
  }
}
