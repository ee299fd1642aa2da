/** Runs `klog` as a user does (a child process of `node dist/main.js`), and reads back what a broker stored. */
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SimpleConsumer } from '@klog/client';
import { waitFor as poll } from '@klog/retry';

export const klogMain = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');

/** What a finished run printed, and its exit code. */
export interface KlogRun {
  code: number | null;
  stdout: string;
  /** stdout as the bytes printed (for binary output). */
  stdoutBytes: Buffer;
  stderr: string;
}

/** A running `klog` whose stdin stays open until the test ends it; `stdout`/`stderr` grow as it prints. */
export interface LiveKlog {
  readonly child: ChildProcessWithoutNullStreams;
  readonly out: { stdout: string; stderr: string };
  /** Resolves with the run once the process exits. */
  readonly exited: Promise<KlogRun>;
}

/** Starts `klog args...`; stdin is a pipe left open. */
export function startKlog(args: readonly string[], env: NodeJS.ProcessEnv = process.env): LiveKlog {
  const child = spawn(process.execPath, [klogMain, ...args], { stdio: ['pipe', 'pipe', 'pipe'], env });
  const out = { stdout: '', stderr: '' };
  const stdoutBytes: Buffer[] = [];
  child.stdout.on('data', (b: Buffer) => {
    stdoutBytes.push(b);
    out.stdout += b.toString();
  });
  child.stderr.on('data', (b: Buffer) => (out.stderr += b.toString()));
  child.stdin.on('error', () => {});
  const exited = new Promise<KlogRun>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => {
      const bytes = Buffer.concat(stdoutBytes);
      resolve({ code, stdout: bytes.toString(), stdoutBytes: bytes, stderr: out.stderr });
    });
  });
  return { child, out, exited };
}

/** Runs `klog args...` with `input` on stdin to its end; killed after `timeoutMs`. */
export async function runKlog(args: readonly string[], input: string | Buffer = '', timeoutMs = 30_000): Promise<KlogRun> {
  const k = startKlog(args);
  const timer = setTimeout(() => k.child.kill('SIGKILL'), timeoutMs);
  k.child.stdin.end(input);
  try {
    return await k.exited;
  } finally {
    clearTimeout(timer);
  }
}

/** Waits until `check` holds, polling every 20 ms (@klog/retry's waitFor). @throws after `timeoutMs` */
export function waitFor(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  return poll(what, check, timeoutMs, 20);
}

/** Every payload of a partition up to its (flushed) end, in log order. */
export async function storedPayloads(host: string, port: number, topic: string, partition = 0): Promise<string[]> {
  const c = new SimpleConsumer({ host, port });
  try {
    const end = await c.latestOffset(topic, partition);
    const got: string[] = [];
    if (end === 0) return got;
    for await (const m of c.messages({ topic, partition, offset: 0, maxWaitMs: 100 })) {
      got.push(m.payload.toString());
      if (m.nextOffset >= end) break;
    }
    return got;
  } finally {
    await c.close();
  }
}

/** True when tmux can run here (the terminal tests need it). */
export const haveTmux = spawnSync('tmux', ['-V']).status === 0;
