/**
 * The errors @klog/client throws. Every one is a {@link KlogError}; errors a broker answered
 * with (or that the client found in the bytes it received) carry the wire error code of
 * docs/design.md §3 and say which topic, partition and offset they concern.
 */
import { ErrorCode, errorCodeName } from '@klog/protocol';

/** Base class of every error thrown by @klog/client. */
export class KlogError extends Error {
  override readonly name: string = 'KlogError';
  /** Whether the same request may succeed if tried again (the `retriable` flag of @klog/retry). */
  get retriable(): boolean {
    return false;
  }
}

/**
 * The connection to a broker failed: it could not be opened, it closed while requests were
 * waiting, or a request got no answer within its timeout (the connection is then closed,
 * since the responses that follow could no longer be matched to their requests).
 */
export class KlogConnectionError extends KlogError {
  override readonly name: string = 'KlogConnectionError';
  /** A lost or timed-out connection is worth another attempt. */
  override get retriable(): boolean {
    return true;
  }
  constructor(
    /** `host:port` of the broker. */
    readonly broker: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${broker}: ${message}`, options);
  }
}

/** Where a {@link KlogBrokerError} happened; every field is optional because some errors concern a whole request. */
export interface ErrorLocation {
  readonly topic?: string;
  readonly partition?: number;
  /** Byte offset the request asked for, when it named one. */
  readonly offset?: number;
  /** `host:port` of the broker that answered. */
  readonly broker?: string;
}

/**
 * A broker answered with a non-zero error code (docs/design.md §3, docs/format.md), or the client found
 * a message that failed its length, magic or CRC check (code InvalidMessage) and refused to
 * deliver it.
 */
export class KlogBrokerError extends KlogError {
  override readonly name: string = 'KlogBrokerError';
  /** The wire error code (see ErrorCode of @klog/protocol). */
  readonly code: number;
  readonly topic: string | undefined;
  readonly partition: number | undefined;
  readonly offset: number | undefined;
  readonly broker: string | undefined;

  constructor(code: number, where: ErrorLocation, detail?: string) {
    super(describe(code, where, detail));
    this.code = code;
    this.topic = where.topic;
    this.partition = where.partition;
    this.offset = where.offset;
    this.broker = where.broker;
  }

  /** The name of {@link code}, e.g. `"OffsetOutOfRange"`. */
  get codeName(): string {
    return errorCodeName(this.code);
  }
}

function describe(code: number, where: ErrorLocation, detail?: string): string {
  const parts: string[] = [];
  if (where.topic !== undefined) parts.push(`topic ${where.topic}`);
  if (where.partition !== undefined) parts.push(`partition ${where.partition}`);
  if (where.offset !== undefined) parts.push(`offset ${where.offset}`);
  if (where.broker !== undefined) parts.push(`broker ${where.broker}`);
  const at = parts.length > 0 ? ` (${parts.join(', ')})` : '';
  return `${errorCodeName(code)} [code ${code}]${at}${detail ? `: ${detail}` : ''}`;
}

/**
 * A fetch asked for an offset outside `[earliest, end]` of the partition (docs/design.md §3): it was
 * deleted by retention, or it is past the end. `earliest` and `end` are what the broker
 * reported, so the caller can restart from either.
 */
export class OffsetOutOfRangeError extends KlogBrokerError {
  override readonly name: string = 'OffsetOutOfRangeError';
  constructor(
    where: ErrorLocation & { readonly offset: number },
    /** The partition's earliest offset, when the broker sent it. */
    readonly earliest: number | undefined,
    /** The partition's end offset (the next offset to be written and flushed), when the broker sent it. */
    readonly end: number | undefined,
  ) {
    super(
      ErrorCode.OffsetOutOfRange,
      where,
      earliest !== undefined && end !== undefined ? `the partition holds [${earliest}, ${end}]` : undefined,
    );
  }
}

/**
 * A topic (or partition) that does not exist where it was looked for: a broker (a METADATA
 * listing, docs/format.md §12) or the ZooKeeper registry. Fetches and OFFSETS answer a missing
 * topic as an empty one, so consumers ask first. The message names what is known, as kcat does:
 * `unknown topic "nope" (known: clicks, events)`.
 */
export class UnknownTopicError extends KlogError {
  override readonly name: string = 'UnknownTopicError';
  constructor(
    readonly topic: string,
    /** The topics that do exist there, sorted. */
    readonly known: readonly string[],
    /** When the topic exists but this partition does not: the partition asked for, and how many there are. */
    readonly partition?: { readonly asked: string; readonly count: number },
    /** Where it was looked for, e.g. `on broker host:port`; said after the list. */
    where?: string,
  ) {
    super(
      partition
        ? `unknown partition ${partition.asked} of topic ${JSON.stringify(topic)} (partitions: ${partition.count === 1 ? '0' : `0-${partition.count - 1}`})${where ? ` ${where}` : ''}`
        : `unknown topic ${JSON.stringify(topic)} (known: ${knownList(known)})${where ? ` ${where}` : ''}`,
    );
  }
}

/** Names as `a, b, c`, the first 20 then how many more; `none` for none. */
function knownList(names: readonly string[]): string {
  if (names.length === 0) return 'none';
  return names.length <= 20 ? names.join(', ') : `${names.slice(0, 20).join(', ')} and ${names.length - 20} more`;
}

/**
 * A broker rejected a record whose message is larger than its `max.message.bytes` (code
 * MessageSizeTooLarge, docs/format.md §11): `payloadBytes` is what the broker measured (the
 * message after its magic and CRC, metadata header included), `maxMessageBytes` its limit.
 */
export class RecordTooLargeError extends KlogBrokerError {
  override readonly name: string = 'RecordTooLargeError';
  constructor(
    where: ErrorLocation,
    /** Bytes of the message's payload, metadata header included. */
    readonly payloadBytes: number,
    /** The broker's max.message.bytes. */
    readonly maxMessageBytes: number,
  ) {
    super(ErrorCode.MessageSizeTooLarge, where, `a message of ${payloadBytes} bytes is over the broker's limit of ${maxMessageBytes} bytes (max.message.bytes)`);
  }
}

/**
 * The message at `offset` is `size` bytes (length field included), more than the consumer may
 * fetch in one request (`maxFetchBytes`). Raise the consumer's cap to read it (docs/design.md §3).
 */
export class MessageTooLargeError extends KlogError {
  override readonly name: string = 'MessageTooLargeError';
  constructor(
    readonly topic: string,
    readonly partition: number,
    /** Offset of the message that does not fit. */
    readonly offset: number,
    /** Size of the message in bytes, length field included. */
    readonly size: number,
    /** The consumer's cap on one fetch, in bytes. */
    readonly maxFetchBytes: number,
  ) {
    super(
      `message at offset ${offset} of topic ${topic} partition ${partition} is ${size} bytes, ` +
        `more than the fetch size cap of ${maxFetchBytes} bytes (maxFetchBytes)`,
    );
  }
}

/**
 * The compressed message set at `offset` decompresses to more than the consumer's
 * `maxDecompressedBytes` (the guard against decompression bombs, docs/format.md §2b). Raise the
 * cap to read it, if the data is trusted.
 */
export class DecompressedTooLargeError extends KlogError {
  override readonly name: string = 'DecompressedTooLargeError';
  constructor(
    readonly topic: string,
    readonly partition: number,
    /** Offset of the compressed message (the wrapper). */
    readonly offset: number,
    /** The consumer's cap on the bytes one fetch decompresses. */
    readonly maxDecompressedBytes: number,
  ) {
    super(
      `compressed message at offset ${offset} of topic ${topic} partition ${partition} decompresses to more than ` +
        `${maxDecompressedBytes} bytes (maxDecompressedBytes); not delivered`,
    );
  }
}
