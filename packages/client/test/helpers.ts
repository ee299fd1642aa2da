/**
 * Test helpers: a real broker on 127.0.0.1 (port 0) over a temp log dir, with its logs silenced;
 * a scripted server for tests of the connection itself.
 */
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBroker } from '@klog/broker';
import { encodeFrame } from '@klog/protocol';

type BrokerSettings = Parameters<typeof startBroker>[0];
type BrokerLogger = NonNullable<Parameters<typeof startBroker>[1]>;

/** A logger that drops everything (any method is a no-op; child() returns itself). */
export const silentLogger: BrokerLogger = new Proxy(
  {},
  {
    get: (_t, prop) => {
      if (prop === 'level') return 'silent';
      if (prop === 'isLevelEnabled') return () => false;
      if (prop === 'child') return () => silentLogger;
      return () => {};
    },
  },
) as BrokerLogger;

export interface TestBroker {
  readonly host: string;
  readonly port: number;
  readonly address: string;
  readonly logDir: string;
  /** Stops the broker and removes its log dir. */
  stop(): Promise<void>;
}

/** Starts a broker on a fresh temp dir. */
export async function startTestBroker(settings: Partial<BrokerSettings> = {}): Promise<TestBroker> {
  const logDir = mkdtempSync(join(tmpdir(), 'klog-client-test-'));
  const broker = await startBroker({ host: '127.0.0.1', port: 0, ...settings, logDir }, silentLogger);
  return {
    host: broker.host,
    port: broker.port,
    address: `${broker.host}:${broker.port}`,
    logDir,
    stop: async () => {
      await broker.close();
      rmSync(logDir, { recursive: true, force: true });
    },
  };
}

/** A server that hands each request frame (type, body) to `onRequest`, which may answer through `reply`. */
export async function scriptedServer(
  onRequest: (socket: Socket, type: number, body: Buffer, reply: (code: number, body?: Buffer) => void) => void,
): Promise<{ server: Server; port: number; sockets: Socket[] }> {
  const sockets: Socket[] = [];
  const server = createServer((socket) => {
    sockets.push(socket);
    let buf = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 4 && buf.length >= 4 + buf.readInt32BE(0)) {
        const frame = buf.subarray(4, 4 + buf.readInt32BE(0));
        buf = buf.subarray(4 + frame.length);
        onRequest(socket, frame.readInt16BE(0), frame.subarray(2), (code, body = Buffer.alloc(0)) =>
          socket.write(encodeFrame(code, (e) => e.writeBytes(body))),
        );
      }
    });
    socket.on('error', () => {});
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  return { server, port: typeof address === 'object' && address ? address.port : 0, sockets };
}
