/**
 * Brokers for the CLI tests of replicated topics: a real broker over a temp log dir, and a
 * scripted broker that answers as a former leader (TOPIC_METADATA naming the real one, every
 * other request `NotLeaderForPartition`), as the client tests' scripted servers do.
 */
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBroker } from '@klog/broker';
import {
  Decoder,
  decodeProduceAckRequest,
  encodeFrame,
  encodeProduceAckResponse,
  encodeTopicMetadataResponse,
  ErrorCode,
  RequestType,
  type TopicMetadataResponse,
} from '@klog/protocol';
import { pino } from 'pino';

/** A real broker on 127.0.0.1 (port 0). */
export interface RealBroker {
  readonly host: string;
  readonly port: number;
  readonly address: string;
  stop(): Promise<void>;
}

/** Starts a standalone broker with `numPartitions` partitions per auto-created topic. */
export async function startRealBroker(numPartitions = 1): Promise<RealBroker> {
  const logDir = mkdtempSync(join(tmpdir(), 'klog-cli-repl-'));
  const b = await startBroker({ host: '127.0.0.1', port: 0, logDir, numPartitions }, pino({ level: 'silent' }));
  return {
    host: b.host,
    port: b.port,
    address: `${b.host}:${b.port}`,
    stop: async () => {
      await b.close();
      rmSync(logDir, { recursive: true, force: true });
    },
  };
}

/**
 * A broker that no longer leads: TOPIC_METADATA is answered with `metadata(ownPort)`, PRODUCE_ACK
 * with NotLeaderForPartition per partition, anything else with an error-only NotLeaderForPartition.
 */
export async function formerLeader(metadata: (ownPort: number) => TopicMetadataResponse): Promise<{ port: number; stop(): Promise<void> }> {
  const sockets: Socket[] = [];
  const server = createServer((socket) => {
    sockets.push(socket);
    socket.on('error', () => {});
    let buf = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 4 && buf.length >= 4 + buf.readInt32BE(0)) {
        const frame = buf.subarray(4, 4 + buf.readInt32BE(0));
        buf = buf.subarray(4 + frame.length);
        const type = frame.readInt16BE(0);
        if (type === RequestType.TopicMetadata) socket.write(encodeTopicMetadataResponse(metadata(port)));
        else if (type === RequestType.ProduceAck) {
          const req = decodeProduceAckRequest(new Decoder(frame.subarray(2)));
          const errorCode = ErrorCode.NotLeaderForPartition;
          socket.write(encodeProduceAckResponse(req.partitions.map(({ topic, partition }) => ({ topic, partition, errorCode, offset: -1, nextOffset: -1 }))));
        } else socket.write(encodeFrame(ErrorCode.NotLeaderForPartition, () => {}));
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    port,
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
