/**
 * Processes for the Kafka listener's tests: a broker (`klog-broker --kafka-port 0`) as a child
 * process, and the real clients: kcat (Debian's, librdkafka) and kafkajs members
 * (`fixtures/*.mjs`) as child processes too, so a test can kill them with SIGKILL.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { sleep, waitFor } from '@klog/retry';

const here = dirname(fileURLToPath(import.meta.url));
/** The broker's command line, built by `turbo run build`. */
export const brokerMain = join(here, '../../../apps/broker/dist/main.js');
/** The `klog` command line. */
export const klogMain = join(here, '../../../tools/klog/dist/main.js');
/** The kafkajs scripts the tests run as processes. */
export const fixtures = join(here, 'fixtures');

/** The waits of @klog/retry: `waitFor` polls every 50 ms, 30 s at the most by default. */
export { sleep, waitFor };

const children = new Set<ChildProcess>();
process.once('exit', () => {
  for (const c of children) c.kill('SIGKILL');
});

/** A broker child process with its Kafka listener. */
export class Broker {
  readonly logs: Record<string, unknown>[] = [];
  port = 0;
  kafkaPort = 0;
  readonly exited: Promise<number | null>;
  private constructor(
    readonly proc: ChildProcess,
    readonly logDir: string,
  ) {
    this.exited = new Promise((resolve) => proc.once('exit', (code) => resolve(code)));
  }

  /** `host:port` of the Kafka listener, for `kcat -b` and kafkajs `brokers`. */
  get kafka(): string {
    return `127.0.0.1:${this.kafkaPort}`;
  }

  /** `host:port` of klog's own listener. */
  get klog(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Starts `klog-broker --port 0 --kafka-port 0 --log-dir <dir> ...args` and waits until it listens. */
  static async start(args: string[] = [], logDir = mkdtempSync(join(tmpdir(), 'klog-kafka-'))): Promise<Broker> {
    const proc = spawn(process.execPath, [brokerMain, '--port', '0', '--kafka-port', '0', '--log-dir', logDir, '--flush-ms', '50', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(proc);
    proc.once('exit', () => children.delete(proc));
    const b = new Broker(proc, logDir);
    let stderr = '';
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    await new Promise<void>((resolve, reject) => {
      createInterface({ input: proc.stdout }).on('line', (line) => {
        try {
          const entry = JSON.parse(line) as Record<string, unknown>;
          b.logs.push(entry);
          if (entry.msg === 'broker listening') {
            b.port = entry.port as number;
            b.kafkaPort = entry.kafkaPort as number;
            resolve();
          }
        } catch {
          b.logs.push({ raw: line });
        }
      });
      void b.exited.then((code) => reject(new Error(`broker exited with ${code} before listening: ${stderr}`)));
    });
    return b;
  }

  /** SIGTERM, and waits for the exit. */
  async stop(): Promise<void> {
    if (this.proc.exitCode === null) this.proc.kill('SIGTERM');
    await this.exited;
  }

  /** Stops it and removes its log dir. */
  async remove(): Promise<void> {
    await this.stop();
    rmSync(this.logDir, { recursive: true, force: true });
  }
}

/** What a finished command gave. */
export interface Ran {
  readonly code: number | null;
  readonly stdout: Buffer;
  readonly stderr: string;
}

/** Runs `cmd args`, feeding `input` on stdin; kills it after `timeoutMs`. */
export function run(cmd: string, args: readonly string[], options: { input?: Buffer | string; timeoutMs?: number } = {}): Promise<Ran> {
  return new Promise((resolve, reject) => {
    const proc = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    children.add(proc);
    const out: Buffer[] = [];
    let stderr = '';
    proc.stdout.on('data', (d: Buffer) => out.push(d));
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => proc.kill('SIGKILL'), options.timeoutMs ?? 60_000);
    proc.on('error', reject);
    proc.on('close', (code) => {
      clearTimeout(timer);
      children.delete(proc);
      resolve({ code, stdout: Buffer.concat(out), stderr });
    });
    proc.stdin.on('error', () => {});
    proc.stdin.end(options.input ?? '');
  });
}

/** Runs the `klog` command line. */
export function klog(args: readonly string[], options: { input?: Buffer | string; timeoutMs?: number } = {}): Promise<Ran> {
  return run(process.execPath, [klogMain, ...args], options);
}

/** Starts a long-running child (a kafkajs member, `kcat -G`) and hands back its process; killed when the tests exit. */
export function spawnChild(cmd: string, args: readonly string[], env: Record<string, string> = {}): ChildProcess {
  const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  children.add(proc);
  proc.once('exit', () => children.delete(proc));
  return proc;
}

/** Lines of text, without the trailing empty one. */
export function lines(b: Buffer | string): string[] {
  const s = b.toString();
  return s === '' ? [] : s.replace(/\n$/, '').split('\n');
}
