/**
 * Dispatch of one request frame to its handler (docs/design.md §3). Never throws: a frame that does not
 * decode gets an error response, except a fire-and-forget PRODUCE, which has no response and
 * is logged instead.
 */
import { ErrorCode, type ErrorCodeValue, ProtocolError, type Request, type RequestDecoder, RequestType, encodeErrorResponse, errorCodeName } from '@klog/protocol';
import type { BrokerContext, ResponsePart } from './context.js';
import { handleFetch, handleMultiFetch } from './fetch.js';
import { handleControlledShutdown } from './controlled-shutdown.js';
import { handleLeaderAndIsr } from './leader-and-isr.js';
import { handleMetadata } from './metadata.js';
import { handleOffsetForLeaderEpoch } from './offset-for-leader-epoch.js';
import { handleReplicaFetch } from './replica-fetch.js';
import { handleStopReplica } from './stop-replica.js';
import { handleOffsets } from './offsets.js';
import { appendProduceAck, handleProduce, handleProduceAck, type ProduceRun } from './produce.js';
import { handleTopicMetadata } from './topic-metadata.js';

export type { BrokerContext, ResponsePart } from './context.js';
export { ProduceRun } from './produce.js';

const typeNames = new Map<number, string>(Object.entries(RequestType).map(([k, v]) => [v, k]));

/** Decodes a frame with the connection's decoder; one that does not decode is counted and logged, and its error code returned. */
function decodeCounted(ctx: BrokerContext, decoder: RequestDecoder, frame: Buffer, type: number): { request: Request } | { code: ErrorCodeValue } {
  try {
    return { request: decoder.decode(frame) };
  } catch (err) {
    const code = err instanceof ProtocolError ? err.code : ErrorCode.InvalidRequest;
    ctx.metrics.error(errorCodeName(code));
    ctx.logger.warn({ type, bytes: frame.length, code: errorCodeName(code), err: (err as Error).message }, 'malformed request');
    return { code };
  }
}

/**
 * Handles `frame` (`type int16 | body`) when it is a fire-and-forget PRODUCE or MULTIPRODUCE,
 * adding its message sets to `run` (which appends them, see {@link ProduceRun}); such a request
 * has no response. A frame that does not decode is logged and counted. `decoder` is the
 * connection's own (see RequestDecoder).
 * @returns false (having done nothing) for any other request; true when the frame was such a
 *   request and is taken; a promise (never rejecting) when it names a topic being created: wait
 *   for it before the next frame, so appends keep arrival order
 */
export function handleFireAndForget(ctx: BrokerContext, decoder: RequestDecoder, frame: Buffer, run: ProduceRun): boolean | Promise<void> {
  const type = frame.length >= 2 ? frame.readInt16BE(0) : -1;
  if (type !== RequestType.Produce && type !== RequestType.MultiProduce) return false;
  ctx.metrics.request(typeNames.get(type)!);
  const decoded = decodeCounted(ctx, decoder, frame, type);
  if (!('request' in decoded)) return true;
  const { request } = decoded;
  if (request.type === RequestType.Produce) return run.add(request.produce) ?? true;
  if (request.type !== RequestType.MultiProduce) return true;
  const produces = request.produces;
  for (let i = 0; i < produces.length; i++) {
    const waiting = run.add(produces[i]!);
    if (waiting !== undefined) {
      return (async () => {
        await waiting;
        for (let j = i + 1; j < produces.length; j++) await run.add(produces[j]!);
      })();
    }
  }
  return true;
}

/**
 * Handles one frame (`type int16 | body`), decoded with the connection's `decoder`, timing it
 * when it has a response (`klog_request_duration_seconds`).
 * @returns the response as parts to send in order (buffers and pinned file regions, which the
 *   caller must release), or `undefined` when the request has no response
 */
export async function handleRequest(ctx: BrokerContext, decoder: RequestDecoder, frame: Buffer): Promise<ResponsePart[] | undefined> {
  const type = frame.length >= 2 ? frame.readInt16BE(0) : -1;
  const name = typeNames.get(type) ?? 'Unknown';
  ctx.metrics.request(name);
  const started = performance.now();
  const response = await respond(ctx, decoder, frame, type);
  if (response !== undefined) ctx.metrics.requestDone(name, performance.now() - started);
  return response;
}

/**
 * Starts `frame` when it is a PRODUCE_ACK that decodes, so that the connection can go on with
 * its next frames while this one waits for its ack level (docs/design.md §3, pipelined
 * PRODUCE_ACK): resolves once the request's sets are appended, with the promise of its
 * response (timed as {@link handleRequest} times one). Neither promise rejects.
 * @returns false (having done nothing) for any other frame, and for one that does not decode
 *   (which {@link handleRequest} then answers)
 */
export function startProduceAck(ctx: BrokerContext, decoder: RequestDecoder, frame: Buffer): false | Promise<{ response: Promise<ResponsePart[]> }> {
  const type = frame.length >= 2 ? frame.readInt16BE(0) : -1;
  if (type !== RequestType.ProduceAck) return false;
  let request: Request;
  try {
    request = decoder.decode(frame);
  } catch {
    return false;
  }
  if (request.type !== RequestType.ProduceAck) return false;
  const name = typeNames.get(type)!;
  ctx.metrics.request(name);
  const started = performance.now();
  const failed = (err: unknown): ResponsePart[] => {
    ctx.logger.error({ err }, 'request failed');
    return [encodeErrorResponse(ErrorCode.Unknown)];
  };
  return appendProduceAck(ctx, request.produceAck).then(
    ({ response }) => ({
      response: response.then((r) => {
        ctx.metrics.requestDone(name, performance.now() - started);
        return [r];
      }, failed),
    }),
    (err: unknown) => ({ response: Promise.resolve(failed(err)) }),
  );
}

async function respond(ctx: BrokerContext, decoder: RequestDecoder, frame: Buffer, type: number): Promise<ResponsePart[] | undefined> {
  const decoded = decodeCounted(ctx, decoder, frame, type);
  if (!('request' in decoded)) {
    if (type === RequestType.Produce || type === RequestType.MultiProduce) return undefined;
    return [encodeErrorResponse(decoded.code)];
  }
  const { request } = decoded;
  switch (request.type) {
    case RequestType.Produce:
      await handleProduce(ctx, [request.produce]);
      return undefined;
    case RequestType.MultiProduce:
      await handleProduce(ctx, request.produces);
      return undefined;
    case RequestType.ProduceAck:
      return [await handleProduceAck(ctx, request.produceAck)];
    case RequestType.Fetch:
      return handleFetch(ctx, request.fetch);
    case RequestType.MultiFetch:
      return handleMultiFetch(ctx, request.fetches);
    case RequestType.Offsets:
      return [handleOffsets(ctx, request.offsets)];
    case RequestType.Metadata:
      return [handleMetadata(ctx, request.topics)];
    case RequestType.ControlledShutdown:
      return [await handleControlledShutdown(ctx, request.controlledShutdown)];
    case RequestType.TopicMetadata:
      return [handleTopicMetadata(ctx, request.topics)];
    case RequestType.LeaderAndIsr:
      return [await handleLeaderAndIsr(ctx, request.leaderAndIsr)];
    case RequestType.StopReplica:
      return [await handleStopReplica(ctx, request.stopReplica)];
    case RequestType.ReplicaFetch:
      return handleReplicaFetch(ctx, request.replicaFetch);
    case RequestType.OffsetForLeaderEpoch:
      return [handleOffsetForLeaderEpoch(ctx, request.offsetForLeaderEpoch)];
    default:
      // Every request type that decodes is served above; this answers one added to the protocol before the broker serves it.
      ctx.metrics.error(errorCodeName(ErrorCode.UnknownRequestType));
      return [encodeErrorResponse(ErrorCode.UnknownRequestType)];
  }
}
