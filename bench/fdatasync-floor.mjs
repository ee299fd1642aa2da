// The disk's share of a message's CPU at a low rate (not a test): 100 appends a second of 200
// bytes to one file for 10 s, each followed by an fdatasync, and this process's CPU time.
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
while (Date.now() - t0 < seconds * 1000) {
  await new Promise((resolve) => setTimeout(resolve, 10));
  writeSync(fd, message);
  if (mode === 'sync') fdatasyncSync(fd);
  else if (mode === 'flusher') await fdatasyncFile(fd);
  appends++;
}
const cpu = process.cpuUsage(cpu0);
rmSync(dir, { recursive: true, force: true });
const cpuMs = (cpu.user + cpu.system) / 1000;
const percentOfACore = +(cpuMs / (seconds * 10)).toFixed(2);
console.log(JSON.stringify({ mode, appends, seconds, cpuMs: Math.round(cpuMs), systemMs: Math.round(cpu.system / 1000), percentOfACore }));
