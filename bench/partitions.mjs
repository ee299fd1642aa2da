#!/usr/bin/env node
/**
 * Many partitions on one broker (not a test; docs/benchmarks.md, "Many partitions"): does
 * fire-and-forget throughput hold, and do the flushes keep up, as a topic's partitions grow?
 *
 *   node bench/partitions.mjs [--repo DIR]... [--partitions 100,1000,5000] [--messages 1000000] [--keyless sticky,random]
 *
 * For each checkout given with --repo (default: this one; add a checkout of main to compare)
 * and each partition count P: starts a broker of that checkout with `--num-partitions P`
 * (other settings default, temp log dir, metrics on a free port), creates the topic with one
 * message, then `klog perf produce` of --messages messages of 200 bytes in batches of 50 without
 * a key (acks 0), once per --keyless mode (`--keyless` of perf produce: sticky partitions, the
 * producer's default, or a random partition per message; a checkout without the flag runs only
 * the first mode). The clock runs from perf produce's first send (its `startedAtMs`) until the
 * broker's log dirs hold every message (a stat of each partition's segment while perf produce
 * runs, at least 20 ms apart and idle 4 times as long as a poll takes), as in bench/peers:
 * `msgsPerSec`. `wallMsgsPerSec` times the same end from the start of the perf produce
 * process, so it also counts the process's start and its reading of every partition's log end
 * before the first send (a request per partition: at 5,000 partitions a good part of a second). Then scrapes the broker's flush count and flush time
 * (klog_flushes_total, klog_flush_duration_seconds). Prints one JSON line per run.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { environment, klogJson, startBroker } from './lib/broker.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: o } = parseArgs({
  options: {
    repo: { type: 'string', multiple: true },
    partitions: { type: 'string', default: '100,1000,5000' },
    messages: { type: 'string', default: '1000000' },
    flags: { type: 'string', default: '' },
    keyless: { type: 'string', default: 'sticky' },
  },
});
const repos = (o.repo ?? [root]).map((r) => resolve(r));
const counts = o.partitions.split(',').map(Number);
const messages = Number(o.messages);
const size = 200;
const extra = o.flags ? o.flags.split(' ') : [];
const keylessModes = o.keyless.split(',');
console.log(JSON.stringify({ environment: environment(), repos, partitions: counts, messages, size, batchSize: 50, flags: extra, keyless: keylessModes }));

/** Whether `klog perf produce` of the checkout at `repo` takes --keyless. */
function hasKeylessFlag(repo) {
  try {
    return readFileSync(join(repo, 'tools/klog/dist/commands/perf.js'), 'utf8').includes("'--keyless ");
  } catch {
    return false;
  }
}

/** Every file under `logDir` in a directory whose name starts with `topic-`. */
function topicFiles(logDir, topic) {
  const files = [];
  for (const d of readdirSync(logDir)) {
    if (!d.startsWith(`${topic}-`)) continue;
    for (const f of readdirSync(join(logDir, d))) files.push(join(logDir, d, f));
  }
  return files;
}

/** Bytes of `files` (a file gone counts 0). */
function bytesOf(files) {
  let total = 0;
  for (const f of files) total += statSync(f, { throwIfNoEntry: false })?.size ?? 0;
  return total;
}

async function scrape(port) {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const v = (re) => Number(re.exec(text)?.[1] ?? NaN);
  return { flushes: v(/^klog_flushes_total\{result="ok"\} (\S+)/m), flushSeconds: v(/^klog_flush_duration_seconds_sum (\S+)/m) };
}

for (const p of counts) {
  for (const repo of repos) {
    const modes = hasKeylessFlag(repo) ? keylessModes : [undefined];
    for (const keyless of modes) await run(p, repo, keyless);
  }
}

/** One run: a broker of `repo` with `p` partitions, perf produce with `--keyless keyless` (undefined: without the flag). */
async function run(p, repo, keyless) {
  const b = await startBroker(repo, ['--num-partitions', String(p), '--metrics-port', '0', ...extra]);
  try {
    const metricsPort = b.metricsPort;
    const broker = `127.0.0.1:${b.port}`;
    await klogJson(repo, ['perf', 'produce', '--broker-list', broker, '--topic', 'many', '--messages', '1', '--size', String(size), '--acks', '1', '--json']);
    // The topic's files, listed once: its partitions exist now, and no segment rolls (1 GiB
    // segments, 210 MB sent), so a poll is one stat per partition, not a directory walk.
    const files = topicFiles(b.logDir, 'many');
    const want = bytesOf(files) + messages * (size + 10);
    const t0 = performance.now();
    const cpu0 = b.cpuSeconds();
    const before = metricsPort ? await scrape(metricsPort) : undefined;
    const produced = klogJson(repo, ['perf', 'produce', '--broker-list', broker, '--topic', 'many', '--messages', String(messages), '--size', String(size), '--batch-size', '50', ...(keyless ? ['--keyless', keyless] : []), '--json']);
    // Polled while perf produce runs, at least 20 ms apart and idle 4 times as long as a poll
    // took: at 5,000 partitions a poll is 5,000 stats, which must not take a core from the broker
    // being measured. The first poll that finds every byte is the end of the run.
    let storedAt;
    let failure;
    produced.catch((err) => (failure = err));
    for (;;) {
      if (failure !== undefined) throw failure;
      const polled = performance.now();
      if (bytesOf(files) >= want) {
        storedAt = performance.timeOrigin + performance.now();
        break;
      }
      await new Promise((res) => setTimeout(res, Math.max(20, 4 * (performance.now() - polled))));
    }
    const r = await produced;
    const wallSeconds = (storedAt - performance.timeOrigin - t0) / 1000;
    // A checkout whose perf produce does not report its first send is timed from its start.
    const seconds = r.startedAtMs === undefined ? wallSeconds : (storedAt - r.startedAtMs) / 1000;
    const cpu = b.cpuSeconds() - cpu0;
    const after = metricsPort ? await scrape(metricsPort) : undefined;
    const flushes = after && before ? after.flushes - before.flushes : undefined;
    const flushMeanMs = after && before && flushes ? ((after.flushSeconds - before.flushSeconds) / flushes) * 1000 : undefined;
    console.log(JSON.stringify({ repo, partitions: p, keyless: keyless ?? null, messages, seconds, msgsPerSec: messages / seconds, wallSeconds, wallMsgsPerSec: messages / wallSeconds, perfSeconds: r.seconds, brokerCpuSeconds: cpu, flushes, flushMeanMs, loadAverage: environment().loadAverage }));
  } finally {
    await b.stop();
  }
}
