/**
 * The live progress of `klog perf produce` and `klog perf consume` as users see it: drawn on
 * stderr only when stderr is a terminal, never with --json (stdout then holds exactly one JSON
 * object), and cleared before the summary line. A terminal is simulated by a module loaded with
 * `node --import` that marks stdout and stderr as TTYs (test/fixtures/fake-tty.mjs); perf-live.test.ts
 * runs the real thing on a pseudo-terminal.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startBroker, type Broker } from '@klog/broker';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const here = dirname(fileURLToPath(import.meta.url));
const main = join(here, '..', 'dist', 'main.js');
const fakeTty = pathToFileURL(join(here, 'fixtures', 'fake-tty.mjs')).href;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `klog args...` with stdout and stderr on pipes; `tty`: as if both were terminals. */
function klog(args: string[], tty: boolean): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...(tty ? ['--import', fakeTty] : []), main, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: out, stderr: err });
    });
  });
}

/** Anything a progress bar draws: escape sequences, carriage returns, the bar's brackets. */
const drawing = /\x1b|\r|\[[#-]+\]/;

describe('klog perf progress', () => {
  let work: string;
  let broker: Broker;
  let address: string;
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'klog-perf-progress-'));
    broker = await startBroker({ logDir: join(work, 'logs'), host: '127.0.0.1', port: 0, numPartitions: 1 }, pino({ level: 'silent' }));
    address = `127.0.0.1:${broker.port}`;
  });
  afterAll(async () => {
    await broker.close();
    rmSync(work, { recursive: true, force: true });
  });

  const produce = ['perf', 'produce', '--topic', 'bar', '--messages', '20000', '--size', '100', '--batch-size', '50'];
  const consume = ['perf', 'consume', '--topic', 'bar', '--partition', '0', '--messages', '20000'];

  it('on a terminal: draws a bar with the rate on stderr, clears it, then prints the summary line; stdout stays empty', async () => {
    const p = await klog([...produce, '--broker-list', address], true);
    expect(p.code, p.stderr).toBe(0);
    expect(p.stdout).toBe('');
    expect(p.stderr).toMatch(/\[[#-]{25}\] +\d+%  [\d,]+\/20,000 msg  [\d,]+ msg\/s  [\d.]+ MB\/s  [\d.]+ (B|KiB|MiB)/);
    // The bar is cleared (cursor to column 1, clear to the end of the screen) before the summary.
    expect(p.stderr).toMatch(/\x1b\[1G\x1b\[0Jperf produce: 20000 messages, 2000000 bytes in [\d.]+ s: \d+ msg\/s, [\d.]+ MB\/s \(.*\)\n/);
    expect(p.stderr).toMatch(/perf produce: the broker stored all 20000 messages \(log ends checked\)\n$/);

    const c = await klog([...consume, '--broker', address], true);
    expect(c.code, c.stderr).toBe(0);
    expect(c.stdout).toBe('');
    expect(c.stderr).toMatch(/\[[#-]{25}\] +\d+%  [\d,]+\/20,000 msg/);
    expect(c.stderr).toMatch(/\x1b\[0Jperf consume: 20000 messages, 2000000 bytes in [\d.]+ s: /);
  });

  it('with --json, even on a terminal: exactly one JSON object on stdout and nothing drawn', async () => {
    for (const args of [
      [...produce, '--broker-list', address, '--json'],
      [...consume, '--broker', address, '--json'],
    ]) {
      const r = await klog(args, true);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).not.toMatch(drawing);
      expect(r.stderr).not.toMatch(drawing);
      expect(r.stdout.endsWith('\n')).toBe(true);
      const lines = r.stdout.trimEnd().split('\n');
      expect(lines).toHaveLength(1);
      const o = JSON.parse(lines[0]!) as Record<string, unknown>;
      expect(o).toMatchObject({ messages: 20000, bytes: 2_000_000 });
      for (const k of ['seconds', 'msgsPerSec', 'mbPerSec']) expect(typeof o[k]).toBe('number');
    }
  });

  it('not on a terminal: no bar, only the summary line on stderr', async () => {
    const p = await klog([...produce, '--broker-list', address], false);
    expect(p.code, p.stderr).toBe(0);
    expect(p.stdout).toBe('');
    expect(p.stderr).not.toMatch(drawing);
    expect(p.stderr).toMatch(/^perf produce: 20000 messages, 2000000 bytes in [\d.]+ s: \d+ msg\/s, [\d.]+ MB\/s \(.*\)\n/m);
    expect(p.stderr).toMatch(/perf produce: the broker stored all 20000 messages \(log ends checked\)\n$/);
    const c = await klog([...consume, '--broker', address], false);
    expect(c.code, c.stderr).toBe(0);
    expect(c.stderr).not.toMatch(drawing);
    expect(c.stderr).toMatch(/^perf consume: 20000 messages, 2000000 bytes in [\d.]+ s: .*\n$/m);
  });
});
