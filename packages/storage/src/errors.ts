/**
 * Errors thrown by the log layer. Each carries `code`, the wire error code (SPEC §3) a broker
 * answers with, so a request handler can map any of them without knowing the class.
 */
import { ErrorCode, maxTopicNameBytes } from '@klog/protocol';

/**
 * A read of the log asked for an offset outside `[earliest, end]` of a partition (docs/design.md
 * §3 FETCH). `end` is the visible (flushed) end; a read at exactly `end` is not an error, it
 * returns no bytes. The broker answers it with OffsetOutOfRange, which a client reports as its
 * own OffsetOutOfRangeError (@klog/client): two errors, two names.
 */
export class LogOffsetOutOfRangeError extends Error {
  override readonly name = 'LogOffsetOutOfRangeError';
  /** Wire error code 1. */
  readonly code = ErrorCode.OffsetOutOfRange;
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
    super(`offset ${offset} of ${topic}-${partition} is outside [${earliest}, ${end}]`);
  }
}

/** A partition number that is not an integer in `[0, partitionCount)` of its topic (SPEC §3). */
export class WrongPartitionError extends Error {
  override readonly name = 'WrongPartitionError';
  /** Wire error code 3. */
  readonly code = ErrorCode.WrongPartition;
  constructor(
    readonly topic: string,
    readonly partition: number,
    /** Partitions the topic has on this broker. */
    readonly partitionCount: number,
  ) {
    super(`partition ${partition} of topic ${topic} does not exist: the topic has ${partitionCount} partition(s)`);
  }
}

/**
 * A topic name that cannot name a log directory: empty, longer than {@link maxTopicNameLength},
 * `.` or `..`, or with a character outside `[A-Za-z0-9._-]`.
 */
export class InvalidTopicError extends Error {
  override readonly name = 'InvalidTopicError';
  /** Wire error code 9 (klog). */
  readonly code = ErrorCode.InvalidTopic;
  constructor(readonly topic: string) {
    super(`invalid topic name ${JSON.stringify(topic)}: expected 1-${maxTopicNameLength} characters of [A-Za-z0-9._-], not "." or ".."`);
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
export class LogClosedError extends Error {
  override readonly name = 'LogClosedError';
  /** Wire error code −1 (unknown server error). */
  readonly code = ErrorCode.Unknown;
  constructor(what: string) {
    super(`${what} is closed`);
  }
}
