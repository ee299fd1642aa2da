/**
 * The replication phase of bench/peers (README.md, "Replication"; docs/benchmarks.md): one
 * producer of acknowledged sends against three-node clusters on this machine, one run after
 * another, each to a topic/stream of its own:
 *   - klog (three brokers over ZooKeeper, lib/clusters.mjs): `klog perf produce --acks all` and
 *     `--acks 1` to a topic of replication factor 3 with min.insync.replicas 2, and the same to
 *     a topic of replication factor 1 (the baseline), each with --batch-size 50 and 1;
 *   - NATS JetStream (three clustered nats-servers): a stream of 3 replicas, file storage,
 *     JetStream publishes with acks (clients/nats.mjs `produce --acks`), batches of 50 and 1,
 *     pipelined as klog's producer is (at most 8,000 messages unacknowledged) and one batch at a
 *     time (batches of 1: synchronous publishes).
 * With `baselineTree`, a second klog cluster runs the same from another built checkout, each of
 * its runs right before the same run of this checkout (before/after side by side). Every run
 * also records the CPU the cluster's processes used (from /proc, % of one core) and the load
 * average at its start. A cluster that does not start, or a run that fails, is an error of
 * that system (the caller's banner reports it).
 */
import { randomBytes } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { startKlogCluster, startNatsCluster, zookeeperFor } from './clusters.mjs';
import { groupCpuSeconds } from './latency-phase.mjs';

const run = promisify(execFile);

/** Messages a pipelined producer leaves unacknowledged at most (klog perf produce's bound, tools/klog/src/commands/perf-produce.ts). */
export const PIPELINE_IN_FLIGHT = 8000;

/** Messages of the warm-up run of each cluster. */
const WARMUP_MESSAGES = 10000;

/** The klog runs, in order: replication factor, acks. */
const KLOG_RUNS = [
  { rf: 1, acks: '1' },
  { rf: 1, acks: 'all' },
  { rf: 3, acks: '1' },
  { rf: 3, acks: 'all' },
];
/** The NATS runs: how many messages may be unacknowledged (null: PIPELINE_IN_FLIGHT; 'batch': one batch at a time). */
const NATS_RUNS = [
  { inFlight: null, label: `pipelined (≤ ${PIPELINE_IN_FLIGHT.toLocaleString('en-US')} unacknowledged)` },
  { inFlight: 'batch', label: 'one batch at a time (batches of 1: synchronous)' },
];

/**
 * Runs the phase. `systems`: the keys asked for ('klog', 'nats'); `opts`: { repoRoot, here,
 * messages (batches of 50), batch1Messages, size, zookeeper (host:port), baselineTree?,
 * keepData, runJson, phaseTimeout(), log }.
 * @returns `{ systems: [{ key, system, version, error? }], rows: [{ key, system, label, rf?,
 *   acks?, batch, result?, error?, cpuPercentOfCore, loadavg }] }`
 */
export async function replicationPhase(systems, opts) {
  const { log } = opts;
  const work = mkdtempSync(join(tmpdir(), 'klog-peers-replication-'));
  const clusters = [];
  const out = { systems: [], rows: [] };
  let zk;
  try {
    if (systems.has('klog')) {
      const trees = opts.baselineTree ? [{ key: 'klog-baseline', root: opts.baselineTree }, { key: 'klog', root: opts.repoRoot }] : [{ key: 'klog', root: opts.repoRoot }];
      for (const t of trees) {
        const sys = { key: t.key, system: 'klog' };
        out.systems.push(sys);
        try {
          zk ??= await zookeeperFor(work, opts);
          const chroot = `/klog-bench-${randomBytes(4).toString('hex')}`;
          const dir = mkdtempSync(join(work, `${t.key}-`));
          const c = await startKlogCluster(dir, { repoRoot: t.root, zk, chroot });
          sys.version = c.version;
          sys.system = `klog ${c.version ?? ''}`.trim();
          sys.zookeeper = c.zookeeper;
          log(`${sys.system}: 3 brokers on ${c.brokerList}, ZooKeeper ${c.zookeeper}${zk.started ? ' (started for this run)' : ''}`);
          clusters.push({ ...t, sys, c });
        } catch (e) {
          sys.error = `cluster did not start: ${e.message}`;
          log(`${sys.system}: FAILED: ${sys.error}`);
        }
      }
    }
    if (systems.has('nats')) {
      const sys = { key: 'nats', system: 'NATS JetStream' };
      out.systems.push(sys);
      try {
        const c = await startNatsCluster(mkdtempSync(join(work, 'nats-')));
        sys.version = c.version;
        sys.system = `NATS JetStream ${c.version}`;
        log(`${sys.system}: 3 servers on 127.0.0.1:${c.ports.join(',')}`);
        clusters.push({ key: 'nats', sys, c });
      } catch (e) {
        sys.error = `cluster did not start: ${e.message}`;
        log(`NATS JetStream: FAILED: ${sys.error}`);
      }
    }
    // Warm-up (not reported): one run per cluster, so that the first measured run does not pay
    // for the brokers' JIT compilation and first connections.
    for (const cl of clusters) {
      const warm = { rf: 3, acks: '1', inFlight: null, label: 'warm-up', warmup: true };
      const row = await (cl.key === 'nats' ? natsRun(cl, warm, 50, WARMUP_MESSAGES, opts) : klogRun(cl, warm, 50, WARMUP_MESSAGES, opts));
      if (row.error) cl.sys.error ??= `warm-up: ${row.error}`;
    }
    for (const batch of [50, 1]) {
      const messages = batch === 50 ? opts.messages : opts.batch1Messages;
      const jobs = [];
      for (const r of KLOG_RUNS) for (const cl of clusters.filter((x) => x.key !== 'nats')) jobs.push(() => klogRun(cl, r, batch, messages, opts));
      for (const r of NATS_RUNS) for (const cl of clusters.filter((x) => x.key === 'nats')) jobs.push(() => natsRun(cl, r, batch, messages, opts));
      for (const job of jobs) {
        const row = await job();
        out.rows.push(row);
        if (row.error && !row.sys.error) row.sys.error = row.error;
      }
    }
  } finally {
    for (const { c } of clusters) await c.stop();
    await zk?.stop();
    if (!opts.keepData) rmSync(work, { recursive: true, force: true });
  }
  for (const row of out.rows) delete row.sys;
  return out;
}

/**
 * Runs `prepare` (not measured), then `job` on cluster `cl`, timing the CPU its processes use
 * while `job` runs; a failure of either becomes the row's error.
 */
async function measured(cl, row, prepare, job, log) {
  try {
    await prepare();
    row.loadavg = loadavg();
    const cpu0 = groupCpuSeconds(cl.c.pgids);
    const t0 = performance.now();
    row.result = await job();
    if (row.warmup) return row;
    row.wallSeconds = (performance.now() - t0) / 1000;
    // Over the producer's own clock: the client's start-up (in the wall time) leaves the cluster idle.
    row.cpuPercentOfCore = ((groupCpuSeconds(cl.c.pgids) - cpu0) / row.result.seconds) * 100;
    log(`  ${row.system}, ${row.label}, batches of ${row.batch}: ${Math.round(row.result.msgsPerSec).toLocaleString('en-US')} msg/s (cluster CPU ${row.cpuPercentOfCore.toFixed(0)} % of a core, load ${row.loadavg[0].toFixed(1)})`);
  } catch (e) {
    row.loadavg ??= loadavg();
    row.error = String(e?.message ?? e);
    log(`  ${row.system}, ${row.label}, batches of ${row.batch}: FAILED: ${row.error}`);
  }
  return row;
}

async function klogRun(cl, r, batch, messages, opts) {
  const bin = join(cl.root, 'node_modules/.bin/klog');
  const topic = r.warmup ? 'warmup' : `rf${r.rf}-acks${r.acks}-b${batch}`;
  const row = { warmup: r.warmup, key: cl.key, sys: cl.sys, system: cl.sys.system, label: `RF ${r.rf}${r.rf > 1 ? ', min ISR 2' : ''}, acks ${r.acks}`, rf: r.rf, acks: r.acks, batch, messages };
  const zkArgs = ['--zookeeper', cl.c.zookeeper];
  return measured(
    cl,
    row,
    async () => {
      const create = ['topics', ...zkArgs, '--create', '--topic', topic, '--partitions', '1', '--replication-factor', String(r.rf), '--timeout-ms', '60000'];
      if (r.rf > 1) create.push('--min-insync-replicas', '2');
      await run(bin, create, { cwd: cl.root, timeout: 90000 }).catch((e) => {
        throw new Error(`klog topics --create ${topic}: ${String(e.stderr || e.message).trim().split('\n').slice(-2).join(' | ')}`);
      });
      await waitForFullIsr(bin, zkArgs, topic, r.rf, cl.root);
    },
    async () => {
      const args = ['perf', 'produce', '--broker-list', cl.c.brokerList, '--topic', topic, '--messages', String(messages), '--size', String(opts.size), '--batch-size', String(batch), '--acks', r.acks, '--json'];
      if (batch === 1) args.push('--linger-ms', '0');
      const res = await opts.runJson(bin, args, { cwd: cl.root, timeoutS: opts.phaseTimeout() });
      if (res.messages !== messages) throw new Error(`klog perf produce acknowledged ${res.messages} of ${messages} messages`);
      return res;
    },
    opts.log,
  );
}

/** Waits (at most 60 s) until the topic's one partition has a leader and an ISR of `rf` brokers (`klog topics --describe --json`). */
async function waitForFullIsr(bin, zkArgs, topic, rf, cwd) {
  const deadline = Date.now() + 60000;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const { stdout } = await run(bin, ['topics', ...zkArgs, '--describe', topic, '--json'], { cwd, timeout: 30000 });
      last = stdout.trim();
      const d = JSON.parse(last);
      const parts = (Array.isArray(d) ? d : (d.topics ?? [d])).flatMap((t) => t.partitions ?? []);
      if (parts.length > 0 && parts.every((p) => p.leader !== undefined && p.leader !== null && p.leader >= 0 && (p.isr?.length ?? 0) === rf)) return;
    } catch (e) {
      last = String(e.stderr || e.message);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`topic ${topic}: no leader with an ISR of ${rf} after 60 s: ${last.slice(0, 300)}`);
}

async function natsRun(cl, r, batch, messages, opts) {
  const stream = r.warmup ? 'warmup' : `r3${r.inFlight === 'batch' ? 'one' : 'pipe'}b${batch}`;
  const inFlight = r.inFlight === 'batch' ? batch : PIPELINE_IN_FLIGHT;
  const row = { warmup: r.warmup, key: 'nats', sys: cl.sys, system: cl.sys.system, label: `R3, ${r.label}`, replicas: 3, maxInFlight: inFlight, batch, messages };
  const client = join(opts.here, 'clients', 'nats.mjs');
  const base = ['--port', String(cl.c.port), '--dest', stream, '--size', String(opts.size)];
  return measured(
    cl,
    row,
    async () => {
      await opts.runJson(process.execPath, [client, 'setup', ...base, '--replicas', '3', '--timeout-s', '60'], { cwd: opts.here, timeoutS: 75, expectResult: false });
    },
    async () => {
      const t = opts.phaseTimeout();
      return opts.runJson(process.execPath, [client, 'produce', ...base, '--acks', '--messages', String(messages), '--batch', String(batch), '--max-in-flight', String(inFlight), '--timeout-s', String(t)], { cwd: opts.here, timeoutS: t + 15 });
    },
    opts.log,
  );
}

const fmtInt = (x) => (x === undefined || x === null || !Number.isFinite(x) ? '–' : Math.round(x).toLocaleString('en-US'));

/**
 * The phase's tables: every run's msg/s, MB/s, cluster CPU and load average; then the goals of
 * docs/benchmarks.md ("Replication"): klog RF 3 acks all against NATS JetStream R3 (the faster
 * of its two ways) and against klog's RF 1 (acks all and acks 1), per batch size and klog tree.
 */
export function replicationTable(out, size) {
  const lines = ['| system | run | batch | messages | msg/s | MB/s | cluster CPU % of a core | load avg |', '|---|---|---|---|---|---|---|---|'];
  for (const r of out.rows) {
    if (r.error) lines.push(`| ${r.system} | ${r.label} | ${r.batch} | ${fmtInt(r.messages)} | failed: ${r.error.slice(0, 200)} | | | ${r.loadavg?.[0].toFixed(1) ?? ''} |`);
    else lines.push(`| ${r.system} | ${r.label} | ${r.batch} | ${fmtInt(r.messages)} | ${fmtInt(r.result.msgsPerSec)} | ${((r.result.msgsPerSec * size) / 2 ** 20).toFixed(1)} | ${r.cpuPercentOfCore.toFixed(0)} | ${r.loadavg[0].toFixed(1)} |`);
  }
  for (const s of out.systems) if (s.error && !out.rows.some((r) => r.key === s.key)) lines.push(`| ${s.system} | failed: ${s.error.slice(0, 200)} | | | | | | |`);
  const rate = (key, pred) => out.rows.find((r) => r.key === key && !r.error && pred(r))?.result.msgsPerSec;
  const goals = ['', '| klog | batch | RF 3 acks all ÷ NATS R3 (goal ≥ 2×) | RF 3 acks all ÷ RF 1 acks all (goal ≥ 40 %) | RF 3 acks all ÷ RF 1 acks 1 | RF 3 acks 1 ÷ RF 1 acks 1 |', '|---|---|---|---|---|---|'];
  const pct = (a, b) => (a && b ? `${((a / b) * 100).toFixed(0)} %` : '–');
  for (const s of out.systems.filter((x) => x.key.startsWith('klog'))) {
    for (const batch of [50, 1]) {
      const k = (rf, acks) => rate(s.key, (r) => r.rf === rf && r.acks === acks && r.batch === batch);
      const nats = Math.max(...out.rows.filter((r) => r.key === 'nats' && !r.error && r.batch === batch).map((r) => r.result.msgsPerSec), 0) || undefined;
      const x = k(3, 'all');
      goals.push(`| ${s.system} | ${batch} | ${x && nats ? `${(x / nats).toFixed(2)}× ${x / nats >= 2 ? '(met)' : '(not met)'}` : '–'} | ${pct(x, k(1, 'all'))}${x && k(1, 'all') ? (x / k(1, 'all') >= 0.4 ? ' (met)' : ' (not met)') : ''} | ${pct(x, k(1, '1'))} | ${pct(k(3, '1'), k(1, '1'))} |`);
    }
  }
  return [...lines, ...goals].join('\n');
}
