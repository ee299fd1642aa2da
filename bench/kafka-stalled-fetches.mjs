#!/usr/bin/env node
/**
 * Kafka consumers that ask for 100 MiB and never read their sockets (not a test;
 * docs/benchmarks.md, "Kafka fetch memory"): what do they cost the broker's RSS?
 *
 *   node bench/kafka-stalled-fetches.mjs [--repo DIR]... [--stalled 10] [-- BROKER FLAGS...]
 *
 * For each checkout given with --repo (default: this one; give a checkout of main as well to
 * compare), one after another: starts its `klog-broker` command (the built dist, with the Node
 * flags of the command's first line; temp log dir, Kafka listener, the flags after `--`),
 * produces 40 Produce v2 requests of 10 messages of 100,000 bytes to topic `big` (40 MB), then
 * opens --stalled connections that each send one Fetch v2 of `big` from offset 0 with 100 MiB
 * max bytes and never read, and samples the broker's RSS every 100 ms for 3 s. Prints a JSON
 * line per checkout: RSS before and the peak, in MiB.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: o, positionals: flags } = parseArgs({
  options: { repo: { type: 'string', multiple: true }, stalled: { type: 'string', default: '10' } },
  allowPositionals: true,
});
const { ApiKey, encodeKafkaMessageSet, encodeRequest } = await import(pathToFileURL(join(root, 'packages/kafka-protocol/dist/index.js')).href);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

for (const repo of (o.repo ?? [root]).map((r) => resolve(r))) {
  const logDir = mkdtempSync(join(tmpdir(), 'klog-stalled-'));
  const proc = spawn(join(repo, 'apps/broker/bin/klog-broker.js'), ['--port', '0', '--kafka-port', '0', '--log-dir', logDir, '--flush-ms', '50', ...flags], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise((res) =>
    createInterface({ input: proc.stdout }).on('line', (l) => {
      try {
        const e = JSON.parse(l);
        if (e.msg === 'broker listening') res(e.kafkaPort);
      } catch {}
    }),
  );
  const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${proc.pid}/status`, 'utf8'))[1]) / 1024;
  const s = connect(port, '127.0.0.1');
  await once(s, 'connect');
  let buf = Buffer.alloc(0);
  const waiting = [];
  s.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    while (buf.length >= 4 && buf.length >= 4 + buf.readInt32BE(0)) {
      const n = buf.readInt32BE(0);
      waiting.shift()(buf.subarray(4, 4 + n));
      buf = buf.subarray(4 + n);
    }
  });
  const call = (frame) => {
    const answer = new Promise((r) => waiting.push(r));
    s.write(frame);
    return answer;
  };
  const set = encodeKafkaMessageSet(Array.from({ length: 10 }, () => ({ key: null, value: Buffer.alloc(100_000, 118), timestamp: Date.now() })), 1);
  for (let i = 0; i < 40; i++) {
    await call(encodeRequest({ apiKey: ApiKey.Produce, apiVersion: 2, correlationId: i, clientId: 'bench' }, (w) => w.int16(1).int32(30_000).array(['big'], (w, t) => w.string(t).array([0], (w, p) => w.int32(p).bytes(set)))));
  }
  await sleep(1000);
  const before = rss();
  const fetch = encodeRequest({ apiKey: ApiKey.Fetch, apiVersion: 2, correlationId: 1, clientId: 'stalled' }, (w) =>
    w.int32(-1).int32(0).int32(0).array(['big'], (w, t) => w.string(t).array([0], (w, p) => w.int32(p).int64(0).int32(100 * 1024 * 1024))),
  );
  const stalled = [];
  for (let i = 0; i < Number(o.stalled); i++) {
    const c = connect(port, '127.0.0.1');
    c.on('error', () => {});
    await once(c, 'connect');
    c.pause();
    c.write(fetch);
    stalled.push(c);
  }
  let peak = 0;
  for (let i = 0; i < 30; i++) {
    peak = Math.max(peak, rss());
    await sleep(100);
  }
  console.log(JSON.stringify({ repo, flags, stalled: stalled.length, rssBeforeMiB: Math.round(before), rssPeakMiB: Math.round(peak) }));
  for (const c of stalled) c.destroy();
  s.destroy();
  proc.kill('SIGTERM');
  await once(proc, 'exit');
  rmSync(logDir, { recursive: true, force: true });
}
