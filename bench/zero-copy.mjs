#!/usr/bin/env node
/**
 * Zero-copy micro-benchmark (not a test): fetch throughput of one broker sending segment bytes
 * with sendfile(2) against the same broker with `--read-path read-write` (read into pooled
 * buffers, then write), side by side in one run, on the same log, from the page cache.
 *
 *   node bench/zero-copy.mjs [--mib 1024] [--rounds 3] [--fetch-kib 1024,200] [--consumers 1]
 *
 * Needs a build (`npm run setup`). Writes a log of `--mib` MiB of 200-byte messages into a
 * temp dir with @klog/storage, then for each fetch size runs `--rounds` rounds, alternating the
 * two read paths (sendfile, read-write, sendfile, ...) so that drift in the machine's load hits
 * both alike. Each round starts `klog-broker` as a child process on the log, has `--consumers`
 * connections (in this process) fetch the whole partition with back-to-back FETCH requests of
 * `--fetch-kib` KiB (the client only counts bytes, it does not parse messages), and reads the
 * broker's CPU time (user + system, /proc/<pid>/stat) over the consume phase.
 *
 * Prints one JSON line per round and a summary table of medians: MB/s (2^20 bytes), messages/s
 * (210 bytes each on disk) and broker CPU seconds per GiB sent.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { encodeMessageSet, encodeFetchRequest } = await import(join(root, 'packages/protocol/dist/index.js'));
const { LogManager, sendfileSupport } = await import(join(root, 'packages/storage/dist/index.js'));
// The `klog-broker` command, so the broker runs with the Node flags of its first line (docs/design.md §10).
const brokerBin = join(root, 'apps/broker/bin/klog-broker.js');

const { values: opts } = parseArgs({
  options: {
    mib: { type: 'string', default: '1024' },
    rounds: { type: 'string', default: '3' },
    'fetch-kib': { type: 'string', default: '1024,200' },
    consumers: { type: 'string', default: '1' },
  },
});
const totalMiB = Number(opts.mib);
const rounds = Number(opts.rounds);
const fetchSizes = String(opts['fetch-kib']).split(',').map((k) => Number(k) * 1024);
const consumers = Number(opts.consumers);
const messageBytes = 200;
const onDiskBytes = messageBytes + 10;
const topic = 'zc';
const clockTicks = 100; // USER_HZ on Linux

if (!sendfileSupport.available) {
  process.stderr.write(`sendfile is not available (${sendfileSupport.reason}); both runs would use read-write\n`);
  process.exit(1);
}

const work = mkdtempSync(join(tmpdir(), 'klog-zero-copy-'));
process.on('exit', () => rmSync(work, { recursive: true, force: true }));
const logDir = join(work, 'logs');

// The log: 1000-message sets of 200-byte payloads, in 1 GiB segments, flushed and closed cleanly.
const setMessages = 1000;
const set = encodeMessageSet(Array.from({ length: setMessages }, (_, i) => Buffer.alloc(messageBytes, i % 251)));
const manager = await LogManager.open({ logDir, flushMessages: 1_000_000, flushIntervalMs: 60_000 });
const log = await manager.getOrCreateLog(topic, 0);
const sets = Math.ceil((totalMiB * 1024 * 1024) / set.length);
for (let i = 0; i < sets; i++) log.append(set, setMessages);
const logBytes = log.logEndOffset;
await manager.close();
process.stderr.write(`log: ${(logBytes / 2 ** 20).toFixed(0)} MiB, ${sets * setMessages} messages of ${messageBytes} B\n`);

/** Starts klog-broker on the log with the read path; resolves with its pid and port. */
async function startBroker(readPath) {
  const proc = spawn(brokerBin, ['--port', '0', '--log-dir', logDir, '--read-path', readPath, '--segment-bytes', String(2 ** 30)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise((resolve, reject) => {
    createInterface({ input: proc.stdout }).on('line', (l) => {
      try {
        const e = JSON.parse(l);
        if (e.msg === 'broker listening') resolve(e);
      } catch {}
    });
    proc.on('exit', (code) => reject(new Error(`broker exited with ${code}`)));
  });
  if (line.readPath !== readPath) throw new Error(`asked for ${readPath}, broker logged ${line.readPath}`);
  return { proc, port: line.port };
}

/** Broker CPU seconds so far (user + system). */
function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / clockTicks;
}

/** One connection fetching [from, to) with back-to-back fetches of `fetchBytes`; resolves with bytes received. */
async function consume(port, from, to, fetchBytes) {
  const socket = connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  await once(socket, 'connect');
  let offset = from;
  let received = 0;
  await new Promise((resolve, reject) => {
    let head = Buffer.alloc(0);
    let remaining = 0; // body bytes of the current response still to come
    let bodyBytes = 0;
    const next = () => {
      if (to - offset < onDiskBytes) return resolve(); // `to` is a message boundary or the log end
      socket.write(encodeFetchRequest({ topic, partition: 0, offset, maxBytes: Math.min(fetchBytes, to - offset) }));
    };
    socket.on('data', (chunk) => {
      let at = 0;
      while (at < chunk.length) {
        if (remaining === 0) {
          const take = Math.min(6 - head.length, chunk.length - at);
          head = Buffer.concat([head, chunk.subarray(at, at + take)]);
          at += take;
          if (head.length < 6) return;
          if (head.readInt16BE(4) !== 0) return reject(new Error(`fetch error ${head.readInt16BE(4)} at ${offset}`));
          remaining = bodyBytes = head.readInt32BE(0) - 2;
          head = Buffer.alloc(0);
          if (bodyBytes === 0) return reject(new Error(`empty fetch at ${offset}`));
          continue;
        }
        const take = Math.min(remaining, chunk.length - at);
        remaining -= take;
        at += take;
        received += take;
        if (remaining === 0) {
          // Messages are 210 bytes: the next fetch starts at the last whole message.
          offset += bodyBytes - (bodyBytes % onDiskBytes);
          next();
        }
      }
    });
    socket.on('error', reject);
    next();
  });
  socket.destroy();
  return received;
}

async function round(readPath, fetchBytes) {
  const broker = await startBroker(readPath);
  await consume(broker.port, 0, Math.min(logBytes, 100_000 * onDiskBytes), fetchBytes); // warm-up
  const cpu0 = cpuSeconds(broker.proc.pid);
  const t0 = process.hrtime.bigint();
  const share = Math.floor(logBytes / consumers / onDiskBytes) * onDiskBytes;
  const parts = await Promise.all(Array.from({ length: consumers }, (_, i) => consume(broker.port, i * share, i === consumers - 1 ? logBytes : (i + 1) * share, fetchBytes)));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = cpuSeconds(broker.proc.pid) - cpu0;
  broker.proc.kill('SIGTERM');
  await once(broker.proc, 'exit');
  const bytes = parts.reduce((a, b) => a + b, 0);
  const r = {
    readPath,
    fetchKiB: fetchBytes / 1024,
    consumers,
    bytes,
    seconds: +seconds.toFixed(3),
    mbPerSec: +(bytes / 2 ** 20 / seconds).toFixed(1),
    msgsPerSec: Math.round(bytes / onDiskBytes / seconds),
    brokerCpuSeconds: +cpu.toFixed(2),
    brokerCpuSecPerGiB: +(cpu / (bytes / 2 ** 30)).toFixed(3),
  };
  console.log(JSON.stringify(r));
  return r;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const summary = [];
for (const fetchBytes of fetchSizes) {
  const results = { sendfile: [], 'read-write': [] };
  for (let i = 0; i < rounds; i++) {
    for (const p of i % 2 === 0 ? ['sendfile', 'read-write'] : ['read-write', 'sendfile']) results[p].push(await round(p, fetchBytes));
  }
  for (const p of ['sendfile', 'read-write']) {
    const rs = results[p];
    summary.push({ fetchKiB: fetchBytes / 1024, readPath: p, mbPerSec: median(rs.map((r) => r.mbPerSec)), msgsPerSec: median(rs.map((r) => r.msgsPerSec)), cpuSecPerGiB: median(rs.map((r) => r.brokerCpuSecPerGiB)) });
  }
}
console.log('\n| fetch size | read path | MB/s (median) | msg/s (median) | broker CPU s per GiB (median) |');
console.log('|---|---|---|---|---|');
for (const s of summary) console.log(`| ${s.fetchKiB} KiB | ${s.readPath} | ${s.mbPerSec} | ${s.msgsPerSec.toLocaleString('en-US')} | ${s.cpuSecPerGiB} |`);
