// The disk's share of a message's CPU and latency at a low rate (not a test): 100 appends a
// second of 200 bytes to one file for 10 s, each followed by an fdatasync; this process's CPU
// time, and how long each fdatasync took (p50, p99, p99.9 and max, ms; none in mode none).
//   node bench/fdatasync-floor.mjs sync|flusher|none
// sync: fs.fdatasyncSync on the event loop; flusher: @klog/storage's fdatasyncFile (klog's
// flusher threads, as a broker flushes); none: the appends alone. Prints one JSON line.
// Run `npm run setup` first for the flusher mode (it needs the built storage package). The
// rate is at most 100 a second (a 10 ms timer, then the work): `appends` says how many were made.
import { fdatasyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const mode = process.argv[2];
if (!['sync', 'flusher', 'none'].includes(mode)) {
  process.stderr.write('usage: node bench/fdatasync-floor.mjs sync|flusher|none\n');
  process.exit(2);
}
const { fdatasyncFile } = mode === 'flusher' ? await import('../packages/storage/dist/flusher.js') : {};
const dir = mkdtempSync(join(tmpdir(), 'klog-fdatasync-floor-'));
const fd = openSync(join(dir, 'segment'), 'a');
const message = Buffer.alloc(200, 1);
const seconds = 10;
const cpu0 = process.cpuUsage();
const t0 = Date.now();
let appends = 0;
const syncMs = [];
while (Date.now() - t0 < seconds * 1000) {
  await new Promise((resolve) => setTimeout(resolve, 10));
  writeSync(fd, message);
  const synced = performance.now();
  if (mode === 'sync') fdatasyncSync(fd);
  else if (mode === 'flusher') await fdatasyncFile(fd);
  if (mode !== 'none') syncMs.push(performance.now() - synced);
  appends++;
}
const cpu = process.cpuUsage(cpu0);
rmSync(dir, { recursive: true, force: true });
const cpuMs = (cpu.user + cpu.system) / 1000;
const percentOfACore = +(cpuMs / (seconds * 10)).toFixed(2);
syncMs.sort((a, b) => a - b);
const at = (q) => +syncMs[Math.min(syncMs.length - 1, Math.floor(q * syncMs.length))].toFixed(3);
const fdatasyncMs = syncMs.length === 0 ? undefined : { p50: at(0.5), p99: at(0.99), p999: at(0.999), max: +syncMs[syncMs.length - 1].toFixed(3) };
console.log(JSON.stringify({ mode, appends, seconds, cpuMs: Math.round(cpuMs), systemMs: Math.round(cpu.system / 1000), percentOfACore, ...(fdatasyncMs && { fdatasyncMs }) }));
