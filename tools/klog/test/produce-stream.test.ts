/**
 * `klog produce` as users run it (real processes, a real broker, a real terminal through tmux):
 * lines go out as they arrive, Ctrl-C (SIGINT) sends what was read and prints the summary, and
 * a line over the broker's max.message.bytes fails alone, by its line number.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBroker, type Broker } from '@klog/broker';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { haveTmux, klogMain, runKlog, startKlog, storedPayloads, waitFor } from './cli-run.js';

/** The summary line's counts. */
function summary(stderr: string): { sent: number; acknowledged: number; failed: number } {
  const m = /^produced \d+ messages .*: (\d+) sent, (\d+) acknowledged, (\d+) failed/m.exec(stderr);
  if (!m) throw new Error(`no summary in: ${stderr}`);
  return { sent: Number(m[1]), acknowledged: Number(m[2]), failed: Number(m[3]) };
}

describe('klog produce', () => {
  let work: string;
  let broker: Broker;
  let address: string;
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'klog-produce-test-'));
    broker = await startBroker({ logDir: join(work, 'logs'), host: '127.0.0.1', port: 0, numPartitions: 1, flushIntervalMs: 20, maxMessageBytes: 1000 }, pino({ level: 'silent' }));
    address = `127.0.0.1:${broker.port}`;
  });
  afterAll(async () => {
    await broker.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('sends a line as it arrives: with stdin held open, the first line is consumed within 2 s', async () => {
    await broker.logs.getOrCreateLog('stream', 0); // the topic exists before the consumer starts (as a produce creates it)
    // At log level info both say when they are ready: the consumer once it consumes, the producer once it reads.
    const env = { ...process.env, KLOG_LOG_LEVEL: 'info' };
    const consumer = startKlog(['consume', '--broker', address, '--topic', 'stream', '--max-messages', '1', '--max-wait-ms', '100'], env);
    const producer = startKlog(['produce', '--broker-list', address, '--topic', 'stream'], env);
    try {
      await waitFor(() => consumer.out.stderr.includes('"msg":"consuming"') && producer.out.stderr.includes('"msg":"reading lines"'), 20_000, 'both to start');
      const wrote = Date.now();
      producer.child.stdin.write('first line\n');
      await waitFor(() => consumer.out.stdout.includes('first line'), 2000, 'the consumer to print the first line');
      expect(Date.now() - wrote).toBeLessThan(2000);
      expect(producer.child.exitCode).toBeNull(); // still reading its open stdin
      producer.child.stdin.end('second line\n');
      const run = await producer.exited;
      expect(run.code).toBe(0);
      expect(summary(run.stderr)).toEqual({ sent: 2, acknowledged: 2, failed: 0 });
      expect(run.stderr).not.toMatch(/"level":(40|50)/);
    } finally {
      producer.child.kill('SIGKILL');
      consumer.child.kill('SIGKILL');
    }
  });

  it('on SIGINT mid-input sends what was read, waits for the acknowledgements, prints the summary, and that is what was stored', async () => {
    const producer = startKlog(['produce', '--broker-list', address, '--topic', 'interrupted'], { ...process.env, KLOG_LOG_LEVEL: 'info' });
    let written = 0;
    const writer = setInterval(() => producer.child.stdin.write(`line ${written++}\n`), 2);
    try {
      // Mid-input: once it reads (and lines have reached the broker), while lines keep coming.
      await waitFor(() => producer.out.stderr.includes('"msg":"reading lines"'), 20_000, 'the producer to start');
      await new Promise((resolve) => setTimeout(resolve, 300));
      producer.child.kill('SIGINT');
      const run = await producer.exited;
      clearInterval(writer);
      expect(run.code, run.stderr).toBe(0);
      expect(run.stderr).toMatch(/SIGINT: stopped reading/);
      const counts = summary(run.stderr);
      expect(counts.sent).toBeGreaterThan(0);
      expect(counts).toEqual({ sent: counts.sent, acknowledged: counts.sent, failed: 0 });
      await new Promise((resolve) => setTimeout(resolve, 100)); // flushed
      const stored = await storedPayloads('127.0.0.1', broker.port, 'interrupted');
      expect(stored).toEqual(Array.from({ length: counts.acknowledged }, (_, i) => `line ${i}`));
    } finally {
      clearInterval(writer);
      producer.child.kill('SIGKILL');
    }
  });

  it('a line over max.message.bytes: says its size and the limit, stores the others, names the line, exits 1', async () => {
    const good = (from: number): string[] => Array.from({ length: 5 }, (_, i) => `good ${from + i}`);
    const lines = [...good(1), 'x'.repeat(2000), ...good(6)];
    const run = await runKlog(['produce', '--broker-list', address, '--topic', 'oversize'], `${lines.join('\n')}\n`);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^klog produce: line 6: MessageSizeTooLarge \[code 5\] .*a message of 2000 bytes is over the broker's limit of 1000 bytes \(max\.message\.bytes\)$/m);
    expect(summary(run.stderr)).toEqual({ sent: 11, acknowledged: 10, failed: 1 });
    expect(run.stderr.trimEnd().split('\n').at(-1)).toBe('klog produce: error: 1 of 11 lines failed: lines 6');
    expect(run.stderr).not.toMatch(/^\s+at /m);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await storedPayloads('127.0.0.1', broker.port, 'oversize')).toEqual([...good(1), ...good(6)]);
  });

  it('a --partition the topic does not have is one error for the command, not one per line', async () => {
    const r = await runKlog(['produce', '--broker-list', address, '--topic', 'oversize', '--partition', '3'], 'a\nb\nc\n');
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('klog produce: error: --partition 3: topic oversize has only partition 0 over --broker-list\n');
  });

  it('--stop-on-error stops reading at the first rejected line', async () => {
    const producer = startKlog(['produce', '--broker-list', address, '--topic', 'stop-early', '--stop-on-error']);
    try {
      producer.child.stdin.write(`a\n${'y'.repeat(1500)}\n`);
      await waitFor(() => producer.out.stderr.includes('line 2:'), 5000, 'the rejection of line 2');
      producer.child.stdin.write('after\n');
      const run = await producer.exited;
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/line 2 failed \(--stop-on-error\): stopped reading/);
      expect(summary(run.stderr)).toEqual({ sent: 2, acknowledged: 1, failed: 1 });
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(await storedPayloads('127.0.0.1', broker.port, 'stop-early')).toEqual(['a']);
    } finally {
      producer.child.kill('SIGKILL');
    }
  });

  it.runIf(haveTmux)('in a terminal: typed lines are stored as they are typed, and Ctrl-C prints the summary and exits 0', async () => {
    const socket = `klog-test-${process.pid}-${Date.now()}`;
    const tmux = (...args: string[]): string => {
      const r = spawnSync('tmux', ['-L', socket, ...args], { encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`tmux ${args.join(' ')}: ${r.stderr}`);
      return r.stdout;
    };
    const command = `KLOG_LOG_LEVEL=info ${process.execPath} ${klogMain} produce --broker-list ${address} --topic typed; echo EXIT=$?; sleep 60`;
    tmux('new-session', '-d', '-s', 'produce', '-x', '220', '-y', '30', command);
    try {
      await waitFor(() => tmux('capture-pane', '-p', '-t', 'produce').includes('reading lines'), 20_000, 'klog produce to start in the terminal');
      tmux('send-keys', '-t', 'produce', 'typed one', 'Enter');
      const stored = async (): Promise<string[]> => storedPayloads('127.0.0.1', broker.port, 'typed').catch(() => []);
      let got: string[] = [];
      const deadline = Date.now() + 3000;
      while (got.length < 1 && Date.now() < deadline) {
        got = await stored();
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(got).toEqual(['typed one']); // stored while the terminal is still open
      tmux('send-keys', '-t', 'produce', 'typed two', 'Enter');
      await new Promise((resolve) => setTimeout(resolve, 300));
      tmux('send-keys', '-t', 'produce', 'C-c');
      let pane = '';
      await waitFor(() => (pane = tmux('capture-pane', '-p', '-t', 'produce')).includes('EXIT='), 10_000, 'klog produce to exit');
      expect(pane).toMatch(/2 sent, 2 acknowledged, 0 failed/);
      expect(pane).toMatch(/EXIT=0/);
      expect(await stored()).toEqual(['typed one', 'typed two']);
    } finally {
      spawnSync('tmux', ['-L', socket, 'kill-server']);
    }
  });
});
