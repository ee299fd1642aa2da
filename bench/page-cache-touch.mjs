// Writes into the page cache at two points in a machine's life (not a test): MEGABYTES of 1 MiB
// writes into a new file, then, after that file is deleted (its pages freed), as many into
// another. On a virtual machine whose memory the host backs only when first touched, the first
// round may land on pages never used since boot and run many times slower than the second,
// which reuses the pages just freed; on a machine that has used its memory they run alike.
// bench/kafka.sh does the same before its runs (`touch_page_cache`), so that what it times is
// the broker and its clients, not the host backing fresh memory.
//   node bench/page-cache-touch.mjs [MEGABYTES]        (default 400)
// Prints one JSON line.
import { closeSync, mkdtempSync, openSync, rmSync, unlinkSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const megabytes = Number(process.argv[2] ?? 400);
if (!Number.isSafeInteger(megabytes) || megabytes < 1) {
  process.stderr.write(`page-cache-touch.mjs: MEGABYTES must be a positive integer, not ${process.argv[2]}\n`);
  process.exit(2);
}
const dir = mkdtempSync(join(tmpdir(), 'klog-page-cache-'));
const chunk = Buffer.alloc(1 << 20, 7);
/** MB/s of writing `megabytes` MiB into a new file, which is then deleted. */
function round(name) {
  const file = join(dir, name);
  const fd = openSync(file, 'w');
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < megabytes; i++) writeSync(fd, chunk);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  closeSync(fd);
  unlinkSync(file);
  return Math.round(megabytes / seconds);
}
try {
  const first = round('first');
  const second = round('second');
  console.log(JSON.stringify({ megabytes, firstMbPerSecond: first, secondMbPerSecond: second, ratio: +(second / first).toFixed(2) }));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
