import { createServer, connect as netConnect, type Server, type Socket } from 'node:net';
import { afterEach } from 'vitest';
import type { Logger } from '@klog/logger';
import { ZkClient, type ZkClientOptions } from '../src/index.js';
import { removeChroot, testConnectString, testZooKeeper } from '../src/testing.js';

/** One captured log entry. */
export interface LogEntry {
  level: 'debug' | 'info' | 'warn' | 'error';
  msg: string;
  obj: object;
}

/** A logger that keeps what it is given. */
export function captureLogger(): Logger & { entries: LogEntry[]; messages(level: LogEntry['level']): string[] } {
  const entries: LogEntry[] = [];
  const at = (level: LogEntry['level']) => (obj: object, msg?: string) => void entries.push({ level, msg: msg ?? '', obj });
  return {
    entries,
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    messages: (level) => entries.filter((e) => e.level === level).map((e) => e.msg),
  };
}

const cleanups: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  while (cleanups.length > 0) {
    await cleanups.pop()!().catch(() => undefined);
  }
});

/** Registers work to run after the current test (last registered runs first). */
export function onCleanup(fn: () => Promise<unknown>): void {
  cleanups.push(fn);
}

/** A fresh chroot for one test, removed after it. */
export function freshChroot(): string {
  const connectString = testConnectString();
  onCleanup(() => removeChroot(connectString));
  return connectString;
}

/** Connects a client (short session), closed after the test. */
export async function connectClient(connectString: string, options: ZkClientOptions = {}): Promise<ZkClient> {
  const zk = await ZkClient.connect(connectString, { sessionTimeoutMs: 3000, ...options });
  onCleanup(() => zk.close());
  return zk;
}

/** Resolves when `predicate` holds, polling; rejects after `timeoutMs`. */
export async function waitFor(predicate: () => boolean | Promise<boolean>, timeoutMs = 10_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Resolves with the first emission of `event`; rejects after `timeoutMs`. */
export function nextEvent<T = unknown>(emitter: ZkClient, event: Parameters<ZkClient['on']>[0], timeoutMs = 15_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no '${event}' event within ${timeoutMs} ms`)), timeoutMs);
    emitter.once(event, ((info: T) => {
      clearTimeout(timer);
      resolve(info);
    }) as never);
  });
}

/**
 * A TCP proxy in front of the test ZooKeeper whose connections the test can cut, to make a
 * client lose its connection without losing its session.
 */
export class CuttableProxy {
  private readonly sockets = new Set<Socket>();
  private readonly frozen = new Set<Socket>();
  private readonly pairs = new Set<{ client: Socket; upstream: Socket }>();
  private server: Server | undefined;
  private freezeAfterType: number | undefined;
  port = 0;

  async start(port = 0): Promise<void> {
    const target = testZooKeeper().split('/')[0]!.split(',')[0]!;
    const colon = target.lastIndexOf(':');
    const host = target.slice(0, colon);
    const targetPort = Number(target.slice(colon + 1));
    const server = createServer((client) => {
      const upstream = netConnect({ host, port: targetPort });
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
        s.on('error', () => undefined);
      }
      client.pipe(upstream);
      client.on('data', (chunk: Buffer) => {
        // A request frame: int32 length, int32 xid, int32 type.
        if (this.freezeAfterType !== undefined && chunk.length >= 12 && chunk.readInt32BE(8) === this.freezeAfterType) {
          this.freezeAfterType = undefined;
          this.freeze();
        }
      });
      const pair = { client, upstream };
      this.pairs.add(pair);
      client.on('close', () => this.pairs.delete(pair));
      upstream.on('data', (chunk: Buffer) => {
        if (!this.frozen.has(upstream)) client.write(chunk);
      });
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    this.server = server;
    this.port = (server.address() as { port: number }).port;
    onCleanup(() => this.stop());
  }

  /** From now on swallows what the server sends on the open connections (a silent network); new connections work. */
  freeze(): void {
    for (const s of this.sockets) this.frozen.add(s);
  }

  /**
   * Freezes (as {@link freeze}) right after the client sends the next request of ZooKeeper
   * request type `type` (e.g. 14, multi): the server gets and applies it, its answer is lost.
   */
  freezeAfterRequest(type: number): void {
    this.freezeAfterType = type;
  }

  /** From now on the open connections carry nothing either way (a hung server); new connections work. */
  hang(): void {
    this.freeze();
    for (const { client, upstream } of this.pairs) {
      client.unpipe(upstream);
      client.pause();
    }
  }

  /** Drops every open connection. */
  cut(): void {
    for (const s of this.sockets) s.destroy();
  }

  /** Stops listening and drops every connection. */
  async stop(): Promise<void> {
    this.cut();
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
