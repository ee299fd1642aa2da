// The disk's and the network's share of a message's CPU and latency at a low rate (not a
// test): for 10 s, 100 times a second, an append of 200 bytes to one file followed by an
// fdatasync, or in the modes below a part of that or more; this process's CPU time, and how
// long each fdatasync took (p50, p99, p99.9 and max, ms; none in modes none and socket).
//   node bench/fdatasync-floor.mjs sync|flusher|none|socket|relay
// sync: fs.fdatasyncSync on the event loop; flusher: @klog/storage's fdatasyncFile (klog's
// flusher threads, as a broker flushes); none: the appends alone; socket: no file, a write of
// 216 bytes to a loopback TCP connection that a child process reads; relay: what a broker's
// process does per message at this rate with no klog code in between: a child process sends
// 234 bytes every 10 ms (a produce), this process appends 200 of them, fdatasyncs through the
// flusher, writes 216 bytes on the child's second connection (a fetch's answer) and reads the
// child's 34-byte reply there (the next fetch). Prints one JSON line. Run `npm run setup` first
// for the flusher and relay modes (they need the built storage package). The rate is at most
// 100 a second (a 10 ms timer, then the work): `appends` says how many were made.
import { fork } from 'node:child_process';
import { fdatasyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';

const seconds = 10;
const mode = process.argv[2];
if (mode === 'relay-child') await relayChild(Number(process.argv[3]));
else if (!['sync', 'flusher', 'none', 'socket', 'relay'].includes(mode)) {
  process.stderr.write('usage: node bench/fdatasync-floor.mjs sync|flusher|none|socket|relay\n');
  process.exit(2);
} else await measure();

async function measure() {
  const { fdatasyncFile } = mode === 'flusher' || mode === 'relay' ? await import('../packages/storage/dist/flusher.js') : {};
  const dir = mkdtempSync(join(tmpdir(), 'klog-fdatasync-floor-'));
  const fd = openSync(join(dir, 'segment'), 'a');
  const message = Buffer.alloc(200, 1);
  const answer = Buffer.alloc(216, 2);
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const child = mode === 'socket' || mode === 'relay' ? fork(process.argv[1], ['relay-child', String(server.address().port), mode]) : undefined;
  const sockets = [];
  while (child !== undefined && sockets.length < (mode === 'relay' ? 2 : 1)) sockets.push((await once(server, 'connection'))[0]);
  for (const s of sockets) s.setNoDelay(true);
  const [produce, fetch] = sockets;
  let appends = 0;
  const syncMs = [];
  const cpu0 = process.cpuUsage();
  const t0 = Date.now();
  while (Date.now() - t0 < seconds * 1000) {
    if (mode === 'relay') await once(produce, 'data');
    else await new Promise((resolve) => setTimeout(resolve, 10));
    if (mode !== 'socket') writeSync(fd, message);
    const synced = performance.now();
    if (mode === 'sync') fdatasyncSync(fd);
    else if (mode === 'flusher' || mode === 'relay') await fdatasyncFile(fd);
    if (mode !== 'none' && mode !== 'socket') syncMs.push(performance.now() - synced);
    if (mode === 'socket') produce.write(answer);
    if (mode === 'relay') {
      fetch.write(answer);
      await once(fetch, 'data');
    }
    appends++;
  }
  const cpu = process.cpuUsage(cpu0);
  child?.kill();
  for (const s of sockets) s.destroy();
  server.close();
  rmSync(dir, { recursive: true, force: true });
  const cpuMs = (cpu.user + cpu.system) / 1000;
  const percentOfACore = +(cpuMs / (seconds * 10)).toFixed(2);
  syncMs.sort((a, b) => a - b);
  const at = (q) => +syncMs[Math.min(syncMs.length - 1, Math.floor(q * syncMs.length))].toFixed(3);
  const fdatasyncMs = syncMs.length === 0 ? undefined : { p50: at(0.5), p99: at(0.99), p999: at(0.999), max: +syncMs[syncMs.length - 1].toFixed(3) };
  console.log(JSON.stringify({ mode, appends, seconds, cpuMs: Math.round(cpuMs), systemMs: Math.round(cpu.system / 1000), percentOfACore, ...(fdatasyncMs && { fdatasyncMs }) }));
}

/** The other end: for socket, reads; for relay, a producer every 10 ms and a consumer answering each answer. */
async function relayChild(port) {
  const produce = connect(port, '127.0.0.1');
  produce.setNoDelay(true);
  produce.on('data', () => {});
  if (process.argv[4] !== 'relay') return;
  await once(produce, 'connect');
  const fetch = connect(port, '127.0.0.1');
  fetch.setNoDelay(true);
  const request = Buffer.alloc(234, 3);
  const nextFetch = Buffer.alloc(34, 4);
  fetch.on('data', () => fetch.write(nextFetch));
  await once(fetch, 'connect');
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    produce.write(request);
  }
}
