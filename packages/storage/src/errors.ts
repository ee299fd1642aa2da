/**
 * Errors thrown by the log layer. Each carries `code`, the wire error code (docs/design.md §3) a broker
 * answers with, so a request handler can map any of them without knowing the class.
 */
import { ErrorCode, type ErrorCodeValue, maxTopicNameBytes } from '@klog/protocol';

/**
 * An error of the log layer: `code` is the wire error code a broker answers it with, `name` the
 * subclass's name. Every error below extends it.
 */
export class StorageError extends Error {
  override readonly name: string;
  constructor(
    /** The wire error code (docs/format.md). */
    readonly code: ErrorCodeValue,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * A read of the log asked for an offset outside `[earliest, end]` of a partition (docs/design.md
 * §3 FETCH). `end` is the visible (flushed) end; a read at exactly `end` is not an error, it
 * returns no bytes. The broker answers it with OffsetOutOfRange, which a client reports as its
 * own OffsetOutOfRangeError (@klog/client): two errors, two names.
 */
export class LogOffsetOutOfRangeError extends StorageError {
  constructor(
    readonly topic: string,
    readonly partition: number,
    /** The byte offset that was asked for. */
    readonly offset: number,
    /** Start offset of the partition's first segment. */
    readonly earliest: number,
    /** The partition's visible end offset. */
    readonly end: number,
  ) {
    super(ErrorCode.OffsetOutOfRange, `offset ${offset} of ${topic}-${partition} is outside [${earliest}, ${end}]`);
  }
}

/** A partition number that is not an integer in `[0, partitionCount)` of its topic (docs/design.md §3). */
export class WrongPartitionError extends StorageError {
  constructor(
    readonly topic: string,
    readonly partition: number,
    /** Partitions the topic has on this broker. */
    readonly partitionCount: number,
  ) {
    super(ErrorCode.WrongPartition, `partition ${partition} of topic ${topic} does not exist: the topic has ${partitionCount} partition(s)`);
  }
}

/**
 * A topic name that cannot name a log directory: empty, longer than {@link maxTopicNameLength},
 * `.` or `..`, or with a character outside `[A-Za-z0-9._-]`.
 */
export class InvalidTopicError extends StorageError {
  constructor(readonly topic: string) {
    super(ErrorCode.InvalidTopic, `invalid topic name ${JSON.stringify(topic)}: expected 1-${maxTopicNameLength} characters of [A-Za-z0-9._-], not "." or ".."`);
  }
}

/**
 * Longest topic name in characters: the wire limit of @klog/protocol (249), which keeps
 * `<topic>-<partition>` within the usual 255-byte file name limit for partitions below 100 000.
 */
export const maxTopicNameLength = maxTopicNameBytes;

const topicPattern = /^[A-Za-z0-9._-]+$/;

/** True when `topic` may name a topic: see {@link InvalidTopicError}. */
export function isValidTopicName(topic: string): boolean {
  return topic.length > 0 && topic.length <= maxTopicNameLength && topic !== '.' && topic !== '..' && topicPattern.test(topic);
}

/** An operation on a log or log manager after its `close()`. */
export class LogClosedError extends StorageError {
  constructor(what: string) {
    super(ErrorCode.Unknown, `${what} is closed`);
  }
}

/**
 * A topic that does not exist, asked for where the log manager does not create topics on use
 * (`autoCreateTopics: false`, the broker's `auto.create.topics.enable=false`).
 */
export class UnknownTopicError extends StorageError {
  constructor(readonly topic: string) {
    super(ErrorCode.UnknownTopic, `topic ${topic} does not exist and topics are not created on use (auto.create.topics.enable=false)`);
  }
}

/** Creating a topic would take the log manager past its `maxPartitions` (the broker's `max.partitions`). */
export class TooManyPartitionsError extends StorageError {
  constructor(
    readonly topic: string,
    /** Partitions the log manager holds now. */
    readonly partitions: number,
    /** Partitions the topic would add. */
    readonly adding: number,
    /** The limit. */
    readonly maxPartitions: number,
  ) {
    super(ErrorCode.TooManyPartitions, `creating topic ${topic} (${adding} partitions) would pass max.partitions ${maxPartitions}: the broker holds ${partitions}`);
  }
}

/**
 * A write to the log dir failed for lack of space (ENOSPC, or EDQUOT for a quota). Nothing of the
 * write stays in the log: the segment is cut back to its size before it. `cause` is the file
 * system error.
 */
export class DiskFullError extends StorageError {
  constructor(
    /** The file (segment or directory) that could not be written. */
    readonly file: string,
    cause: unknown,
  ) {
    super(ErrorCode.DiskFull, `no space left for ${file}: ${(cause as Error).message}`, { cause });
  }
}

/** `err` as a {@link DiskFullError} when it is ENOSPC or EDQUOT, else `err` itself. */
export function asStorageError(err: unknown, file: string): unknown {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOSPC' || code === 'EDQUOT' ? new DiskFullError(file, err) : err;
}

/**
 * A replica log (docs/replication.md §8.1) cannot be created or opened in its directory: the
 * directory holds a paper partition, a replica of another topic id, or something that is not a
 * replica. Nothing in the directory is changed. A broker answers a LEADER_AND_ISR that meets it
 * with ReplicaLost (docs/replication.md §7).
 */
export class ReplicaDirError extends StorageError {
  constructor(
    /** The partition's directory. */
    readonly dir: string,
    reason: string,
  ) {
    super(ErrorCode.ReplicaLost, `replica directory ${dir}: ${reason}`);
  }
}

/**
 * A paper topic cannot be created under a name this broker holds replica logs of
 * (docs/replication.md §3: one namespace for topic names). Nothing is created. Answered as
 * NotLeaderForPartition (docs/replication.md §7): the client looks the topic up again.
 */
export class ReplicatedTopicError extends StorageError {
  constructor(readonly topic: string) {
    super(ErrorCode.NotLeaderForPartition, `topic ${topic} is a replicated topic on this broker: it is not created as a paper topic`);
  }
}
