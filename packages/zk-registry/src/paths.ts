/**
 * Every ZooKeeper path klog uses (docs/design.md §4), relative to the chroot of the connect string.
 * No other module writes a path string.
 *
 * | path                                                        | kind       | value (see the registries) |
 * |-------------------------------------------------------------|------------|----------------------------|
 * | /brokers/ids/<brokerId>                                     | ephemeral  | `<creatorId>:<host>:<port>` |
 * | /brokers/topics/<topic>/<brokerId>                          | ephemeral  | partition count, decimal    |
 * | /brokers/kafka/<brokerId>                                   | ephemeral  | `<host>:<port>` of its Kafka listener |
 * | /consumers/<group>/ids/<consumerId>                         | ephemeral  | JSON `{"<topic>": streams}` |
 * | /consumers/<group>/owners/<topic>/<brokerId>-<partition>    | ephemeral  | owning consumer thread id   |
 * | /consumers/<group>/offsets/<topic>/<brokerId>-<partition>   | persistent | next offset to read, decimal |
 * | /consumers/<group>/audit/window-ms                          | persistent | the audit consumer's count window, ms |
 * | /consumers/<group>/audit/ranges/<topic>/<brokerId>-<partition> | persistent | JSON `{"from":…,"to":…}`: the range being counted |
 *
 * Replication adds (docs/replication.md §3):
 *
 * | path                                                        | kind       | value |
 * |-------------------------------------------------------------|------------|-------|
 * | /brokers/topics/<topic>                                     | persistent | empty (paper topic) or the topic definition, JSON (replicated topic) |
 * | /brokers/topics/<topic>/partitions[/<partition>]            | persistent | empty |
 * | /brokers/topics/<topic>/partitions/<partition>/state        | persistent | the partition state, JSON |
 * | /controller                                                 | ephemeral  | JSON `{"version":1,"brokerId":…,"epoch":…,"timestampMs":…}` |
 * | /controller-epoch                                           | persistent | the controller epoch, decimal |
 * | /admin/delete-topics/<topic>                                | persistent | empty: a deletion request |
 * | /admin/preferred-leader-election                            | persistent | JSON: a preferred-leader election request |
 * | /consumers/<group>/owners/<topic>/<partition>               | ephemeral  | owning consumer thread id (replicated topic) |
 * | /consumers/<group>/offsets/<topic>/<partition>              | persistent | next offset to read, decimal (replicated topic) |
 * | /consumers/<group>/audit/ranges/<topic>/<partition>         | persistent | as the paper's ranges (replicated topic) |
 *
 * Every name that becomes a path component is checked: a name that is empty, `.`, `..`,
 * contains `/` or a control character throws {@link InvalidNameError}.
 */
import { InvalidNameError } from './errors.js';

/** A partition of a topic on one broker: the pair the paper's consumers balance over. */
export interface BrokerPartition {
  /** Id of the broker that holds the partition (non-negative integer). */
  readonly brokerId: number;
  /** Partition number on that broker, 0-based. */
  readonly partition: number;
}

// Kafka 0.7's legal topic characters; group and consumer ids only exclude what breaks a path.
const TOPIC_NAME = /^[a-zA-Z0-9._-]+$/;
const MAX_NAME_LENGTH = 255;
// eslint-disable-next-line no-control-regex
const FORBIDDEN_IN_NAME = /[/\u0000-\u001f\u007f]/;

function checkName(kind: string, name: string): string {
  if (typeof name !== 'string' || name.length === 0 || name === '.' || name === '..') {
    throw new InvalidNameError(kind, String(name), 'must be a non-empty name other than "." and ".."');
  }
  if (name.length > MAX_NAME_LENGTH) {
    throw new InvalidNameError(kind, name, `is longer than ${MAX_NAME_LENGTH} characters`);
  }
  if (FORBIDDEN_IN_NAME.test(name)) {
    throw new InvalidNameError(kind, name, 'must not contain "/" or control characters');
  }
  return name;
}

/** Checks a topic name: 1-255 characters of `[a-zA-Z0-9._-]`, not `.` or `..`. Throws {@link InvalidNameError}. */
export function checkTopic(topic: string): string {
  checkName('topic', topic);
  if (!TOPIC_NAME.test(topic)) throw new InvalidNameError('topic', topic, 'may only contain [a-zA-Z0-9._-]');
  return topic;
}

/**
 * The children of a node listing topics (`/brokers/topics`, `/admin/delete-topics`) that are
 * topic names; `skipped` is called with each child that is not (for a warning).
 */
export function topicNames(children: readonly string[], skipped: (child: string) => void): string[] {
  return children.filter((child) => {
    const ok = TOPIC_NAME.test(child) && child !== '.' && child !== '..' && child.length <= MAX_NAME_LENGTH;
    if (!ok) skipped(child);
    return ok;
  });
}

/** Checks a consumer group name (any characters but `/` and control characters). Throws {@link InvalidNameError}. */
export function checkGroup(group: string): string {
  return checkName('group', group);
}

/** Checks a consumer id (any characters but `/` and control characters). Throws {@link InvalidNameError}. */
export function checkConsumerId(consumerId: string): string {
  return checkName('consumer id', consumerId);
}

/** Checks a broker id: a non-negative safe integer. Throws {@link InvalidNameError}. */
export function checkBrokerId(brokerId: number): number {
  if (!Number.isSafeInteger(brokerId) || brokerId < 0) {
    throw new InvalidNameError('broker id', String(brokerId), 'must be a non-negative integer');
  }
  return brokerId;
}

/** Checks a partition number: a non-negative int32. Throws {@link InvalidNameError}. */
export function checkPartition(partition: number): number {
  if (!Number.isInteger(partition) || partition < 0 || partition > 0x7fffffff) {
    throw new InvalidNameError('partition', String(partition), 'must be a non-negative int32');
  }
  return partition;
}

/**
 * A partition of a replicated topic as a consumer group names it (docs/replication.md §14): its
 * number alone, `<partition>` in the owner and offset paths, where a paper partition is
 * `<brokerId>-<partition>`.
 */
export interface ReplicatedPartition {
  readonly replicated: true;
  /** The partition number, `0..N-1`. */
  readonly partition: number;
}

/** A partition a consumer group owns and commits: a paper one (a {@link BrokerPartition}) or a replicated one. */
export type GroupPartition = BrokerPartition | ReplicatedPartition;

/** Whether `p` is a {@link ReplicatedPartition}. */
export function isReplicatedPartition(p: GroupPartition): p is ReplicatedPartition {
  return (p as Partial<ReplicatedPartition>).replicated === true;
}

/** The znode name of a partition, `<brokerId>-<partition>` (Kafka 0.7). */
export function partitionName(bp: BrokerPartition): string {
  return `${checkBrokerId(bp.brokerId)}-${checkPartition(bp.partition)}`;
}

/**
 * The name a consumer group (and the loader, the audit) gives a partition (docs/replication.md
 * §14): `<partition>` for a replicated topic's, `<brokerId>-<partition>` for a paper one's.
 */
export function groupPartitionName(p: GroupPartition): string {
  return isReplicatedPartition(p) ? String(checkPartition(p.partition)) : partitionName(p);
}

/** Parses `<brokerId>-<partition>`; undefined when the name is not of that form. */
export function parsePartitionName(name: string): BrokerPartition | undefined {
  const m = /^(\d{1,15})-(\d{1,10})$/.exec(name);
  if (!m) return undefined;
  const brokerId = Number(m[1]);
  const partition = Number(m[2]);
  if (partition > 0x7fffffff) return undefined;
  return { brokerId, partition };
}

/** Parses a partition number znode name (`0`, `17`); undefined unless it is a decimal int32 without leading zeros. */
export function parsePartitionNumber(name: string): number | undefined {
  if (!/^(0|[1-9]\d{0,9})$/.test(name)) return undefined;
  const partition = Number(name);
  return partition > 0x7fffffff ? undefined : partition;
}

/** Parses a broker id znode name; undefined unless it is a non-negative decimal integer. */
export function parseBrokerId(name: string): number | undefined {
  if (!/^\d{1,15}$/.test(name)) return undefined;
  return Number(name);
}

/** `/brokers`: parent of the broker registries. */
export function brokersPath(): string {
  return '/brokers';
}

/** `/brokers/ids`: one ephemeral child per live broker. */
export function brokerIdsPath(): string {
  return `${brokersPath()}/ids`;
}

/** `/brokers/ids/<brokerId>`: ephemeral, the broker's address. */
export function brokerIdPath(brokerId: number): string {
  return `${brokerIdsPath()}/${checkBrokerId(brokerId)}`;
}

/** `/brokers/topics`: one child per topic any broker ever registered. */
export function brokerTopicsPath(): string {
  return `${brokersPath()}/topics`;
}

/** `/brokers/topics/<topic>`: one ephemeral child per live broker holding the topic. */
export function brokerTopicPath(topic: string): string {
  return `${brokerTopicsPath()}/${checkTopic(topic)}`;
}

/** `/brokers/kafka`: one ephemeral child per live broker with a Kafka listener (docs/kafka-protocol.md). */
export function kafkaListenersPath(): string {
  return '/brokers/kafka';
}

/** `/brokers/kafka/<brokerId>`: ephemeral, `<host>:<port>` of that broker's Kafka listener. */
export function kafkaListenerPath(brokerId: number): string {
  return `${kafkaListenersPath()}/${checkBrokerId(brokerId)}`;
}

/** `/brokers/topics/<topic>/<brokerId>`: ephemeral, the topic's partition count on that broker. */
export function brokerTopicBrokerPath(topic: string, brokerId: number): string {
  return `${brokerTopicPath(topic)}/${checkBrokerId(brokerId)}`;
}

/** `/consumers`: one child per consumer group. */
export function consumersPath(): string {
  return '/consumers';
}

/** `/consumers/<group>`: the group's registries. */
export function consumerGroupPath(group: string): string {
  return `${consumersPath()}/${checkGroup(group)}`;
}

/** `/consumers/<group>/ids`: one ephemeral child per live consumer of the group. */
export function consumerIdsPath(group: string): string {
  return `${consumerGroupPath(group)}/ids`;
}

/** `/consumers/<group>/ids/<consumerId>`: ephemeral, the consumer's subscription. */
export function consumerIdPath(group: string, consumerId: string): string {
  return `${consumerIdsPath(group)}/${checkConsumerId(consumerId)}`;
}

/** `/consumers/<group>/owners`: one child per topic the group consumes. */
export function ownersGroupPath(group: string): string {
  return `${consumerGroupPath(group)}/owners`;
}

/** `/consumers/<group>/owners/<topic>`: one ephemeral child per owned partition. */
export function ownersPath(group: string, topic: string): string {
  return `${ownersGroupPath(group)}/${checkTopic(topic)}`;
}

/** `/consumers/<group>/owners/<topic>/<brokerId>-<partition>`: ephemeral, the owning consumer thread id. */
export function ownerPath(group: string, topic: string, brokerId: number, partition: number): string {
  return `${ownersPath(group, topic)}/${partitionName({ brokerId, partition })}`;
}

/** `/consumers/<group>/offsets`: one child per topic the group committed offsets for. */
export function offsetsGroupPath(group: string): string {
  return `${consumerGroupPath(group)}/offsets`;
}

/** `/consumers/<group>/offsets/<topic>`: one persistent child per partition with a committed offset. */
export function offsetsPath(group: string, topic: string): string {
  return `${offsetsGroupPath(group)}/${checkTopic(topic)}`;
}

/** `/consumers/<group>/offsets/<topic>/<brokerId>-<partition>`: persistent, the committed offset. */
export function offsetPath(group: string, topic: string, brokerId: number, partition: number): string {
  return `${offsetsPath(group, topic)}/${partitionName({ brokerId, partition })}`;
}

/** `/consumers/<group>/audit`: what the audit consumer of `group` keeps (docs/audit.md). */
export function auditGroupPath(group: string): string {
  return `${consumerGroupPath(group)}/audit`;
}

/** `/consumers/<group>/audit/window-ms`: persistent, the window the group counts in, ms, decimal. */
export function auditWindowPath(group: string): string {
  return `${auditGroupPath(group)}/window-ms`;
}

/** `/consumers/<group>/audit/ranges/<topic>/<brokerId>-<partition>`: persistent, the offset range being counted, JSON. */
export function auditRangePath(group: string, topic: string, brokerId: number, partition: number): string {
  return `${auditGroupPath(group)}/ranges/${checkTopic(topic)}/${partitionName({ brokerId, partition })}`;
}

// ---------------------------------------------------------------- replication (docs/replication.md §3)

/** The name of the child of a replicated topic's node that holds its partitions; never a broker id. */
export const topicPartitionsNodeName = 'partitions';

/** `/brokers/topics/<topic>/partitions`: persistent, one child per partition of a replicated topic. */
export function topicPartitionsPath(topic: string): string {
  return `${brokerTopicPath(topic)}/${topicPartitionsNodeName}`;
}

/** `/brokers/topics/<topic>/partitions/<partition>`: persistent, empty; the parent of the partition state. */
export function topicPartitionPath(topic: string, partition: number): string {
  return `${topicPartitionsPath(topic)}/${checkPartition(partition)}`;
}

/** `/brokers/topics/<topic>/partitions/<partition>/state`: persistent, the partition state (JSON, §3.1). */
export function partitionStatePath(topic: string, partition: number): string {
  return `${topicPartitionPath(topic, partition)}/state`;
}

/** `/controller`: ephemeral, the controller's broker id and epoch (JSON, §5.1). */
export function controllerPath(): string {
  return '/controller';
}

/** `/controller-epoch`: persistent, the controller epoch, decimal (§5.1). */
export function controllerEpochPath(): string {
  return '/controller-epoch';
}

/** `/admin`: parent of the admin request nodes. */
export function adminPath(): string {
  return '/admin';
}

/** `/admin/delete-topics`: one persistent child per topic whose deletion was asked for. */
export function deleteTopicsPath(): string {
  return `${adminPath()}/delete-topics`;
}

/** `/admin/delete-topics/<topic>`: persistent, empty: a request to delete the replicated topic. */
export function deleteTopicPath(topic: string): string {
  return `${deleteTopicsPath()}/${checkTopic(topic)}`;
}

/** `/admin/preferred-leader-election`: persistent, a preferred-leader election request (JSON, §15.1). */
export function preferredLeaderElectionPath(): string {
  return `${adminPath()}/preferred-leader-election`;
}

/** `/consumers/<group>/owners/<topic>/<partition>`: ephemeral, the owner of a replicated topic's partition (§14). */
export function replicatedOwnerPath(group: string, topic: string, partition: number): string {
  return `${ownersPath(group, topic)}/${checkPartition(partition)}`;
}

/** `/consumers/<group>/offsets/<topic>/<partition>`: persistent, the committed offset of a replicated topic's partition (§14). */
export function replicatedOffsetPath(group: string, topic: string, partition: number): string {
  return `${offsetsPath(group, topic)}/${checkPartition(partition)}`;
}

/** `/consumers/<group>/audit/ranges/<topic>/<partition>`: persistent, the audit range of a replicated topic's partition (§14). */
export function replicatedAuditRangePath(group: string, topic: string, partition: number): string {
  return `${auditGroupPath(group)}/ranges/${checkTopic(topic)}/${checkPartition(partition)}`;
}
