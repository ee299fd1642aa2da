#!/usr/bin/env node
/**
 * Slow sendfile readers against an acks-2 producer (not a test; docs/benchmarks.md, "Slow
 * readers"): what do consumers that read slowly cost the producers that wait for flushes?
 *
 *   node bench/slow-readers.mjs [--repo DIR]... [--messages 1000000] [--readers 8]
 *
 * For each checkout given with --repo (default: this one; give a checkout of main as well to
 * compare), one after another: starts a broker of that checkout (default settings, temp log
 * dir), fills topic `data` with --fill-mib MiB (64 KiB messages, acks 1), warms the broker up
 * with the produce below of --warmup messages to topic `warmup` (not reported: without it the
 * first run, "alone", also paid for the broker's warm-up), then
 *   1. alone: `klog perf produce --acks 2` of --messages messages of --size bytes in batches
 *      of --batch-size to topic `acked`;
 *   2. with readers: --readers consumers in this process, each a TCP connection that sends one
 *      FETCH of --fetch-mib MiB of `data` from offset 0 and reads it at --reader-kib-s KiB/s
 *      (a token bucket refilled every 50 ms), started 2 s before the same produce again.
 * Prints a JSON line per run (msg/s, seconds, and the latency of acknowledged sends in ms: p50,
 * p99, max; the first sends' latency includes the new topic's creation) and one per checkout
 * with `cost` = 1 − with-readers ÷ alone msg/s.
 */
import { connect } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { environment, klogJson, startBroker } from './lib/broker.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: o } = parseArgs({
  options: {
    repo: { type: 'string', multiple: true },
    messages: { type: 'string', default: '1000000' },
    warmup: { type: 'string', default: '200000' },
    size: { type: 'string', default: '200' },
    'batch-size': { type: 'string', default: '50' },
    readers: { type: 'string', default: '8' },
    'reader-kib-s': { type: 'string', default: '512' },
    'fetch-mib': { type: 'string', default: '100' },
    'fill-mib': { type: 'string', default: '128' },
  },
});
const repos = (o.repo ?? [root]).map((r) => resolve(r));
const n = (k) => {
  const v = Number(o[k]);
  if (!Number.isInteger(v) || v < 1) throw new Error(`--${k} must be a positive integer, got ${o[k]}`);
  return v;
};
const [messages, warmup, size, batch, readers, readerKiB, fetchMiB, fillMiB] = ['messages', 'warmup', 'size', 'batch-size', 'readers', 'reader-kib-s', 'fetch-mib', 'fill-mib'].map(n);
const { encodeFetchRequest } = await import(join(root, 'packages/protocol/dist/index.js'));

console.log(JSON.stringify({ environment: environment(), repos, messages, warmup, size, batch, readers, readerKiB, fetchMiB, fillMiB }));

/** One slow reader; returns a stop function and a counter of bytes read. */
function slowReader(port, bytesPerSec) {
  const s = connect(port, '127.0.0.1');
  s.on('error', () => {});
  const state = { bytes: 0 };
  let budget = 0;
  s.on('data', (c) => {
    state.bytes += c.length;
    budget -= c.length;
    if (budget <= 0) s.pause();
  });
  const timer = setInterval(() => {
    budget = Math.min(budget + bytesPerSec / 20, bytesPerSec / 20);
    if (budget > 0) s.resume();
  }, 50);
  s.on('connect', () => s.write(encodeFetchRequest({ topic: 'data', partition: 0, offset: 0, maxBytes: fetchMiB * 2 ** 20 })));
  return { state, stop: () => (clearInterval(timer), s.destroy()) };
}

/** p50, p99 and max of a `perf produce --json` latency summary, in ms rounded to 0.1. */
const latency = (r) => (r.latencyMs ? { p50: +r.latencyMs.p50.toFixed(1), p99: +r.latencyMs.p99.toFixed(1), max: +r.latencyMs.max.toFixed(1) } : null);

const produceArgs = (port, topic, count = messages) => ['perf', 'produce', '--broker-list', `127.0.0.1:${port}`, '--topic', topic, '--messages', String(count), '--size', String(size), '--batch-size', String(batch), '--acks', '2', '--json'];

for (const repo of repos) {
  const b = await startBroker(repo);
  try {
    await klogJson(repo, ['perf', 'produce', '--broker-list', `127.0.0.1:${b.port}`, '--topic', 'data', '--messages', String(fillMiB * 16), '--size', '65536', '--batch-size', '16', '--acks', '1', '--json']);
    await klogJson(repo, produceArgs(b.port, 'warmup', warmup));
    const alone = await klogJson(repo, produceArgs(b.port, 'acked'));
    console.log(JSON.stringify({ repo, run: 'alone', msgsPerSec: alone.msgsPerSec, mbPerSec: alone.mbPerSec, seconds: alone.seconds, latencyMs: latency(alone) }));
    const rs = Array.from({ length: readers }, () => slowReader(b.port, readerKiB * 1024));
    await new Promise((r) => setTimeout(r, 2000));
    const t0 = performance.now();
    const before = rs.reduce((s, r) => s + r.state.bytes, 0);
    const loaded = await klogJson(repo, produceArgs(b.port, 'acked2'));
    const readKiBs = (rs.reduce((s, r) => s + r.state.bytes, 0) - before) / 1024 / ((performance.now() - t0) / 1000) / readers;
    for (const r of rs) r.stop();
    console.log(JSON.stringify({ repo, run: `with ${readers} slow readers`, msgsPerSec: loaded.msgsPerSec, mbPerSec: loaded.mbPerSec, seconds: loaded.seconds, latencyMs: latency(loaded), readerKiBPerSecEach: +readKiBs.toFixed(0) }));
    console.log(JSON.stringify({ repo, summary: true, aloneMsgsPerSec: alone.msgsPerSec, withReadersMsgsPerSec: loaded.msgsPerSec, cost: 1 - loaded.msgsPerSec / alone.msgsPerSec, loadAverage: environment().loadAverage }));
  } finally {
    await b.stop();
  }
}
