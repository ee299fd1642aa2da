/**
 * The end-to-end latency phase of bench/peers (docs/benchmarks.md, "Latency"): on one running
 * system, the fixed-rate probe of `klog perf latency` at each rate of --latency-rates, one
 * after another, each to a fresh topic/stream/subject: a producer stamps each message with its
 * send time, a consumer in the same process (klog: a long poll at the log end; NATS JetStream:
 * an ordered consumer; Redis Streams: XREAD BLOCK) takes the age of each message as it arrives.
 * Also the CPU time the broker's processes used during each rate (from /proc, as a share of
 * one core).
 */
import { readdirSync, readFileSync } from 'node:fs';

/**
 * The Node flags `klog` runs with (its command's `#!/usr/bin/env -S node ...` line): a peer's
 * latency probe runs with them too, so every system's probe process collects garbage alike.
 */
export const probeNodeFlags = readFileSync(new URL('../../../tools/klog/bin/klog.js', import.meta.url), 'utf8')
  .split('\n')[0]
  .split(/\s+/)
  .filter((a) => a.startsWith('--'));

/** CPU seconds (user + system) of every process in the process groups `pgids`, from /proc. */
export function groupCpuSeconds(pgids) {
  const groups = new Set(pgids);
  let ticks = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (groups.has(Number(f[2]))) ticks += Number(f[11]) + Number(f[12]); // pgrp; utime, stime
  }
  return ticks / 100; // USER_HZ
}

/**
 * Runs the probe at each rate. `prepare(dest)` creates the topic/stream (not timed, its CPU not
 * counted); `probe(rate, dest)` runs one (klog perf latency, or a peer client in latency mode)
 * and resolves with its JSON result.
 * @returns one result per rate, with `brokerCpuPercentOfCore` added
 */
export async function latencyPhase({ rates, srv, prepare, probe, log }) {
  const out = [];
  for (const rate of rates) {
    const dest = `lat${rate}`;
    await prepare(dest);
    const cpu0 = groupCpuSeconds(srv.pgids);
    const t0 = performance.now();
    try {
      const r = await probe(rate, dest);
      const wall = (performance.now() - t0) / 1000;
      const brokerCpuPercentOfCore = ((groupCpuSeconds(srv.pgids) - cpu0) / wall) * 100;
      out.push({ ...r, brokerCpuPercentOfCore, wallSeconds: wall });
      log(`  latency at ${rate} msg/s: p50 ${r.p50Ms.toFixed(2)} ms, p99 ${r.p99Ms.toFixed(2)} ms, p99.9 ${r.p999Ms.toFixed(2)} ms, max ${r.maxMs.toFixed(2)} ms (sent at ${Math.round(r.sendRate)} msg/s, broker CPU ${brokerCpuPercentOfCore.toFixed(1)} % of a core)`);
    } catch (e) {
      out.push({ rate, error: String(e?.message ?? e) });
      log(`  latency at ${rate} msg/s: FAILED: ${String(e?.message ?? e)}`);
    }
  }
  return out;
}

const ms = (x) => (x === undefined || !Number.isFinite(x) ? '–' : x.toFixed(2));

/** The latency tables: p99 per rate and system, then every percentile. */
export function latencyTable(results, rates) {
  const withLatency = results.filter((r) => r.latency);
  if (withLatency.length === 0) return '';
  const lines = [`| system | ${rates.map((r) => `p99 ms at ${r.toLocaleString('en-US')} msg/s`).join(' | ')} |`, `|---|${rates.map(() => '---').join('|')}|`];
  for (const r of withLatency) lines.push(`| ${r.system} | ${rates.map((rate) => cell(r.latency.find((l) => l.rate === rate))).join(' | ')} |`);
  lines.push('', '| system | rate msg/s | sent msg/s | p50 ms | p95 ms | p99 ms | p99.9 ms | max ms | broker CPU % of a core |', '|---|---|---|---|---|---|---|---|---|');
  for (const r of withLatency) {
    for (const l of r.latency) {
      if (l.error) lines.push(`| ${r.system} | ${l.rate} | failed: ${l.error} | | | | | | |`);
      else lines.push(`| ${r.system} | ${l.rate} | ${Math.round(l.sendRate)} | ${ms(l.p50Ms)} | ${ms(l.p95Ms)} | ${ms(l.p99Ms)} | ${ms(l.p999Ms)} | ${ms(l.maxMs)} | ${l.brokerCpuPercentOfCore.toFixed(1)} |`);
    }
  }
  return lines.join('\n');
}

const cell = (l) => (l === undefined ? '–' : l.error ? 'failed' : ms(l.p99Ms));
