/**
 * The paper's experiment side by side (docs/design.md §7): on each system in turn, klog, NATS JetStream,
 * Redis Streams, RabbitMQ and ActiveMQ, one broker on 127.0.0.1 in its own temp data dir:
 *   1. produce --messages messages of --size bytes in batches of 50 (one producer),
 *   2. measure the bytes the data dir gained per message once the broker has written them out,
 *   3. produce --batch1-messages messages in batches of 1 (to another queue/topic/stream),
 *   4. consume the messages of step 1 (one consumer),
 *   5. the end-to-end latency phase (lib/latency-phase.mjs; klog, NATS JetStream and Redis
 *      Streams): the fixed-rate probe of `klog perf latency` at each of --latency-rates msg/s
 *      for --latency-seconds s,
 * then stop the broker. `--phases throughput`, `--phases latency` run one part only;
 * `--phases replication` (lib/replication-phase.mjs; klog and NATS JetStream, not in the
 * default) runs acknowledged producers against three-node clusters of each. Prints a
 * table and writes a JSON file under bench/results/. A system that was asked for and did not
 * run (not installed, failed, out of time) is reported in a banner at the end, and the run
 * exits non-zero. Run through bench/peers/run.sh, which installs the brokers and clients first.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, lstatSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, tmpdir, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { latencyPhase, latencyTable, probeNodeFlags } from './lib/latency-phase.mjs';
import { replicationPhase, replicationTable } from './lib/replication-phase.mjs';
import * as servers from './lib/servers.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, '../..');

const { values: opt } = parseArgs({
  options: {
    messages: { type: 'string', default: '1000000' },
    'batch1-messages': { type: 'string' },
    size: { type: 'string', default: '200' },
    only: { type: 'string' },
    out: { type: 'string' },
    'phase-timeout-s': { type: 'string', default: '240' },
    'budget-s': { type: 'string', default: '840' },
    'keep-data': { type: 'boolean', default: false },
    phases: { type: 'string', default: 'throughput,latency' },
    'latency-rates': { type: 'string', default: '100,1000,10000,100000' },
    'latency-seconds': { type: 'string', default: '10' },
    'replication-messages': { type: 'string', default: '200000' },
    'replication-batch1-messages': { type: 'string' },
    zookeeper: { type: 'string', default: process.env.KLOG_ZK_CONNECT ?? '127.0.0.1:2181' },
    'baseline-tree': { type: 'string' },
  },
});
const PHASES = new Set(opt.phases.split(',').map((s) => s.trim()));
for (const p of PHASES) {
  if (p !== 'throughput' && p !== 'latency' && p !== 'replication') {
    process.stderr.write(`--phases: unknown phase ${p}; known: throughput,latency,replication\n`);
    process.exit(2);
  }
}
const LATENCY_RATES = opt['latency-rates'].split(',').map((r) => int(r.trim(), 'latency-rates'));
const LATENCY_S = int(opt['latency-seconds'], 'latency-seconds');
const N = int(opt.messages, 'messages');
const N1 = opt['batch1-messages'] !== undefined ? int(opt['batch1-messages'], 'batch1-messages') : Math.max(1, Math.round(N / 10));
const SIZE = int(opt.size, 'size');
const RN = int(opt['replication-messages'], 'replication-messages');
const RN1 = opt['replication-batch1-messages'] !== undefined ? int(opt['replication-batch1-messages'], 'replication-batch1-messages') : Math.max(1, Math.round(RN / 10));
const PHASE_TIMEOUT_S = int(opt['phase-timeout-s'], 'phase-timeout-s');
const BUDGET_S = int(opt['budget-s'], 'budget-s');
const started = Date.now();
const remainingS = () => BUDGET_S - (Date.now() - started) / 1000;

function int(s, name) {
  const n = Number(s);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, not ${s}`);
  return n;
}

/** Every system of the run, in the order run: the slowest last, so that the time budget cuts them first. */
const SYSTEMS = [
  { key: 'klog', name: 'klog', start: (w) => servers.startKlog(w, { repoRoot }), latency: true },
  { key: 'nats', name: 'NATS JetStream', deb: 'nats-server', start: servers.startNats, client: 'nats', latency: true },
  { key: 'redis', name: 'Redis Streams', deb: 'redis-server', start: servers.startRedis, client: 'redis', latency: true },
  { key: 'rabbitmq', name: 'RabbitMQ', deb: 'rabbitmq-server', start: servers.startRabbitmq, client: 'rabbitmq' },
  { key: 'activemq', name: 'ActiveMQ', deb: 'activemq', start: servers.startActivemq, client: 'activemq' },
];
const only = opt.only ? new Set(opt.only.split(',').map((s) => s.trim().toLowerCase())) : null;
for (const k of only ?? []) {
  if (!SYSTEMS.some((s) => s.key === k)) {
    process.stderr.write(`--only: unknown system ${k}; known: ${SYSTEMS.map((s) => s.key).join(',')}\n`);
    process.exit(2);
  }
}

const workDirs = new Set();
/** Client processes running (each in its own process group). */
const clientProcs = new Set();
function cleanup() {
  for (const c of clientProcs) {
    try {
      process.kill(-c.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  servers.killAll();
  if (!opt['keep-data']) for (const d of workDirs) rmSync(d, { recursive: true, force: true });
}
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    process.stderr.write(`\n${sig}: stopping the brokers\n`);
    cleanup();
    process.exit(130);
  });
}
process.on('exit', cleanup);

const log = (s) => process.stderr.write(`${s}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------

/** Bytes of every file under dir: apparent (st_size) and allocated (st_blocks × 512). */
function dirBytes(dir) {
  let apparent = 0;
  let allocated = 0;
  const walk = (d) => {
    let names;
    try {
      names = readdirSync(d);
    } catch {
      return;
    }
    for (const name of names) {
      const p = join(d, name);
      let st;
      try {
        st = lstatSync(p);
      } catch {
        continue; // removed meanwhile
      }
      if (st.isDirectory()) walk(p);
      else if (st.isFile()) {
        apparent += st.size;
        allocated += st.blocks * 512;
      }
    }
  };
  walk(dir);
  return { apparent, allocated };
}

/**
 * The data dir's size once the broker has written out what it holds: waits at least
 * minMs (every broker here flushes within a second or two), then until two readings 500 ms
 * apart agree, at most maxMs.
 */
async function settledBytes(dir, minMs = 2500, maxMs = 20000) {
  const t0 = Date.now();
  await sleep(minMs);
  let prev = dirBytes(dir);
  while (Date.now() - t0 < maxMs) {
    await sleep(500);
    const cur = dirBytes(dir);
    if (cur.apparent === prev.apparent && cur.allocated === prev.allocated) return { ...cur, settleSeconds: (Date.now() - t0) / 1000 };
    prev = cur;
  }
  return { ...prev, settleSeconds: (Date.now() - t0) / 1000, unsettled: true };
}

/**
 * Runs a command that prints one JSON object line on stdout; resolves with it. Calls onLine
 * with the parsed object as soon as it is printed. Kills the command after timeoutS. A command
 * that exits 0 without a result line fails the phase, unless expectResult is false.
 */
function runJson(cmd, args, { timeoutS, cwd, onLine, expectResult = true }) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    clientProcs.add(child);
    let out = '';
    let err = '';
    let result = null;
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
      reject(new Error(`${cmd} ${args.join(' ')}: timed out after ${timeoutS} s`));
    }, timeoutS * 1000);
    child.stdout.on('data', (d) => {
      out += d;
      let nl;
      while (result === null && (nl = out.indexOf('\n')) >= 0) {
        const line = out.slice(0, nl).trim();
        out = out.slice(nl + 1);
        if (!line.startsWith('{')) continue;
        try {
          result = JSON.parse(line);
          onLine?.(result);
        } catch {
          /* not ours */
        }
      }
    });
    child.stderr.on('data', (d) => {
      err += d;
      if (err.length > 20000) err = err.slice(-10000);
    });
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('exit', (code, signal) => {
      clientProcs.delete(child);
      clearTimeout(timer);
      if (result?.error) reject(new Error(result.error.split('\n')[0]));
      else if (code === 0 && (result || !expectResult)) resolvePromise(result ?? {});
      else if (code === 0) reject(new Error(`${cmd} ${args.join(' ')} exited 0 without printing a result${err ? `: ${err.trim().split('\n').slice(-5).join(' | ')}` : ''}`));
      else reject(new Error(`${cmd} ${args.join(' ')} exited ${code ?? signal}${err ? `: ${err.trim().split('\n').slice(-5).join(' | ')}` : ''}`));
    });
  });
}

/** The last `n` lines of a broker log that say WARN or ERROR (or name an exception), shortened. */
function brokerWarnings(file, n = 10) {
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter((l) => /\b(WARN|WARNING|ERROR|FATAL)\b|Exception|Error:/.test(l) && !/^\s+at /.test(l))
    .slice(-n)
    .map((l) => (l.length > 300 ? `${l.slice(0, 300)}…` : l));
}

const phaseTimeout = () => Math.max(10, Math.min(PHASE_TIMEOUT_S, Math.floor(remainingS())));

function peerClient(sys, srv, mode, dest, extra = []) {
  const timeoutS = phaseTimeout();
  return runJson(process.execPath, [join(here, 'clients', `${sys.client}.mjs`), mode, '--port', String(srv.port), '--dest', dest, '--size', String(SIZE), '--timeout-s', String(timeoutS), ...extra], {
    cwd: here,
    timeoutS: timeoutS + 15,
    expectResult: mode !== 'setup',
  });
}

const KLOG_MSG_BYTES = (size) => size + 10; // 4 length, 1 magic, 1 attributes, 4 CRC

/**
 * `klog perf produce` (acks 0: its clock stops once every request is written to the socket),
 * then the time until the broker's partition log holds every message, polled every 5 ms from
 * the moment perf printed its result: the reported seconds are the sum, so that klog's clock,
 * like the peers', stops when the broker has every message.
 */
async function klogProduce(srv, topic, messages, batch) {
  const bin = join(repoRoot, 'node_modules/.bin/klog');
  const args = ['perf', 'produce', '--broker-list', `127.0.0.1:${srv.port}`, '--topic', topic, '--messages', String(messages), '--size', String(SIZE), '--batch-size', String(batch), '--json'];
  if (batch === 1) args.push('--linger-ms', '0');
  const want = messages * KLOG_MSG_BYTES(SIZE);
  const dir = join(srv.dataDir, `${topic}-0`);
  let lagPromise;
  const r = await runJson(bin, args, {
    cwd: repoRoot,
    timeoutS: phaseTimeout(),
    onLine: () => {
      const t0 = process.hrtime.bigint();
      lagPromise = (async () => {
        const deadline = Date.now() + 60000;
        while (dirBytes(dir).apparent < want) {
          if (Date.now() > deadline) throw new Error(`klog log ${dir} holds ${dirBytes(dir).apparent} bytes, expected ${want}`);
          await sleep(5);
        }
        return Number(process.hrtime.bigint() - t0) / 1e9;
      })();
    },
  });
  const lag = await lagPromise;
  const seconds = r.seconds + lag;
  return { ...r, publishedSeconds: r.seconds, seconds, msgsPerSec: messages / seconds, mbPerSec: r.bytes / 2 ** 20 / seconds, batchSize: batch };
}

async function klogConsume(srv, topic, messages) {
  const bin = join(repoRoot, 'node_modules/.bin/klog');
  const r = await runJson(bin, ['perf', 'consume', '--broker', `127.0.0.1:${srv.port}`, '--topic', topic, '--messages', String(messages), '--json'], { cwd: repoRoot, timeoutS: phaseTimeout() });
  if (r.messages !== messages) throw new Error(`klog perf consume read ${r.messages} messages, expected ${messages}`);
  return r;
}

/** Creates the topic/stream of a latency probe: klog by one message, a peer by its client's setup. */
async function latencyPrepare(sys, srv, dest) {
  if (sys.client) return peerClient(sys, srv, 'setup', dest);
  const args = ['perf', 'produce', '--broker-list', `127.0.0.1:${srv.port}`, '--topic', dest, '--messages', '1', '--size', String(SIZE), '--acks', '1', '--json'];
  return runJson(join(repoRoot, 'node_modules/.bin/klog'), args, { cwd: repoRoot, timeoutS: 60 });
}

/** One fixed-rate latency probe: `klog perf latency`, or the peer's client in latency mode. */
async function latencyProbe(sys, srv, rate, dest) {
  const common = ['--rate', String(rate), '--seconds', String(LATENCY_S), '--warmup-seconds', '1', '--size', String(SIZE)];
  const timeoutS = LATENCY_S + 60;
  if (!sys.client) {
    return runJson(join(repoRoot, 'node_modules/.bin/klog'), ['perf', 'latency', '--broker', `127.0.0.1:${srv.port}`, '--topic', dest, ...common, '--json'], { cwd: repoRoot, timeoutS });
  }
  return runJson(process.execPath, [...probeNodeFlags, join(here, 'clients', `${sys.client}.mjs`), 'latency', '--port', String(srv.port), '--dest', dest, '--timeout-s', String(timeoutS), ...common], { cwd: here, timeoutS: timeoutS + 15 });
}

async function runSystem(sys) {
  const res = { system: sys.name, key: sys.key };
  if (!PHASES.has('throughput') && !sys.latency) {
    res.notInPhases = true;
    return res;
  }
  if (sys.deb && !servers.debInstalled(sys.deb)) {
    res.skipped = `Debian package ${sys.deb} is not installed (install.sh could not get it here)`;
    return res;
  }
  if (remainingS() < 30) {
    res.skipped = `time budget (--budget-s ${BUDGET_S}) used up`;
    return res;
  }
  const work = mkdtempSync(join(tmpdir(), `klog-peers-${sys.key}-`));
  workDirs.add(work);
  let srv;
  try {
    const t0 = Date.now();
    srv = await sys.start(work);
    res.version = srv.version;
    res.startSeconds = (Date.now() - t0) / 1000;
    log(`${sys.name} ${srv.version ?? ''}: listening on 127.0.0.1:${srv.port} after ${res.startSeconds.toFixed(1)} s, data in ${srv.dataDir}`);
    const listening = servers.listeningAddresses(srv.pgids);
    res.listening = [...new Set(listening.map((l) => l.address))];
    const open = listening.filter((l) => !servers.isLoopback(l.address));
    if (open.length > 0) throw new Error(`listens beyond loopback: ${open.map((l) => l.address).join(', ')}; not run`);

    if (PHASES.has('latency') && sys.latency) {
      log(`${sys.name}: end-to-end latency at ${LATENCY_RATES.join(', ')} msg/s, ${LATENCY_S} s each, ${SIZE} B messages`);
      res.latency = await latencyPhase({ rates: LATENCY_RATES, srv, prepare: (dest) => latencyPrepare(sys, srv, dest), probe: (rate, dest) => latencyProbe(sys, srv, rate, dest), log });
    }
    if (!PHASES.has('throughput')) return res;
    if (sys.client) {
      await peerClient(sys, srv, 'setup', 'bench50');
      await peerClient(sys, srv, 'setup', 'bench1');
    }
    const before = await settledBytes(srv.dataDir, 1000, 10000);

    log(`${sys.name}: produce ${N} messages of ${SIZE} B in batches of 50`);
    res.produce50 = sys.client ? await peerClient(sys, srv, 'produce', 'bench50', ['--messages', String(N), '--batch', '50']) : await klogProduce(srv, 'bench50', N, 50);
    log(`  ${fmtRate(res.produce50)}`);

    const after = await settledBytes(srv.dataDir);
    res.disk = {
      messages: N,
      before,
      after,
      bytesPerMessage: (after.allocated - before.allocated) / N,
      apparentBytesPerMessage: (after.apparent - before.apparent) / N,
      overheadPerMessage: (after.allocated - before.allocated) / N - SIZE,
    };
    log(`  disk: ${res.disk.bytesPerMessage.toFixed(1)} B/message allocated, ${res.disk.apparentBytesPerMessage.toFixed(1)} B/message apparent${after.unsettled ? ' (still changing)' : ''}`);

    log(`${sys.name}: produce ${N1} messages of ${SIZE} B in batches of 1`);
    res.produce1 = sys.client ? await peerClient(sys, srv, 'produce', 'bench1', ['--messages', String(N1), '--batch', '1']) : await klogProduce(srv, 'bench1', N1, 1);
    log(`  ${fmtRate(res.produce1)}`);

    log(`${sys.name}: consume the ${N} messages of the first run`);
    res.consume = sys.client ? await peerClient(sys, srv, 'consume', 'bench50', ['--messages', String(N)]) : await klogConsume(srv, 'bench50', N);
    log(`  ${fmtRate(res.consume)}`);
  } catch (e) {
    res.error = String(e?.message ?? e);
    log(`${sys.name}: FAILED: ${res.error}`);
    if (srv?.logFile) {
      // The broker's log goes with its temp dir: keep its last warnings and errors.
      res.brokerLog = brokerWarnings(srv.logFile);
      for (const l of res.brokerLog) log(`  broker: ${l}`);
    }
  } finally {
    if (srv) {
      const t0 = Date.now();
      await srv.stop();
      log(`${sys.name}: stopped (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    }
    if (!opt['keep-data']) {
      rmSync(work, { recursive: true, force: true });
      workDirs.delete(work);
    }
  }
  return res;
}

// ---------------------------------------------------------------------------------------------

const fmtInt = (x) => (x === undefined || x === null || !Number.isFinite(x) ? '–' : Math.round(x).toLocaleString('en-US'));
const fmt1 = (x) => (x === undefined || x === null || !Number.isFinite(x) ? '–' : x.toFixed(1));
const fmtRate = (r) =>
  `${fmtInt(r.messages)} messages in ${r.seconds.toFixed(2)} s: ${fmtInt(r.msgsPerSec)} msg/s, ${fmt1(r.mbPerSec)} MB/s` +
  (r.publishedSeconds !== undefined ? ` (the client had sent them all after ${r.publishedSeconds.toFixed(2)} s)` : '');
const ratio = (k, p) => (k && p ? `${(k / p).toFixed(1)}×` : '–');

function table(results) {
  const k = results.find((r) => r.key === 'klog');
  const lines = [];
  lines.push(`| system | produce, batches of 50: msg/s | MB/s | produce, batches of 1: msg/s | MB/s | consume: msg/s | MB/s | disk B/msg |`);
  lines.push(`|---|---|---|---|---|---|---|---|`);
  for (const r of results) {
    if (r.notInPhases || (!r.produce50 && !r.skipped && !r.error)) continue;
    if (r.skipped || (r.error && !r.produce50)) {
      lines.push(`| ${r.system} | ${r.skipped ? `skipped: ${r.skipped}` : `failed: ${r.error}`} | | | | | | |`);
      continue;
    }
    lines.push(
      `| ${r.system}${r.version ? ` ${r.version}` : ''} | ${fmtInt(r.produce50?.msgsPerSec)} | ${fmt1(r.produce50?.mbPerSec)} | ${fmtInt(r.produce1?.msgsPerSec)} | ${fmt1(r.produce1?.mbPerSec)} | ${fmtInt(r.consume?.msgsPerSec)} | ${fmt1(r.consume?.mbPerSec)} | ${fmt1(r.disk?.bytesPerMessage)} |`,
    );
  }
  if (k && !k.skipped) {
    lines.push('');
    lines.push(`| klog ÷ peer | produce, batches of 50 | produce, batches of 1 | consume | disk bytes per message (peer ÷ klog) |`);
    lines.push(`|---|---|---|---|---|`);
    for (const r of results) {
      if (r === k || r.skipped || !r.produce50) continue;
      lines.push(
        `| ${r.system} | ${ratio(k.produce50?.msgsPerSec, r.produce50?.msgsPerSec)} | ${ratio(k.produce1?.msgsPerSec, r.produce1?.msgsPerSec)} | ${ratio(k.consume?.msgsPerSec, r.consume?.msgsPerSec)} | ${ratio(r.disk?.bytesPerMessage, k.disk?.bytesPerMessage)} |`,
      );
    }
  }
  return lines.join('\n');
}

function ratios(results) {
  const k = results.find((r) => r.key === 'klog');
  if (!k) return {};
  const q = (a, b) => (a && b ? a / b : null);
  const out = {};
  for (const r of results) {
    if (r === k || r.skipped || r.notInPhases) continue;
    out[r.key] = {
      produce50: q(k.produce50?.msgsPerSec, r.produce50?.msgsPerSec),
      produce1: q(k.produce1?.msgsPerSec, r.produce1?.msgsPerSec),
      consume: q(k.consume?.msgsPerSec, r.consume?.msgsPerSec),
      diskPeerOverKlog: q(r.disk?.bytesPerMessage, k.disk?.bytesPerMessage),
    };
  }
  return out;
}

const argv = process.argv.slice(2);
if (PHASES.has('throughput') || PHASES.has('latency')) log(`side by side: ${N} messages of ${SIZE} B in batches of 50, ${N1} in batches of 1, then ${N} consumed; per phase at most ${PHASE_TIMEOUT_S} s, in all at most ${BUDGET_S} s`);
const loadStart = loadavg();
const results = [];
for (const sys of PHASES.has('throughput') || PHASES.has('latency') ? SYSTEMS : []) {
  if (only && !only.has(sys.key)) continue;
  const r = await runSystem(sys);
  if (r.skipped) log(`${sys.name}: skipped: ${r.skipped}`);
  results.push(r);
}
let replication;
if (PHASES.has('replication')) {
  const keys = new Set(['klog', 'nats'].filter((k) => !only || only.has(k)));
  if (keys.has('nats') && !servers.debInstalled('nats-server')) {
    keys.delete('nats');
    results.push({ system: 'NATS JetStream', key: 'nats', skipped: 'Debian package nats-server is not installed (install.sh could not get it here)' });
  }
  log(`replication: ${RN} messages of ${SIZE} B in batches of 50, ${RN1} in batches of 1, acknowledged, per run; ${[...keys].join(', ')}`);
  replication = await replicationPhase(keys, { repoRoot, here, messages: RN, batch1Messages: RN1, size: SIZE, zookeeper: opt.zookeeper, baselineTree: opt['baseline-tree'] && resolve(opt['baseline-tree']), keepData: opt['keep-data'], runJson, phaseTimeout, log });
  for (const s of replication.systems) if (s.error) results.push({ system: `${s.system} (replication)`, key: s.key, error: s.error });
}
const doc = {
  command: `bash bench/peers/run.sh${argv.length ? ` ${argv.join(' ')}` : ''}`,
  date: new Date().toISOString(),
  machine: { cpus: cpus().length, cpuModel: cpus()[0]?.model, memoryGiB: Math.round(totalmem() / 2 ** 30), kernel: release(), node: process.version, loadavgAtStart: loadStart, loadavgAtEnd: loadavg() },
  install: process.env.KLOG_PEERS_INSTALL ? JSON.parse(process.env.KLOG_PEERS_INSTALL) : undefined,
  settings: { messages: N, batch1Messages: N1, replicationMessages: RN, replicationBatch1Messages: RN1, size: SIZE, mb: '2^20 bytes', phaseTimeoutS: PHASE_TIMEOUT_S, budgetS: BUDGET_S, phases: [...PHASES], latencyRates: LATENCY_RATES, latencySeconds: LATENCY_S },
  seconds: (Date.now() - started) / 1000,
  results,
  replication,
  klogRatio: ratios(results),
};
const resultsDir = join(repoRoot, 'bench/results');
mkdirSync(resultsDir, { recursive: true });
const outFile = opt.out ? resolve(opt.out) : join(resultsDir, `peers-${doc.date.replace(/[:.]/g, '-')}.json`);
writeFileSync(outFile, `${JSON.stringify(doc, null, 2)}\n`);
if (PHASES.has('throughput')) {
  process.stdout.write(`\n${table(results)}\n\n`);
  process.stdout.write(`msg/s until the broker holds every message (produce) or the consumer has read every one (consume); MB = 2^20 bytes of payload; disk = bytes the data dir gained per message (allocated blocks).\n`);
}
if (PHASES.has('latency')) process.stdout.write(`\n${latencyTable(results, LATENCY_RATES)}\n\nlatency: send→consume of ${SIZE} B messages at a fixed rate, producer and consumer in one process, ${LATENCY_S} s per rate after 1 s of warm-up.\n`);
if (replication) process.stdout.write(`\nreplication (load average ${loadStart.map((x) => x.toFixed(1)).join(' ')} at the start, ${doc.machine.loadavgAtEnd.map((x) => x.toFixed(1)).join(' ')} at the end; ${cpus().length} cores):\n\n${replicationTable(replication, SIZE)}\n\nmsg/s until the producer has every acknowledgement (klog perf produce; NATS: PubAcks); MB = 2^20 bytes of payload; cluster CPU = CPU time of the cluster's processes while the producer ran ÷ the producer's seconds (% of one core); load avg = 1-minute load average at the run's start.\n`);
process.stdout.write(`${doc.seconds.toFixed(0)} s in all; results in ${outFile}\n`);
cleanup();
// A benchmark whose peers did not run says so where it cannot be missed, and fails.
const missed = results.filter((r) => r.skipped || r.error || r.latency?.some((l) => l.error));
if (missed.length > 0) {
  const bar = '!'.repeat(78);
  const lines = missed.map((r) => `  ${r.system}: ${r.skipped ? `did not run: ${r.skipped}` : r.error ? `failed: ${r.error}` : `latency failed at ${r.latency.filter((l) => l.error).map((l) => l.rate).join(', ')} msg/s`}`);
  const banner = `\n${bar}\n!! INCOMPLETE: ${missed.length} of the systems asked for did not run in full; this is not a comparison\n${lines.join('\n')}\n${bar}\n`;
  process.stderr.write(banner);
  process.stdout.write(banner);
  process.exit(1);
}
process.exit(0);
