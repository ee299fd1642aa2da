/**
 * `klog perf` as a user runs it (docs/benchmarks.md): piped, a plain line of rate and latency
 * every --reporting-interval-ms; a summary with the latency percentiles of acknowledged sends;
 * --throughput holds the rate; SIGINT stops it with a summary; what the broker stored is read from
 * the log ends and a shortfall fails the run (a broker that rejects every message of a
 * fire-and-forget run); on a real terminal (a pseudo-terminal from script(1)) the bar fits the
 * terminal's width.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startBroker, type Broker } from '@klog/broker';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const here = dirname(fileURLToPath(import.meta.url));
const main = join(here, '..', 'dist', 'main.js');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs `klog args...` on pipes; `interruptAfterMs`: sends SIGINT that long after the start. */
function klog(args: string[], interruptAfterMs?: number): Promise<Run> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const child = spawn(process.execPath, [main, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    const killer = setTimeout(() => child.kill('SIGKILL'), 40_000);
    const interrupt = interruptAfterMs === undefined ? undefined : setTimeout(() => child.kill('SIGINT'), interruptAfterMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(killer);
      clearTimeout(interrupt);
      resolve({ code, stdout: out, stderr: err, ms: Date.now() - started });
    });
  });
}

/** Runs `klog args...` on a pseudo-terminal of `columns` columns (script(1)); returns what the terminal received. */
function klogOnTerminal(args: string[], columns: number): Promise<Run> {
  const command = `stty cols ${columns}; ${[process.execPath, main, ...args].map((a) => `'${a}'`).join(' ')}`;
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const child = spawn('script', ['-qec', command, '/dev/null'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: out, stderr: '', ms: Date.now() - started }));
  });
}

const percentiles = /perf produce: latency of acknowledged sends: avg [\d.]+, max [\d.]+, p50 [\d.]+, p95 [\d.]+, p99 [\d.]+, p99\.9 [\d.]+ ms\n/;

describe('klog perf, live and summed up', () => {
  let work: string;
  let broker: Broker;
  let strict: Broker;
  let address: string;
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'klog-perf-live-'));
    broker = await startBroker({ logDir: join(work, 'logs'), host: '127.0.0.1', port: 0 }, pino({ level: 'silent' }));
    // Refuses every message over 100 bytes: a fire-and-forget run of 200-byte messages stores nothing.
    strict = await startBroker({ logDir: join(work, 'strict'), host: '127.0.0.1', port: 0, maxMessageBytes: 100 }, pino({ level: 'silent' }));
    address = `127.0.0.1:${broker.port}`;
  });
  afterAll(async () => {
    await broker.close();
    await strict.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('piped, --acks 1 --throughput: holds the rate, prints a live line per interval and the latency percentiles, and checks what was stored', async () => {
    const r = await klog(['perf', 'produce', '--broker-list', address, '--topic', 'rate', '--messages', '6000', '--acks', '1', '--throughput', '2000', '--reporting-interval-ms', '500']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('');
    const live = r.stderr.match(/^perf produce: [\d,]+ messages acknowledged, [\d.]+ msg\/s \([\d.]+ MB\/s\), [\d.]+ ms avg latency, [\d.]+ ms max latency$/gm) ?? [];
    expect(live.length, r.stderr).toBeGreaterThanOrEqual(3);
    // 6000 messages at 2000 msg/s take about 3 s, not the fraction of a second they take unthrottled.
    expect(r.ms).toBeGreaterThan(2500);
    const summary = /perf produce: 6000 messages, 1200000 bytes in ([\d.]+) s: (\d+) msg\/s/.exec(r.stderr);
    expect(summary, r.stderr).not.toBeNull();
    expect(Number(summary![2])).toBeGreaterThan(1700);
    expect(Number(summary![2])).toBeLessThan(2300);
    expect(r.stderr).toMatch(percentiles);
    expect(r.stderr).toMatch(/perf produce: the broker stored all 6000 messages \(log ends checked\)\n$/);
  });

  it('--json carries the percentiles and what was stored', async () => {
    const r = await klog(['perf', 'produce', '--broker', address, '--topic', 'json', '--messages', '2000', '--acks', '1', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const o = JSON.parse(r.stdout) as { latencyMs: Record<string, number>; stored: number; failed: number; interrupted: boolean };
    expect(Object.keys(o.latencyMs).sort()).toEqual(['avg', 'max', 'p50', 'p95', 'p99', 'p999']);
    expect(o.latencyMs.p50!).toBeLessThanOrEqual(o.latencyMs.p99!);
    expect(o).toMatchObject({ stored: 2000, failed: 0, interrupted: false });
  });

  it('acks 0: messages the broker rejected are reported as lost, and the run fails', async () => {
    const r = await klog(['perf', 'produce', '--broker-list', `127.0.0.1:${strict.port}`, '--topic', 'lost', '--messages', '3000']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/perf produce: acks 0: sends are not acknowledged, so there is no latency to report/);
    expect(r.stderr).toMatch(/^klog perf produce: error: the broker stored 0 of the 3000 messages sent: 3000 LOST/m);
  });

  it('SIGINT mid-run: stops, prints the summary of what was sent, and the broker stored exactly that', async () => {
    const r = await klog(['perf', 'produce', '--broker-list', address, '--topic', 'stopped', '--messages', '1000000', '--acks', '1', '--throughput', '3000'], 2500);
    expect(r.code, r.stderr).toBe(0);
    const m = /^perf produce: (\d+) messages, /m.exec(r.stderr);
    expect(m, r.stderr).not.toBeNull();
    const n = Number(m![1]);
    expect(n).toBeGreaterThan(1000);
    expect(n).toBeLessThan(1_000_000);
    expect(r.stderr).toMatch(percentiles);
    expect(r.stderr).toMatch(new RegExp(`perf produce: interrupted after ${n} of 1000000 messages`));
    expect(r.stderr).toMatch(new RegExp(`perf produce: the broker stored all ${n} messages`));
  });

  it('perf consume piped: a live line per interval and the summary; SIGINT stops it with its summary', async () => {
    await klog(['perf', 'produce', '--broker-list', address, '--topic', 'read', '--messages', '20000', '--acks', '1']);
    const r = await klog(['perf', 'consume', '--broker-list', address, '--topic', 'read', '--idle-timeout-ms', '60000', '--reporting-interval-ms', '300'], 4000);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^perf consume: [\d,]+ messages read, [\d.]+ msg\/s \([\d.]+ MB\/s\)$/m);
    expect(r.stderr).toMatch(/^perf consume: 20000 messages, 4000000 bytes in [\d.]+ s: /m);
    expect(r.stderr).toMatch(/perf consume: interrupted after 20000 messages/);
    expect(r.ms).toBeLessThan(30_000);
  });

  it('on a real terminal 60 columns wide: the bar and its status fit the width (fields left out, never cut)', async () => {
    const r = await klogOnTerminal(['perf', 'produce', '--broker-list', address, '--topic', 'narrow', '--messages', '8000', '--acks', '1', '--throughput', '4000'], 60);
    expect(r.code).toBe(0);
    const frames = r.stdout.split(/\x1b\[1G|\r|\n/).map((f) => f.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '')).filter((f) => f.startsWith('['));
    expect(frames.length).toBeGreaterThan(5);
    for (const f of frames) {
      expect(f.length).toBeLessThanOrEqual(59);
      // Whole fields only: the line ends with a field's unit, not a cut.
      expect(f).toMatch(/(msg|msg\/s|MB\/s|ms avg|ms max|B|KiB|MiB)$/);
    }
    expect(r.stdout).toMatch(/perf produce: the broker stored all 8000 messages/);
  });
});
