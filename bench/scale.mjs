#!/usr/bin/env node
/**
 * Scale and memory benchmark (not a test): does one broker keep its rate and its memory as a
 * partition grows to many GiB?
 *
 *   node bench/scale.mjs [--gib 10] [--size 200] [--batch-size 50]
 *
 * Needs a build (`npm run setup`) and about 1.1 × --gib GiB of free disk in the temp dir (checked
 * first). Starts one `klog-broker` (node_modules/.bin/klog-broker, default settings, `--port 0`,
 * a temp log dir; the port is read from its "broker listening" log line), then:
 *
 * 1. produce: a @klog/client Producer in this process sends --gib GiB of payload (2^30 bytes
 *    per GiB: ceil(2^30 / size) messages of --size random bytes each) to partition 0 of one
 *    topic, in batches of --batch-size, fire-and-forget (acks 0, as `klog perf produce` and the
 *    paper's producers), 1000 records per send() call, at most 8 calls in flight. The clock of a
 *    GiB stops when its last send() resolved (the requests are written to the socket; TCP flow
 *    control keeps the producer within a socket buffer of the broker). After the last GiB it
 *    waits until the broker's log end (OFFSETS latest) holds every message ("drain").
 * 2. consume: a SimpleConsumer reads the whole partition from offset 0 to that log end with
 *    back-to-back 1 MiB FETCH requests (messages parsed and CRC-checked by the client). A GiB
 *    ends at the fetch that brings the messages read to that GiB's share (ceil(2^30 / size)
 *    each), so its figures count the messages of whole fetches.
 *
 * A worker thread samples the broker's /proc/<pid>/status every 200 ms (VmRSS, and VmHWM, the
 * kernel's own peak RSS; RssAnon and RssFile, what the RSS is made of) through both phases, and
 * /proc/<pid>/stat for its CPU time.
 *
 * Prints one JSON line per GiB and phase (messages, seconds, msg/s, MB/s with MB = 2^20 bytes,
 * broker CPU seconds, broker RSS now and at its peak within the GiB, VmHWM, RssAnon and RssFile
 * now, the machine's 1-minute load average),
 * then a summary JSON line: per phase the rate of the last GiB over the first (target: ≥ 0.9)
 * and the broker's peak RSS (target: ≤ 150 MB). Deletes its temp dir at the end (also after a
 * failure or SIGINT).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readlinkSync, rmSync, statfsSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { Producer, SimpleConsumer } = await import(join(root, 'packages/client/dist/index.js'));
const brokerBin = join(root, 'node_modules/.bin/klog-broker');

const { values: opts } = parseArgs({
  options: {
    gib: { type: 'string', default: '10' },
    size: { type: 'string', default: '200' },
    'batch-size': { type: 'string', default: '50' },
  },
});
const gib = Number(opts.gib);
const size = Number(opts.size);
const batchSize = Number(opts['batch-size']);
for (const [name, v] of [['--gib', gib], ['--size', size], ['--batch-size', batchSize]]) {
  if (!Number.isInteger(v) || v < 1) {
    process.stderr.write(`${name} must be a positive integer\n`);
    process.exit(2);
  }
}
const GiB = 2 ** 30;
const MiB = 2 ** 20;
/** Bytes a message takes in the log: 4 length, 1 magic, 1 attributes, 4 CRC, then the payload. */
const onDisk = size + 10;
const messagesPerGiB = Math.ceil(GiB / size);
const totalMessages = gib * messagesPerGiB;
const logBytes = totalMessages * onDisk;
const topic = 'scale';
const recordsPerSend = 1000;
const sendWindow = 8;
const fetchBytes = MiB;
const sampleMs = 200;
const rssTargetMB = 150;
const rateTarget = 0.9;

// Free disk first: the log, plus 5 % and 1 GiB to spare.
const work0 = tmpdir();
const fs0 = statfsSync(work0);
const free = fs0.bavail * fs0.bsize;
const needed = Math.ceil(logBytes * 1.05) + GiB;
if (free < needed) {
  process.stderr.write(`not enough free disk in ${work0}: ${(free / GiB).toFixed(1)} GiB free, ${(needed / GiB).toFixed(1)} GiB needed\n`);
  process.exit(1);
}

const work = mkdtempSync(join(work0, 'klog-scale-'));
let broker;
let sampler;
/** Set once the run is over: the broker's exit is then expected. */
let stopping = false;
const cleanUp = () => {
  try {
    broker?.kill('SIGKILL');
  } catch {}
  rmSync(work, { recursive: true, force: true });
};
process.on('exit', cleanUp);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    process.stderr.write(`${signal}: stopping, removing ${work}\n`);
    process.exit(130);
  });
}

const info = (line) => process.stderr.write(`${line}\n`);
info(
  `scale: ${gib} GiB of payload = ${totalMessages.toLocaleString('en-US')} messages of ${size} B in batches of ${batchSize}, ` +
    `${(logBytes / GiB).toFixed(2)} GiB of log; ${(free / GiB).toFixed(1)} GiB free in ${work0}; node ${process.version}`,
);

// --- the broker ---------------------------------------------------------------------------------
broker = spawn(brokerBin, ['--port', '0', '--log-dir', join(work, 'logs')], { stdio: ['ignore', 'pipe', 'pipe'] });
const brokerTail = [];
const keepTail = (l) => {
  brokerTail.push(l);
  if (brokerTail.length > 20) brokerTail.shift();
};
createInterface({ input: broker.stderr }).on('line', keepTail);
const listening = await new Promise((resolve, reject) => {
  createInterface({ input: broker.stdout }).on('line', (l) => {
    keepTail(l);
    try {
      const e = JSON.parse(l);
      if (e.msg === 'broker listening') resolve(e);
    } catch {}
  });
  broker.on('exit', (code, signal) => reject(new Error(`broker exited (${code ?? signal}): ${brokerTail.join('\n')}`)));
});
const pid = broker.pid;
// The bin is a shell script that execs node: the pid must be node's by now.
const exe = readlinkSync(`/proc/${pid}/exe`);
if (!/node/.test(exe)) throw new Error(`broker pid ${pid} runs ${exe}, not node`);
const port = listening.port;
let brokerExited = false;
broker.on('exit', (code, signal) => {
  brokerExited = true;
  if (!stopping) {
    info(`broker exited during the run (${code ?? signal}); its last lines:\n${brokerTail.join('\n')}`);
    process.exit(1);
  }
});
info(`broker pid ${pid} listening on 127.0.0.1:${port}, log dir ${join(work, 'logs')}`);

// --- the memory sampler: a worker thread, so a busy event loop here does not delay its samples ---
// Slots (KiB, Int32): 0 VmRSS now, 1 peak VmRSS since the last take, 2 peak VmRSS of the phase,
// 3 VmHWM, 4 samples taken, 5 broker CPU time in clock ticks, 6 RssAnon now, 7 RssFile now.
const shared = new Int32Array(new SharedArrayBuffer(8 * 4));
sampler = new Worker(
  `
  const { workerData } = require('node:worker_threads');
  const { readFileSync } = require('node:fs');
  const s = workerData.shared;
  const kib = (text, field) => Number((new RegExp('^' + field + ':\\\\s+(\\\\d+) kB', 'm').exec(text) || [])[1] || 0);
  const sample = () => {
    let status, stat;
    try {
      status = readFileSync('/proc/' + workerData.pid + '/status', 'utf8');
      stat = readFileSync('/proc/' + workerData.pid + '/stat', 'utf8').split(') ')[1].split(' ');
    } catch { return; }
    const rss = kib(status, 'VmRSS');
    Atomics.store(s, 0, rss);
    if (rss > Atomics.load(s, 1)) Atomics.store(s, 1, rss);
    if (rss > Atomics.load(s, 2)) Atomics.store(s, 2, rss);
    Atomics.store(s, 3, kib(status, 'VmHWM'));
    Atomics.add(s, 4, 1);
    Atomics.store(s, 5, Number(stat[11]) + Number(stat[12]));
    Atomics.store(s, 6, kib(status, 'RssAnon'));
    Atomics.store(s, 7, kib(status, 'RssFile'));
  };
  sample();
  setInterval(sample, workerData.sampleMs);
  `,
  { eval: true, workerData: { shared, pid, sampleMs } },
);
sampler.unref();
const clockTicks = 100; // USER_HZ on Linux
const rssMiB = (kib) => +(kib / 1024).toFixed(1);
/** Reads the sampler: RSS now, peak since the last take (then restarts it), VmHWM, CPU seconds. */
const takeMemory = () => {
  const peak = Atomics.exchange(shared, 1, Atomics.load(shared, 0));
  return { now: Atomics.load(shared, 0), peak, hwm: Atomics.load(shared, 3), cpu: Atomics.load(shared, 5) / clockTicks, anon: Atomics.load(shared, 6), file: Atomics.load(shared, 7) };
};
// Wait for the first sample.
while (Atomics.load(shared, 4) === 0) await new Promise((r) => setTimeout(r, 10));
const idle = takeMemory();
info(`broker idle: VmRSS ${rssMiB(idle.now)} MiB, VmHWM ${rssMiB(idle.hwm)} MiB`);

/** One GiB of a phase: figures and memory, printed as a JSON line. */
function report(phase, index, messages, payloadBytes, seconds, cpuBefore) {
  const m = takeMemory();
  const r = {
    phase,
    gib: index,
    messages,
    seconds: +seconds.toFixed(3),
    msgsPerSec: Math.round(messages / seconds),
    mbPerSec: +(payloadBytes / MiB / seconds).toFixed(1),
    brokerCpuSec: +(m.cpu - cpuBefore).toFixed(2),
    brokerRssMiB: rssMiB(m.now),
    brokerPeakRssMiB: rssMiB(m.peak),
    brokerHwmMiB: rssMiB(m.hwm),
    brokerRssAnonMiB: rssMiB(m.anon),
    brokerRssFileMiB: rssMiB(m.file),
    load1: +loadavg()[0].toFixed(2),
  };
  console.log(JSON.stringify(r));
  return { ...r, cpuNow: m.cpu };
}

// --- phase 1: produce ---------------------------------------------------------------------------
const producer = new Producer({ brokerList: `127.0.0.1:${port}`, batchSize, lingerMs: 5, acks: 0 });
const payload = randomBytes(size);
const records = Array.from({ length: recordsPerSend }, () => ({ value: payload, partition: 0 }));
await producer.partitionCount(topic);
Atomics.store(shared, 2, Atomics.load(shared, 0));
const produced = [];
let cpuMark = takeMemory().cpu;
const produceStart = process.hrtime.bigint();
let sliceStart = produceStart;
let sent = 0;
let done = 0;
const window = [];
for (let g = 1; g <= gib; g++) {
  const boundary = g * messagesPerGiB;
  while (sent < boundary) {
    const n = Math.min(recordsPerSend, boundary - sent);
    const p = producer.send(topic, n === recordsPerSend ? records : records.slice(0, n));
    p.catch(() => {});
    window.push({ p, n });
    sent += n;
    if (window.length >= sendWindow) {
      const w = window.shift();
      await w.p;
      done += w.n;
    }
  }
  for (const w of window.splice(0)) {
    await w.p;
    done += w.n;
  }
  const now = process.hrtime.bigint();
  const r = report('produce', g, messagesPerGiB, messagesPerGiB * size, Number(now - sliceStart) / 1e9, cpuMark);
  cpuMark = r.cpuNow;
  produced.push(r);
  sliceStart = now;
}
await producer.flush();
const producedAt = process.hrtime.bigint();
// Drain: until the broker's log holds every message.
const checker = new SimpleConsumer({ host: '127.0.0.1', port });
let end = 0;
while ((end = await checker.latestOffset(topic, 0)) < logBytes) await new Promise((r) => setTimeout(r, 50));
const drainedAt = process.hrtime.bigint();
await checker.close();
await producer.close();
const producePhasePeak = Atomics.load(shared, 2);
if (end !== logBytes) throw new Error(`log end ${end}, expected ${logBytes}`);
const produceSeconds = Number(producedAt - produceStart) / 1e9;
const drainSeconds = Number(drainedAt - producedAt) / 1e9;
info(`produce: ${totalMessages} messages in ${produceSeconds.toFixed(1)} s, log end ${end} reached ${drainSeconds.toFixed(2)} s after the last send`);

// --- phase 2: consume ---------------------------------------------------------------------------
const consumer = new SimpleConsumer({ host: '127.0.0.1', port, maxFetchBytes: fetchBytes });
Atomics.store(shared, 2, Atomics.load(shared, 0));
const consumed = [];
cpuMark = takeMemory().cpu;
const consumeStart = process.hrtime.bigint();
sliceStart = consumeStart;
let offset = 0;
let messages = 0;
let payloadBytes = 0;
let sliceMessages = 0;
let slicePayload = 0;
let g = 1;
while (offset < end) {
  const r = await consumer.fetch({ topic, partition: 0, offset, maxBytes: fetchBytes });
  if (r.messages.length === 0) throw new Error(`empty fetch at ${offset} before the log end ${end}`);
  for (const m of r.messages) slicePayload += m.payload.length;
  sliceMessages += r.messages.length;
  offset = r.nextOffset;
  if (messages + sliceMessages >= g * messagesPerGiB || offset >= end) {
    const now = process.hrtime.bigint();
    const rep = report('consume', g, sliceMessages, slicePayload, Number(now - sliceStart) / 1e9, cpuMark);
    cpuMark = rep.cpuNow;
    consumed.push(rep);
    messages += sliceMessages;
    payloadBytes += slicePayload;
    sliceMessages = 0;
    slicePayload = 0;
    sliceStart = now;
    g++;
  }
}
const consumeSeconds = Number(process.hrtime.bigint() - consumeStart) / 1e9;
await consumer.close();
const consumePhasePeak = Atomics.load(shared, 2);
if (messages !== totalMessages) throw new Error(`consumed ${messages} messages, expected ${totalMessages}`);

// --- summary --------------------------------------------------------------------------------------
const final = takeMemory();
const peakKiB = Math.max(producePhasePeak, consumePhasePeak, final.hwm);
const ratio = (rs) => +(rs.at(-1).msgsPerSec / rs[0].msgsPerSec).toFixed(3);
const summary = {
  summary: true,
  gib,
  size,
  batchSize,
  messages: totalMessages,
  logBytes,
  produce: {
    seconds: +produceSeconds.toFixed(1),
    msgsPerSec: Math.round(totalMessages / produceSeconds),
    mbPerSec: +((totalMessages * size) / MiB / produceSeconds).toFixed(1),
    drainSeconds: +drainSeconds.toFixed(2),
    lastOverFirst: ratio(produced),
    brokerPeakRssMiB: rssMiB(producePhasePeak),
  },
  consume: {
    seconds: +consumeSeconds.toFixed(1),
    msgsPerSec: Math.round(totalMessages / consumeSeconds),
    mbPerSec: +((totalMessages * size) / MiB / consumeSeconds).toFixed(1),
    lastOverFirst: ratio(consumed),
    brokerPeakRssMiB: rssMiB(consumePhasePeak),
  },
  brokerIdleRssMiB: rssMiB(idle.now),
  brokerVmHwmMiB: rssMiB(final.hwm),
  brokerPeakRssMiB: rssMiB(peakKiB),
  samples: Atomics.load(shared, 4),
  targets: {
    produceLastWithin10Pct: ratio(produced) >= rateTarget,
    consumeLastWithin10Pct: ratio(consumed) >= rateTarget,
    brokerRssAtMost150MB: peakKiB * 1024 <= rssTargetMB * MiB,
  },
};
console.log(JSON.stringify(summary));

stopping = true;
await sampler.terminate();
if (!brokerExited) {
  broker.kill('SIGTERM');
  await new Promise((r) => (brokerExited ? r() : broker.once('exit', r)));
}
rmSync(work, { recursive: true, force: true });
info(`removed ${work}`);
