/**
 * The admin's requests to the controller in ZooKeeper (docs/replication.md §3, §5.3, §15.1):
 *
 * - `/admin/delete-topics/<topic>`, persistent, empty: delete the replicated topic. Created by
 *   the admin (`klog topics --delete`); removed by the controller in the fenced multi that
 *   removes the topic's definition (§5.3, "Deleting a topic").
 * - `/admin/preferred-leader-election`, persistent, JSON
 *   `{"version":1,"partitions":[{"topic":"events","partition":0}]}` or `{"version":1,"all":true}`:
 *   run a preferred-leader election. Created by the admin (fails while one runs); removed by the
 *   controller, fenced, once it has run.
 */
import { InvalidZkValueError, ZkError, ZkNodeExistsError } from './errors.js';
import { JsonFields } from './json-fields.js';
import type { Logger } from '@klog/logger';
import { checkPartition, checkTopic, deleteTopicPath, deleteTopicsPath, preferredLeaderElectionPath, topicNames } from './paths.js';
import type { ZkClient, ZkOp, ZkWatch } from './zk-client.js';

/** A partition of a replicated topic, by name and number. */
export interface TopicPartitionRef {
  readonly topic: string;
  readonly partition: number;
}

/** What a preferred-leader election covers: every partition of every replicated topic, or the partitions listed. */
export type PreferredLeaderElectionRequest = { readonly all: true } | { readonly all: false; readonly partitions: readonly TopicPartitionRef[] };

/** A preferred-leader election request as read, with the node's version (for the controller's removal). */
export interface PreferredLeaderElectionNode {
  /** The request; undefined when the value does not parse (then `invalid` says why; the controller removes it). */
  readonly request: PreferredLeaderElectionRequest | undefined;
  readonly invalid?: InvalidZkValueError;
  readonly version: number;
}

/** A preferred-leader election was asked for while another one is pending: `/admin/preferred-leader-election` exists. */
export class PreferredLeaderElectionInProgressError extends ZkError {
  constructor(path: string) {
    super('a preferred-leader election is already in progress; try again when it is done', { path });
  }
}

/** The JSON of a preferred-leader election request, `version` 1. Throws {@link InvalidNameError} for a bad topic or partition. */
export function encodePreferredLeaderElection(request: PreferredLeaderElectionRequest): string {
  if (request.all) return JSON.stringify({ version: 1, all: true });
  if (request.partitions.length === 0) throw new ZkError('a preferred-leader election request names at least one partition (or all)');
  return JSON.stringify({ version: 1, partitions: request.partitions.map((p) => ({ topic: checkTopic(p.topic), partition: checkPartition(p.partition) })) });
}

/** Parses a preferred-leader election request. Throws {@link InvalidZkValueError}. */
export function parsePreferredLeaderElection(text: string, path: string = preferredLeaderElectionPath()): PreferredLeaderElectionRequest {
  const f: JsonFields = JsonFields.parse('preferred-leader election request', path, text);
  f.version1();
  if (f.has('all')) {
    if (f.bool('all')) return { all: true };
  }
  const raw = f.raw('partitions');
  if (!Array.isArray(raw) || raw.length === 0) f.fail(raw === undefined ? 'neither "all": true nor "partitions"' : '"partitions" must be a non-empty array');
  const partitions: TopicPartitionRef[] = [];
  for (const entry of raw as unknown[]) {
    const e = entry as { topic?: unknown; partition?: unknown } | null;
    const topic = e?.topic;
    const partition = e?.partition;
    if (typeof topic !== 'string' || typeof partition !== 'number') f.fail(`"partitions" entry ${JSON.stringify(entry)} must be {"topic": name, "partition": number}`);
    try {
      partitions.push({ topic: checkTopic(topic), partition: checkPartition(partition) });
    } catch (error) {
      f.fail((error as Error).message);
    }
  }
  return { all: false, partitions };
}

/** Creates, reads, watches and removes the admin request nodes (docs/replication.md §3). */
export class AdminRequestRegistry {
  private readonly logger: Logger;

  constructor(
    private readonly zk: ZkClient,
    options: { logger?: Logger } = {},
  ) {
    this.logger = options.logger ?? zk.logger;
  }

  /**
   * Asks the controller to delete a replicated topic: creates `/admin/delete-topics/<topic>`.
   * Returns false when that deletion was already asked for (the node exists). The caller checks
   * first that the topic is a replicated one (a paper topic's logs belong to its brokers, §15.1).
   */
  async requestTopicDeletion(topic: string): Promise<boolean> {
    try {
      await this.zk.create(deleteTopicPath(topic));
      this.logger.info({ topic }, 'topic deletion requested');
      return true;
    } catch (error) {
      if (error instanceof ZkNodeExistsError) return false;
      throw error;
    }
  }

  /** Whether the deletion of `topic` is pending (its request node exists). */
  async isTopicDeletionPending(topic: string): Promise<boolean> {
    return (await this.zk.exists(deleteTopicPath(topic))) !== undefined;
  }

  /** The topics whose deletion is pending, sorted (names that are not topic names skipped with a warning). */
  async listTopicDeletions(): Promise<string[]> {
    return this.topicNames(await this.zk.getChildren(deleteTopicsPath()));
  }

  /** Calls back with the topics whose deletion is pending now and on every change, until closed. */
  watchTopicDeletions(callback: (topics: string[]) => void | Promise<void>): ZkWatch {
    return this.zk.watchChildren(deleteTopicsPath(), (children) => callback(this.topicNames(children)));
  }

  /** The op that removes `/admin/delete-topics/<topic>`, last in the controller's fenced multi that removes the definition (§5.3). */
  removeTopicDeletionOp(topic: string): ZkOp {
    return { op: 'remove', path: deleteTopicPath(topic), version: -1 };
  }

  /**
   * Asks the controller for a preferred-leader election (§15.1): creates
   * `/admin/preferred-leader-election`.
   * @throws PreferredLeaderElectionInProgressError when one is pending; ZkError or
   *   InvalidNameError for a bad request
   */
  async requestPreferredLeaderElection(request: PreferredLeaderElectionRequest): Promise<void> {
    const path = preferredLeaderElectionPath();
    try {
      await this.zk.create(path, encodePreferredLeaderElection(request));
    } catch (error) {
      if (error instanceof ZkNodeExistsError) throw new PreferredLeaderElectionInProgressError(path);
      throw error;
    }
  }

  /** The pending preferred-leader election request; undefined when there is none. */
  async readPreferredLeaderElection(): Promise<PreferredLeaderElectionNode | undefined> {
    const node = await this.zk.getData(preferredLeaderElectionPath());
    return node === undefined ? undefined : this.electionNode(node.data, node.stat.version);
  }

  /** Calls back with the pending preferred-leader election request (undefined when none) now and on every change, until closed. */
  watchPreferredLeaderElection(callback: (node: PreferredLeaderElectionNode | undefined) => void | Promise<void>): ZkWatch {
    return this.zk.watchNode(preferredLeaderElectionPath(), (node) =>
      callback(node === undefined ? undefined : this.electionNode(node.data, node.stat.version)),
    );
  }

  /** The op that removes the preferred-leader election request at `version` (as read), for the controller's fenced multi. */
  removePreferredLeaderElectionOp(version: number): ZkOp {
    return { op: 'remove', path: preferredLeaderElectionPath(), version };
  }

  private electionNode(data: Buffer, version: number): PreferredLeaderElectionNode {
    try {
      return { request: parsePreferredLeaderElection(data.toString('utf8')), version };
    } catch (error) {
      if (!(error instanceof InvalidZkValueError)) throw error;
      this.logger.error({ err: error }, 'unreadable preferred-leader election request');
      return { request: undefined, invalid: error, version };
    }
  }

  private topicNames(children: readonly string[]): string[] {
    return topicNames(children, (child) => this.logger.warn({ child }, 'ignoring a /admin/delete-topics child whose name is not a topic name'));
  }

}
