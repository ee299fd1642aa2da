/**
 * (klog, replication) REPLICA_FETCH (type 18), follower → leader: like MULTIFETCH, but it names
 * the follower, the leader epoch it follows and how far it has flushed, and it may read past the
 * high watermark up to the log end (docs/replication.md §6.3).
 *
 * ```
 * ReplicaFetchRequest  => replicaId int32 | maxWaitMs int32 | count int16 | count x FetchPartition
 * FetchPartition       => topic string | partition int32 | leaderEpoch int32
 *                         | fetchOffset int64 | flushedOffset int64 | maxBytes int32
 * ReplicaFetchResponse => errorCode int16 | count int16 | count x FetchedPartition
 * FetchedPartition     => topic string | partition int32 | errorCode int16
 *                         | highWatermark int64 | logEndOffset int64 | logStartOffset int64
 *                         | epoch int32 | segmentStart int64 | messageSetSize int32 | messageSet
 *   request: replicaId ≥ 0, maxWaitMs ≥ 0, count ≥ 1, leaderEpoch ≥ 0, offsets ≥ 0,
 *            maxBytes ≥ 0 (negative: InvalidFetchSize)
 *   response: count ≥ 0; offsets and epoch ≥ −1 (−1: unknown, on an error); the message set is
 *            at most maxBytes, within one segment and one epoch, possibly ending in a partial message;
 *            error-only response (errorCode ≠ 0, no body) for a request that did not decode
 * ```
 *
 * The leader sends each message set straight from its segment file: the frame head
 * ({@link encodeReplicaFetchResponseHeader}) and each partition's header
 * ({@link encodeFetchedPartitionHeader}) are built here, the set bytes follow each header
 * separately, as FETCH's response does.
 */
import { type Decoder, validateTopic } from '../codec.js';
import { ErrorCode, ProtocolError, type ErrorCodeValue } from '../errors.js';
import { encodeFrame, frameSizeBytes, RequestType } from '../frame.js';
import { readCount, readPartition } from './produce.js';
import { readInt32AtLeast, readInt64AtLeast } from './replica-fields.js';

/** One partition of a follower's fetch. */
export interface ReplicaFetchPartition {
  readonly topic: string;
  readonly partition: number;
  /** The leader epoch the follower follows, ≥ 0; must equal the leader's. */
  readonly leaderEpoch: number;
  /** The follower's log end in bytes: where the bytes wanted start (a message boundary). */
  readonly fetchOffset: number;
  /** The follower's flushed end in bytes (a value above `fetchOffset` counts as `fetchOffset`). */
  readonly flushedOffset: number;
  /** Most bytes of message set for this partition, ≥ 0 (`replica.fetch.max.bytes`). */
  readonly maxBytes: number;
}

/** A REPLICA_FETCH request. */
export interface ReplicaFetchRequest {
  /** The follower's broker id, ≥ 0. */
  readonly replicaId: number;
  /** Long poll: most ms the leader holds the request while no partition has bytes or an error, ≥ 0. */
  readonly maxWaitMs: number;
  /** At least one partition. */
  readonly partitions: readonly ReplicaFetchPartition[];
}

/** What the leader answers for one partition, without its message set. */
export interface FetchedPartitionHeader {
  readonly topic: string;
  readonly partition: number;
  readonly errorCode: ErrorCodeValue;
  /** The leader's high watermark in bytes, after it took this fetch's positions into account (−1: unknown). */
  readonly highWatermark: number;
  /** The leader's log end in bytes (−1: unknown). */
  readonly logEndOffset: number;
  /** The leader's earliest offset in bytes (−1: unknown). */
  readonly logStartOffset: number;
  /** The leader epoch in which the returned bytes were written (−1: none). */
  readonly epoch: number;
  /** Start offset of the leader's segment that holds the returned bytes (−1: none). */
  readonly segmentStart: number;
}

/** What the leader answers for one partition. `messageSet` is a view on the response buffer when decoded. */
export interface FetchedPartition extends FetchedPartitionHeader {
  /** The leader's log from `fetchOffset`; empty on an error. */
  readonly messageSet: Buffer;
}

/** A REPLICA_FETCH response. */
export interface ReplicaFetchResponse {
  /** 0, or the code of an error-only response (then `partitions` is empty). */
  readonly errorCode: ErrorCodeValue;
  readonly partitions: readonly FetchedPartition[];
}

/** Encodes a framed REPLICA_FETCH request. @throws ProtocolError (InvalidTopic) for a bad topic name */
export function encodeReplicaFetchRequest(r: ReplicaFetchRequest): Buffer {
  return encodeFrame(
    RequestType.ReplicaFetch,
    (e) => {
      e.writeInt32(r.replicaId).writeInt32(r.maxWaitMs).writeInt16(r.partitions.length);
      for (const p of r.partitions) {
        validateTopic(p.topic);
        e.writeString(p.topic).writeInt32(p.partition).writeInt32(p.leaderEpoch);
        e.writeInt64(p.fetchOffset).writeInt64(p.flushedOffset).writeInt32(p.maxBytes);
      }
    },
    128,
  );
}

/** Decodes a REPLICA_FETCH body (after the type). @throws ProtocolError */
export function decodeReplicaFetchRequest(d: Decoder): ReplicaFetchRequest {
  const replicaId = readInt32AtLeast(d, 'replicaId', 0);
  const maxWaitMs = readInt32AtLeast(d, 'maxWaitMs', 0);
  const count = readCount(d, 'replica-fetch', 1);
  const partitions: ReplicaFetchPartition[] = [];
  for (let i = 0; i < count; i++) {
    const topic = d.readTopic();
    const partition = readPartition(d);
    const leaderEpoch = readInt32AtLeast(d, 'leaderEpoch', 0);
    const fetchOffset = readInt64AtLeast(d, 'fetchOffset', 0);
    const flushedOffset = readInt64AtLeast(d, 'flushedOffset', 0);
    const maxBytes = d.readInt32();
    if (maxBytes < 0) throw new ProtocolError(ErrorCode.InvalidFetchSize, `negative fetch size ${maxBytes}`);
    partitions.push({ topic, partition, leaderEpoch, fetchOffset, flushedOffset, maxBytes });
  }
  d.assertDone('replica-fetch request');
  return { replicaId, maxWaitMs, partitions };
}

/** Bytes of a {@link FetchedPartitionHeader} for `topic` on the wire, `messageSetSize` included. */
export function fetchedPartitionHeaderBytes(topic: string): number {
  return 2 + Buffer.byteLength(topic, 'utf8') + 4 + 2 + 8 + 8 + 8 + 4 + 8 + 4;
}

/**
 * The bytes of one partition of a REPLICA_FETCH response up to and including `messageSetSize`;
 * the `messageSetBytes` bytes of the set follow it (sent from the segment file).
 * @throws ProtocolError (InvalidTopic) for a bad topic name; RangeError for a negative `messageSetBytes`
 */
export function encodeFetchedPartitionHeader(p: FetchedPartitionHeader, messageSetBytes: number): Buffer {
  validateTopic(p.topic);
  if (messageSetBytes < 0) throw new RangeError(`negative message set size ${messageSetBytes}`);
  const b = Buffer.allocUnsafe(fetchedPartitionHeaderBytes(p.topic));
  let pos = b.writeInt16BE(p.topic.length, 0);
  pos += b.write(p.topic, pos, 'latin1');
  pos = b.writeInt32BE(p.partition, pos);
  pos = b.writeInt16BE(p.errorCode, pos);
  pos = b.writeBigInt64BE(BigInt(p.highWatermark), pos);
  pos = b.writeBigInt64BE(BigInt(p.logEndOffset), pos);
  pos = b.writeBigInt64BE(BigInt(p.logStartOffset), pos);
  pos = b.writeInt32BE(p.epoch, pos);
  pos = b.writeBigInt64BE(BigInt(p.segmentStart), pos);
  b.writeInt32BE(messageSetBytes, pos);
  return b;
}

/**
 * The 8-byte frame head of a successful REPLICA_FETCH response (`size | errorCode 0 | count`)
 * whose `count` partitions (each a header of {@link encodeFetchedPartitionHeader} and its
 * message set) total `partsBytes` and follow separately.
 * @throws RangeError for a count outside 0..32767
 */
export function encodeReplicaFetchResponseHeader(count: number, partsBytes: number): Buffer {
  if (count < 0 || count > 0x7fff) throw new RangeError(`replica-fetch response count ${count} is outside [0, 32767]`);
  const b = Buffer.allocUnsafe(frameSizeBytes + 4);
  b.writeInt32BE(2 + 2 + partsBytes, 0);
  b.writeInt16BE(ErrorCode.None, 4);
  b.writeInt16BE(count, 6);
  return b;
}

/**
 * Encodes a whole framed REPLICA_FETCH response in memory (the message sets copied in); an
 * error code other than 0 with no partitions gives the error-only response.
 * @throws ProtocolError (InvalidTopic) for a bad topic name; RangeError for more than 32767 partitions
 */
export function encodeReplicaFetchResponse(r: ReplicaFetchResponse): Buffer {
  if (r.errorCode !== ErrorCode.None && r.partitions.length === 0) return encodeFrame(r.errorCode, () => {});
  const parts: Buffer[] = [];
  for (const p of r.partitions) parts.push(encodeFetchedPartitionHeader(p, p.messageSet.length), p.messageSet);
  const body = Buffer.concat(parts);
  const head = encodeReplicaFetchResponseHeader(r.partitions.length, body.length);
  head.writeInt16BE(r.errorCode, 4);
  return Buffer.concat([head, body]);
}

/** Decodes a REPLICA_FETCH response body given its top-level error code; message sets are views. @throws ProtocolError */
export function decodeReplicaFetchResponse(errorCode: number, d: Decoder): ReplicaFetchResponse {
  const code = errorCode as ErrorCodeValue;
  if (code !== ErrorCode.None && d.remaining === 0) return { errorCode: code, partitions: [] };
  const count = readCount(d, 'replica-fetch response');
  const partitions: FetchedPartition[] = [];
  for (let i = 0; i < count; i++) {
    const topic = d.readTopic();
    const partition = readPartition(d);
    const partErrorCode = d.readInt16() as ErrorCodeValue;
    const highWatermark = readInt64AtLeast(d, 'highWatermark', -1);
    const logEndOffset = readInt64AtLeast(d, 'logEndOffset', -1);
    const logStartOffset = readInt64AtLeast(d, 'logStartOffset', -1);
    const epoch = readInt32AtLeast(d, 'epoch', -1);
    const segmentStart = readInt64AtLeast(d, 'segmentStart', -1);
    const size = d.readInt32();
    const messageSet = d.readBytes(size, 'message set');
    partitions.push({ topic, partition, errorCode: partErrorCode, highWatermark, logEndOffset, logStartOffset, epoch, segmentStart, messageSet });
  }
  d.assertDone('replica-fetch response');
  return { errorCode: code, partitions };
}
