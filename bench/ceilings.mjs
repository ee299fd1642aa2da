// What the machine allows, without klog (not a test): the ceilings the standalone figures are
// compared with in docs/benchmarks.md.
//
//   node bench/ceilings.mjs [--tcp-mib 2048] [--disk-mib 1024]
//
// 1. Loopback TCP: a bare Node socket pump. One process writes buffers of 256 KiB and of 10,600
//    bytes (a batch of 50 klog messages of 200 B) to 127.0.0.1 as fast as the socket takes them;
//    a child process reads and discards. Prints MB/s (2^20) and the CPU seconds per GiB of each
//    side (user + system, from process.cpuUsage).
// 2. Disk: sequential appends with writeSync to a new file in the OS temp dir, in writes of
//    10,600 bytes (one klog batch), 210 bytes (one message) and 256 KiB, then one fdatasync.
//    Prints MB/s before the sync (page cache) and including it (the device), and CPU ns per write.
// Prints one JSON line per measurement.
import { fork } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const MiB = 1024 * 1024;

if (process.argv[2] === '--receiver') {
  const server = net.createServer((s) => {
    let n = 0;
    s.on('data', (c) => (n += c.length));
    s.on('end', () => {
      const u = process.cpuUsage();
      process.send({ bytes: n, cpuSeconds: (u.user + u.system) / 1e6 });
      server.close();
    });
  });
  server.listen(0, '127.0.0.1', () => process.send({ port: server.address().port }));
} else {
  const { values } = parseArgs({ options: { 'tcp-mib': { type: 'string', default: '2048' }, 'disk-mib': { type: 'string', default: '1024' } } });
  for (const chunk of [256 * 1024, 10_600]) await tcp(Number(values['tcp-mib']) * MiB, chunk);
  for (const chunk of [10_600, 210, 256 * 1024]) disk(chunk === 210 ? Math.min(100 * MiB, Number(values['disk-mib']) * MiB) : Number(values['disk-mib']) * MiB, chunk);
}

async function tcp(total, chunk) {
  const child = fork(new URL(import.meta.url).pathname, ['--receiver']);
  const { port } = await new Promise((r) => child.once('message', r));
  const s = net.connect(port, '127.0.0.1');
  s.setNoDelay(true);
  await new Promise((r) => s.once('connect', r));
  const buf = Buffer.alloc(chunk, 7);
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  let sent = 0;
  await new Promise((resolve) => {
    const pump = () => {
      while (sent < total) {
        sent += chunk;
        if (!s.write(buf)) return void s.once('drain', pump);
      }
      s.end();
      resolve();
    };
    pump();
  });
  const got = await new Promise((r) => child.once('message', r));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const gib = got.bytes / 2 ** 30;
  print({ ceiling: 'loopback-tcp', writeBytes: chunk, bytes: got.bytes, seconds, mbPerSec: got.bytes / MiB / seconds, senderCpuSecondsPerGiB: (cpu.user + cpu.system) / 1e6 / gib, receiverCpuSecondsPerGiB: got.cpuSeconds / gib });
}

function disk(total, chunk) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'klog-ceiling-'));
  try {
    const fd = fs.openSync(path.join(dir, 'segment'), 'a+');
    const buf = Buffer.alloc(chunk, 5);
    const cpu0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    let pos = 0;
    let writes = 0;
    while (pos < total) {
      pos += fs.writeSync(fd, buf, 0, chunk, pos);
      writes++;
    }
    const written = process.hrtime.bigint();
    const cpu = process.cpuUsage(cpu0);
    fs.fdatasyncSync(fd);
    const synced = process.hrtime.bigint();
    fs.closeSync(fd);
    const writeSeconds = Number(written - t0) / 1e9;
    const totalSeconds = Number(synced - t0) / 1e9;
    print({ ceiling: 'disk-append', writeBytes: chunk, bytes: pos, writeSeconds, pageCacheMbPerSec: pos / MiB / writeSeconds, cpuNsPerWrite: ((cpu.user + cpu.system) * 1000) / writes, withFdatasyncSeconds: totalSeconds, withFdatasyncMbPerSec: pos / MiB / totalSeconds });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function print(o) {
  console.log(JSON.stringify(Object.fromEntries(Object.entries(o).map(([k, v]) => [k, typeof v === 'number' && !Number.isInteger(v) ? Number(v.toFixed(3)) : v]))));
}
