/**
 * Error codes carried in every response header (docs/design.md §3) and the typed error thrown by every
 * decoder in this package.
 *
 * Codes 0 to 4 and −1 are Kafka 0.7's; 5 and up are klog's additions, 20 to 39 replication's
 * (docs/format.md lists them; docs/replication.md §7).
 */
export const ErrorCode = {
  /** No error. */
  None: 0,
  /** An unexpected server error. */
  Unknown: -1,
  /** The requested offset is outside `[earliest, end]` of the partition. */
  OffsetOutOfRange: 1,
  /** A message failed its length, magic or CRC check. */
  InvalidMessage: 2,
  /** The partition does not exist on this broker. */
  WrongPartition: 3,
  /** The fetch size is negative or above the broker's limit. */
  InvalidFetchSize: 4,
  /** (klog) A message is larger than the broker's `max.message.bytes`. */
  MessageSizeTooLarge: 5,
  /** (klog) The request body could not be decoded. */
  InvalidRequest: 6,
  /** (klog) The request type is not one this broker serves. */
  UnknownRequestType: 7,
  /** (klog) A fetch offset is not the start of a message. */
  InvalidMessageOffset: 8,
  /** (klog) A topic name is empty, too long, or has characters outside `[A-Za-z0-9._-]`. */
  InvalidTopic: 9,
  /** (klog) The topic does not exist on this broker and the broker does not create topics on use (`auto.create.topics.enable=false`). */
  UnknownTopic: 10,
  /** (klog) Creating the topic would take the broker past its `max.partitions`. */
  TooManyPartitions: 11,
  /** (klog) The broker's log dir has no space left (ENOSPC, or a quota): nothing was appended. */
  DiskFull: 12,
  /** (klog, replication) This broker does not lead the partition: a follower, no replica, or a stepped-down leader (docs/replication.md §7). */
  NotLeaderForPartition: 20,
  /** (klog, replication) The partition is offline: it has no leader. */
  LeaderNotAvailable: 21,
  /** (klog, replication) The ISR is smaller than `min.insync.replicas`: nothing was appended. */
  NotEnoughReplicas: 22,
  /** (klog, replication) Appended, but the ISR fell below `min.insync.replicas` before the high watermark reached the set. */
  NotEnoughReplicasAfterAppend: 23,
  /** (klog, replication) The request's leader epoch is older than this broker's. */
  FencedLeaderEpoch: 24,
  /** (klog, replication) The request's leader epoch is newer than this broker's. */
  UnknownLeaderEpoch: 25,
  /** (klog, replication) A controller request from an older controller epoch. */
  StaleControllerEpoch: 26,
  /** (klog, replication) This broker is not the controller. */
  NotController: 27,
  /** (klog, replication) The broker does not have a replica log it should have (lost disk or directory). */
  ReplicaLost: 28,
  /** (klog, replication) The fetching broker is not in the partition's replica list. */
  NotReplica: 29,
  /** (klog, replication) The topic is not a replicated topic (a paper topic, or none). */
  NotReplicatedTopic: 30,
  /** (klog, replication) The request comes from a previous registration of the broker (an older broker epoch). */
  StaleBrokerEpoch: 31,
} as const;

/** One of the values of {@link ErrorCode}. */
export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

const names = new Map<number, string>(Object.entries(ErrorCode).map(([k, v]) => [v, k]));

/** The name of an error code (`"OffsetOutOfRange"`), or `"Unknown(<code>)"` for a code klog does not define. */
export function errorCodeName(code: number): string {
  return names.get(code) ?? `Unknown(${code})`;
}

/**
 * Thrown by every decoder in @klog/protocol when bytes do not form what was expected:
 * truncated input, a negative or oversized length, a bad magic byte, a bad CRC, an unknown
 * request type. `code` is the wire error code a broker answers with.
 */
export class ProtocolError extends Error {
  override readonly name = 'ProtocolError';
  constructor(
    /** The wire error code that describes the problem (usually InvalidRequest or InvalidMessage). */
    readonly code: ErrorCodeValue,
    message: string,
  ) {
    super(message);
  }
}
