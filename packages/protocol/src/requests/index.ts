/**
 * Decoding of any request frame into a typed request (docs/design.md §3); one module per request type
 * beside this file.
 */
import { type Decoder, TopicNameCache } from '../codec.js';
import { ErrorCode, ProtocolError } from '../errors.js';
import { openFrame, RequestType } from '../frame.js';
import { decodeFetchRequest, decodeMultiFetchRequest, type FetchRequest } from './fetch.js';
import { decodeMetadataRequest } from './metadata.js';
import { decodeOffsetsRequest, type OffsetsRequest } from './offsets.js';
import { decodeMultiProduceRequest, decodeProduceRequest, type PartitionMessages } from './produce.js';
import { decodeProduceAckRequest, type ProduceAckRequest } from './produce-ack.js';
import { decodeControlledShutdownRequest, type ControlledShutdownRequest } from './controlled-shutdown.js';
import { decodeLeaderAndIsrRequest, type LeaderAndIsrRequest } from './leader-and-isr.js';
import { decodeOffsetForLeaderEpochRequest, type OffsetForLeaderEpochRequest } from './offset-for-leader-epoch.js';
import { decodeReplicaFetchRequest, type ReplicaFetchRequest } from './replica-fetch.js';
import { decodeStopReplicaRequest, type StopReplicaRequest } from './stop-replica.js';
import { decodeTopicMetadataRequest } from './topic-metadata.js';

export * from './fetch.js';
export * from './metadata.js';
export * from './offsets.js';
export * from './produce.js';
export * from './produce-ack.js';
export * from './controlled-shutdown.js';
export * from './leader-and-isr.js';
export * from './offset-for-leader-epoch.js';
export * from './replica-fetch.js';
export * from './replica-fields.js';
export * from './stop-replica.js';
export * from './topic-metadata.js';

/** Any decoded request, tagged by its type. */
export type Request =
  | { readonly type: typeof RequestType.Produce; readonly produce: PartitionMessages }
  | { readonly type: typeof RequestType.MultiProduce; readonly produces: PartitionMessages[] }
  | { readonly type: typeof RequestType.Fetch; readonly fetch: FetchRequest }
  | { readonly type: typeof RequestType.MultiFetch; readonly fetches: FetchRequest[] }
  | { readonly type: typeof RequestType.Offsets; readonly offsets: OffsetsRequest }
  | { readonly type: typeof RequestType.ProduceAck; readonly produceAck: ProduceAckRequest }
  | { readonly type: typeof RequestType.Metadata; readonly topics: string[] }
  | { readonly type: typeof RequestType.LeaderAndIsr; readonly leaderAndIsr: LeaderAndIsrRequest }
  | { readonly type: typeof RequestType.StopReplica; readonly stopReplica: StopReplicaRequest }
  | { readonly type: typeof RequestType.ReplicaFetch; readonly replicaFetch: ReplicaFetchRequest }
  | { readonly type: typeof RequestType.OffsetForLeaderEpoch; readonly offsetForLeaderEpoch: OffsetForLeaderEpochRequest }
  | { readonly type: typeof RequestType.ControlledShutdown; readonly controlledShutdown: ControlledShutdownRequest }
  | { readonly type: typeof RequestType.TopicMetadata; readonly topics: string[] };

/**
 * Decodes one request frame (the bytes after the size prefix: `type int16 | body`).
 * @throws ProtocolError: UnknownRequestType for a type klog does not serve, InvalidRequest,
 *   InvalidTopic or WrongPartition for a malformed body. Never anything else.
 */
export function decodeRequest(frame: Buffer): Request {
  const { head: type, body } = openFrame(frame);
  return decodeBody(type, body);
}

/**
 * {@link decodeRequest} for one stream of requests (a broker's connection): it keeps the last
 * valid topic name it read ({@link TopicNameCache}), so a name repeated request after request is
 * compared, not decoded and checked again. One per connection; the cache is its only state.
 */
export class RequestDecoder {
  private readonly topics = new TopicNameCache();

  /**
   * Decodes one request frame (the bytes after the size prefix: `type int16 | body`).
   * @throws ProtocolError as {@link decodeRequest}, never anything else
   */
  decode(frame: Buffer): Request {
    const { head: type, body } = openFrame(frame, this.topics);
    return decodeBody(type, body);
  }
}

function decodeBody(type: number, d: Decoder): Request {
  switch (type) {
    case RequestType.Produce:
      return { type, produce: decodeProduceRequest(d) };
    case RequestType.MultiProduce:
      return { type, produces: decodeMultiProduceRequest(d) };
    case RequestType.Fetch:
      return { type, fetch: decodeFetchRequest(d) };
    case RequestType.MultiFetch:
      return { type, fetches: decodeMultiFetchRequest(d) };
    case RequestType.Offsets:
      return { type, offsets: decodeOffsetsRequest(d) };
    case RequestType.ProduceAck:
      return { type, produceAck: decodeProduceAckRequest(d) };
    case RequestType.Metadata:
      return { type, topics: decodeMetadataRequest(d) };
    case RequestType.LeaderAndIsr:
      return { type, leaderAndIsr: decodeLeaderAndIsrRequest(d) };
    case RequestType.StopReplica:
      return { type, stopReplica: decodeStopReplicaRequest(d) };
    case RequestType.ReplicaFetch:
      return { type, replicaFetch: decodeReplicaFetchRequest(d) };
    case RequestType.OffsetForLeaderEpoch:
      return { type, offsetForLeaderEpoch: decodeOffsetForLeaderEpochRequest(d) };
    case RequestType.ControlledShutdown:
      return { type, controlledShutdown: decodeControlledShutdownRequest(d) };
    case RequestType.TopicMetadata:
      return { type, topics: decodeTopicMetadataRequest(d) };
    default:
      throw new ProtocolError(ErrorCode.UnknownRequestType, `unknown request type ${type}`);
  }
}
