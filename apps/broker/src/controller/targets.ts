/**
 * How the controller reaches a broker (docs/replication.md §5.3, "requests to brokers"): a
 * {@link RequestTarget} that encodes LEADER_AND_ISR and STOP_REPLICA frames (@klog/protocol)
 * and decodes their answers, over a {@link BrokerConnection} for another broker, or handed to this
 * broker's own request handlers without a socket ({@link localTarget}).
 */
import {
  decodeLeaderAndIsrResponse,
  decodeStopReplicaResponse,
  encodeLeaderAndIsrRequest,
  encodeStopReplicaRequest,
  frameSizeBytes,
  openFrame,
  RequestDecoder,
  type Decoder,
} from '@klog/protocol';
import type { BrokerContext } from '../handlers/context.js';
import { handleRequest } from '../handlers/index.js';
import { BrokerConnection } from '../replication/broker-connection.js';
import type { PartitionErrorsAnswer, RequestTarget } from './request-sender.js';
import type { LeaderAndIsrBody, StopReplicaBody } from './requests.js';

/** Sends one framed request and resolves with the response's error code and body. */
type SendFrame = (frame: Buffer) => Promise<{ readonly errorCode: number; readonly body: Decoder }>;

function frameTarget(send: SendFrame, close: () => void): RequestTarget {
  return {
    async leaderAndIsr(body: LeaderAndIsrBody): Promise<PartitionErrorsAnswer> {
      const r = await send(encodeLeaderAndIsrRequest(body));
      return decodeLeaderAndIsrResponse(r.errorCode, r.body);
    },
    async stopReplica(body: StopReplicaBody): Promise<PartitionErrorsAnswer> {
      const r = await send(encodeStopReplicaRequest(body));
      return decodeStopReplicaResponse(r.errorCode, r.body);
    },
    close,
  };
}

/** A broker reached over TCP at `host:port`; no answer within `requestTimeoutMs` reconnects and sends again. */
export function remoteTarget(host: string, port: number, requestTimeoutMs: number): RequestTarget {
  const connection = new BrokerConnection({ host, port, connectTimeoutMs: requestTimeoutMs });
  return frameTarget((frame) => connection.request(frame, requestTimeoutMs), () => connection.close());
}

/** This broker, its requests handed to its own handlers (handlers/index.ts) as a frame from a socket would be. */
export function localTarget(ctx: BrokerContext): RequestTarget {
  const decoder = new RequestDecoder();
  return frameTarget(
    async (frame) => {
      const parts = (await handleRequest(ctx, decoder, frame.subarray(frameSizeBytes))) ?? [];
      const bytes = Buffer.concat(parts.map((p) => (Buffer.isBuffer(p) ? p : Buffer.alloc(0))));
      const { head, body } = openFrame(bytes.subarray(frameSizeBytes));
      return { errorCode: head, body };
    },
    () => {},
  );
}
