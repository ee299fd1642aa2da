/**
 * Test helpers: a raw wire client (frames in, frames out, no client library in between) and a
 * broker run as a child process, for tests where a crash (`kill -9`) is the point.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const brokerMain = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');

/** A fresh temp dir; removed by the returned cleanup. */
export function tempDir(prefix = 'klog-broker-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/**
 * Calls `f` every 25 ms until it returns something other than undefined or false, and resolves
 * with that; rejects naming `what` after `ms`.
 */
export async function until<T>(what: string, f: () => Promise<T | undefined | false> | T | undefined | false, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/** One response frame: the error code and the body after it. */
export interface RawResponse {
  code: number;
  body: Buffer;
}

/** Sends whole frames and reads response frames in order. */
export class WireClient {
  private pending: { resolve: (r: RawResponse) => void; reject: (e: Error) => void }[] = [];
  private buf = Buffer.alloc(0);
  closed = false;

  private constructor(readonly socket: Socket) {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      this.buf = Buffer.concat([this.buf, chunk]);
      while (this.buf.length >= 4) {
        const size = this.buf.readInt32BE(0);
        if (this.buf.length < 4 + size) break;
        const frame = this.buf.subarray(4, 4 + size);
        this.buf = this.buf.subarray(4 + size);
        this.pending.shift()?.resolve({ code: frame.readInt16BE(0), body: Buffer.from(frame.subarray(2)) });
      }
    });
    const fail = (err: Error): void => {
      this.closed = true;
      for (const p of this.pending.splice(0)) p.reject(err);
    };
    socket.on('error', fail);
    socket.on('close', () => fail(new Error('connection closed')));
  }

  static async connect(port: number): Promise<WireClient> {
    const socket = connect(port, '127.0.0.1');
    await once(socket, 'connect');
    return new WireClient(socket);
  }

  /** Sends a frame that has no response (PRODUCE, MULTIPRODUCE). */
  send(frame: Buffer): void {
    this.socket.write(frame);
  }

  /** Sends a frame and resolves with its response. */
  request(frame: Buffer): Promise<RawResponse> {
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new Error('connection closed'));
      this.pending.push({ resolve, reject });
      this.socket.write(frame);
    });
  }

  close(): void {
    this.socket.destroy();
  }
}

/** A broker child process. */
export interface BrokerProcess {
  proc: ChildProcess;
  port: number;
  /** Every JSON log line the broker has printed so far. */
  logs: Record<string, unknown>[];
  exited: Promise<number | null>;
}

/** Brokers spawned and not yet exited: killed when the test process exits, so that a test that times out mid-start leaves none behind. */
const spawned = new Set<ChildProcess>();
process.once('exit', () => {
  for (const p of spawned) p.kill('SIGKILL');
});

/**
 * Starts `klog-broker` with `args` and waits for its "broker listening" line.
 * @param wrap a command the broker runs under, e.g. `['prlimit', '--nofile=256', '--']` or strace
 */
export async function spawnBroker(args: string[], wrap: string[] = []): Promise<BrokerProcess> {
  const argv = [process.execPath, brokerMain, '--port', '0', ...args];
  const proc = spawn(wrap[0] ?? argv[0]!, [...wrap.slice(1), ...(wrap.length > 0 ? argv : argv.slice(1))], { stdio: ['ignore', 'pipe', 'pipe'] });
  spawned.add(proc);
  proc.once('exit', () => spawned.delete(proc));
  const logs: Record<string, unknown>[] = [];
  const exited = new Promise<number | null>((resolve) => proc.on('exit', (code) => resolve(code)));
  let stderr = '';
  proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: proc.stdout }).on('line', (line) => {
      try {
        const entry = JSON.parse(line) as Record<string, unknown>;
        logs.push(entry);
        if (entry.msg === 'broker listening') resolve(entry.port as number);
      } catch {
        logs.push({ raw: line });
      }
    });
    void exited.then((code) => reject(new Error(`broker exited with ${code} before listening: ${stderr}`)));
  });
  return { proc, port, logs, exited };
}
