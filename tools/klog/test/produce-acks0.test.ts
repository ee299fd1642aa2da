/**
 * `klog produce --acks 0` says what the broker stored: a fire-and-forget send has no answer, so
 * the log ends are read before and after (../src/stored-check.ts) and a shortfall is an error
 * (exit 1), here a broker that rejects a message over its max.message.bytes.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startBroker, type Broker } from '@klog/broker';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const main = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');

/** Runs `klog args...` with `input` on stdin. */
function klog(args: string[], input: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [main, ...args], { stdio: ['pipe', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (b: Buffer) => (err += b.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr: err });
    });
    child.stdin.end(input);
  });
}

describe('klog produce --acks 0', () => {
  let work: string;
  let broker: Broker;
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'klog-acks0-'));
    broker = await startBroker({ logDir: join(work, 'logs'), host: '127.0.0.1', port: 0, maxMessageBytes: 100 }, pino({ level: 'silent' }));
  });
  afterAll(async () => {
    await broker.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('reports that the broker stored every line', async () => {
    const r = await klog(['produce', '--broker-list', `127.0.0.1:${broker.port}`, '--topic', 'fine', '--acks', '0'], 'a\nbb\nccc\n');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/acks 0: the broker stored all 3 messages \(log ends checked\)/);
  });

  it('fails, loudly, when the broker stored less than was sent', async () => {
    const r = await klog(['produce', '--broker', `127.0.0.1:${broker.port}`, '--topic', 'rejected', '--acks', '0'], `${'x'.repeat(300)}\n`);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^klog produce: error: --acks 0: the broker stored 0 of the 1 messages sent: 1 LOST/m);
  });
});
