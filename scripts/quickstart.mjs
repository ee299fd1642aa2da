#!/usr/bin/env node
// The quickstart (README): a real text log through a real broker and back.
// Starts a standalone klog-broker on a temp dir, sends every line of a file with `klog produce`,
// reads them back with `klog consume`, checks the line count and a SHA-256 of the content,
// prints the throughput, and stops the broker.
//
//   node scripts/quickstart.mjs [FILE]   (default /var/log/dpkg.log, else this repo's git log)
import { spawn, execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const bin = (name) => join(root, 'node_modules', '.bin', name);
const work = mkdtempSync(join(tmpdir(), 'klog-quickstart-'));

function pickInput() {
  if (process.argv[2]) return process.argv[2];
  if (existsSync('/var/log/dpkg.log')) return '/var/log/dpkg.log';
  const file = join(work, 'git-log.txt');
  writeFileSync(file, execFileSync('git', ['-C', root, 'log', '--stat', '--format=fuller'], { maxBuffer: 1 << 30 }));
  return file;
}

function run(cmd, args, input) {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'inherit'] });
    const out = [];
    p.stdout.on('data', (d) => out.push(d));
    p.on('error', reject);
    p.on('exit', (code) => (code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(`${cmd} ${args.join(' ')} exited with ${code}`))));
    p.stdin.end(input);
  });
}

const sha256 = (b) => createHash('sha256').update(b).digest('hex');

async function main() {
  const input = pickInput();
  const text = readFileSync(input);
  const lines = text.length === 0 ? [] : text.toString('utf8').replace(/\n$/, '').split('\n');
  const expected = lines.length === 0 ? Buffer.alloc(0) : Buffer.from(lines.join('\n') + '\n');
  console.log(`quickstart: ${lines.length} lines, ${text.length} bytes from ${input}`);

  const broker = spawn(bin('klog-broker'), ['--port', '0', '--log-dir', join(work, 'logs')], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise((resolve, reject) => {
    broker.on('error', (err) => reject(new Error(`cannot start klog-broker: ${err.message}`)));
    broker.on('exit', (code) => reject(new Error(`klog-broker exited with ${code}`)));
    createInterface({ input: broker.stdout }).on('line', (line) => {
      const entry = JSON.parse(line);
      if (entry.msg === 'broker listening') resolve(entry.port);
    });
  });
  console.log(`quickstart: broker listening on 127.0.0.1:${port}, logs in ${join(work, 'logs')}`);
  try {
    const t0 = performance.now();
    await run(bin('klog'), ['produce', '--broker-list', `127.0.0.1:${port}`, '--topic', 'quickstart', '--file', input, '--acks', '2']);
    const t1 = performance.now();
    const out = await run(bin('klog'), [
      'consume', '--broker', `127.0.0.1:${port}`, '--topic', 'quickstart', '--offset', 'earliest',
      '--max-messages', String(lines.length), '--idle-timeout-ms', '5000',
    ]);
    const t2 = performance.now();
    const got = out.length === 0 ? 0 : out.toString('utf8').replace(/\n$/, '').split('\n').length;
    const rate = (n, ms) => `${Math.round(n / (ms / 1000)).toLocaleString('en-US')} msg/s`;
    console.log(`quickstart: produced ${lines.length} messages in ${(t1 - t0).toFixed(0)} ms (${rate(lines.length, t1 - t0)}, including process start)`);
    console.log(`quickstart: consumed ${got} messages in ${(t2 - t1).toFixed(0)} ms (${rate(got, t2 - t1)}, including process start)`);
    console.log(`quickstart: sha256 sent ${sha256(expected)}`);
    console.log(`quickstart: sha256 read ${sha256(out)}`);
    if (got !== lines.length || !out.equals(expected)) throw new Error('what came back differs from what was sent');
    console.log('quickstart: OK, every line came back intact');
  } finally {
    broker.kill('SIGTERM');
    await new Promise((resolve) => (broker.exitCode !== null ? resolve() : broker.on('exit', resolve)));
  }
}

main().then(
  () => rmSync(work, { recursive: true, force: true }),
  (err) => {
    rmSync(work, { recursive: true, force: true });
    console.error(`quickstart: FAILED: ${err.message}`);
    process.exit(1);
  },
);
