/**
 * Framing of every request and response (docs/design.md §3):
 *
 * ```
 * Request  => size int32 | type int16      | body   (size counts type and body)
 * Response => size int32 | errorCode int16 | body   (size counts errorCode and body)
 * ```
 */
import { Decoder, Encoder, type TopicNameCache } from './codec.js';
import { ErrorCode, ProtocolError, type ErrorCodeValue } from './errors.js';

/** Request type numbers: Kafka 0.7's 0-4, klog's 5 and up; 16-21 are replication's (docs/format.md, docs/replication.md §6). */
export const RequestType = {
  Produce: 0,
  Fetch: 1,
  MultiFetch: 2,
  MultiProduce: 3,
  Offsets: 4,
  /** (klog) a produce answered once appended, or once flushed. */
  ProduceAck: 5,
  /** (klog) the partition count of topics on a broker. */
  Metadata: 6,
  /** (klog, replication) controller → broker: who leads each partition, the ISR, the broker's role (docs/replication.md §6.1). */
  LeaderAndIsr: 16,
  /** (klog, replication) controller → broker: stop leading or following partitions, optionally deleting them (docs/replication.md §6.2). */
  StopReplica: 17,
  /** (klog, replication) follower → leader: a follower's fetch (docs/replication.md §6.3). */
  ReplicaFetch: 18,
  /** (klog, replication) follower → leader: where one of the follower's epochs ends on the leader (docs/replication.md §6.4). */
  OffsetForLeaderEpoch: 19,
  /** (klog, replication) broker → controller: move my leaderships away before I stop (docs/replication.md §6.5). */
  ControlledShutdown: 20,
  /** (klog, replication) client → any broker: leaders, replicas and ISRs of replicated topics (docs/replication.md §6.6). */
  TopicMetadata: 21,
} as const;

/** One of the values of {@link RequestType}. */
export type RequestTypeValue = (typeof RequestType)[keyof typeof RequestType];

/** Bytes of the size prefix of every frame. */
export const frameSizeBytes = 4;
/** Default cap on one request frame's size in bytes (the broker's `max.request.bytes`). */
export const defaultMaxRequestBytes = 100 * 1024 * 1024;

/** Builds a frame: size prefix, then an int16 (request type or error code), then what `writeBody` writes. */
export function encodeFrame(head: number, writeBody: (e: Encoder) => void, initialBytes = 64): Buffer {
  const e = new Encoder(initialBytes);
  e.writeInt32(0).writeInt16(head);
  writeBody(e);
  const buf = e.toBuffer();
  buf.writeInt32BE(buf.length - frameSizeBytes, 0);
  return buf;
}

/** A response frame that carries only an error code (and an empty body). */
export function encodeErrorResponse(code: ErrorCodeValue): Buffer {
  return encodeFrame(code, () => {});
}

/**
 * Reads the size prefix at `position`: the size of the frame that follows, or `undefined`
 * when fewer than 4 bytes are there yet.
 * @throws ProtocolError (InvalidRequest) when the size is below 2 or above `maxFrameBytes`;
 *   the stream cannot be re-synchronised after that and the connection should be closed.
 */
export function readFrameSize(buf: Buffer, position: number, maxFrameBytes: number): number | undefined {
  if (buf.length - position < frameSizeBytes) return undefined;
  const size = buf.readInt32BE(position);
  if (size < 2 || size > maxFrameBytes) {
    throw new ProtocolError(ErrorCode.InvalidRequest, `frame size ${size} is outside [2, ${maxFrameBytes}]`);
  }
  return size;
}

/**
 * A decoded frame body: the leading int16 and a decoder over what follows it, reading topic
 * names through `topics` when given (see {@link TopicNameCache}).
 */
export function openFrame(frame: Buffer, topics?: TopicNameCache): { head: number; body: Decoder } {
  const d = new Decoder(frame, 0, frame.length, topics);
  const head = d.readInt16();
  return { head, body: d };
}
