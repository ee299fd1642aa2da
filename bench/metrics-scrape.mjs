#!/usr/bin/env node
/**
 * What a Prometheus scrape costs the broker (not a test): one `klog-broker` (node_modules/.bin,
 * `--port 0 --metrics-port 0`, a temp log dir) with one topic of --partitions partitions, each
 * holding one message (a @klog/client Producer sends one to each, acks 1); then --scrapes
 * sequential `GET <path>` requests. The broker's CPU time over the scrapes (utime + stime from
 * /proc/<pid>/stat; the broker is otherwise idle) divided by their number is the thread time one
 * scrape takes; also the wall time per scrape and the size of the answer.
 *
 *   node bench/metrics-scrape.mjs [--partitions 5000] [--scrapes 20] [--path /metrics]
 *
 * Prints one JSON line. Run it on two checkouts side by side to compare.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { Producer } = await import(join(root, 'packages/client/dist/index.js'));
const { values } = parseArgs({ options: { partitions: { type: 'string', default: '5000' }, scrapes: { type: 'string', default: '20' }, path: { type: 'string', default: '/metrics' } } });
const partitions = Number(values.partitions);
const scrapes = Number(values.scrapes);

const work = mkdtempSync(join(tmpdir(), 'klog-scrape-'));
const broker = spawn(join(root, 'node_modules/.bin/klog-broker'), ['--port', '0', '--metrics-port', '0', '--log-dir', join(work, 'logs'), '--num-partitions', String(partitions)], { stdio: ['ignore', 'pipe', 'inherit'] });
const cleanup = () => {
  broker.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
};
process.on('SIGINT', () => {
  cleanup();
  process.exit(130);
});
try {
  const listening = await new Promise((resolve, reject) => {
    const lines = createInterface({ input: broker.stdout });
    lines.on('line', (l) => {
      try {
        const e = JSON.parse(l);
        if (e.msg === 'broker listening') resolve(e);
      } catch {
        // not a log line
      }
    });
    broker.on('exit', (code) => reject(new Error(`broker exited with ${code}`)));
  });
  const producer = new Producer({ brokerList: `127.0.0.1:${listening.port}`, acks: 1 });
  for (let p = 0; p < partitions; p += 500) {
    const records = [];
    for (let q = p; q < Math.min(partitions, p + 500); q++) records.push({ value: `m${q}`, partition: q });
    await producer.send('scraped', records);
  }
  await producer.close();
  const url = `http://127.0.0.1:${listening.metricsPort}${values.path}`;
  await (await fetch(url)).text(); // warm up
  const cpu = () => {
    const f = readFileSync(`/proc/${broker.pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12])) * 10; // clock ticks of 10 ms
  };
  const cpuBefore = cpu();
  const started = performance.now();
  let bytes = 0;
  for (let i = 0; i < scrapes; i++) bytes = (await (await fetch(url)).text()).length;
  const wallMs = (performance.now() - started) / scrapes;
  const cpuMs = (cpu() - cpuBefore) / scrapes;
  console.log(JSON.stringify({ date: new Date().toISOString(), partitions, scrapes, path: values.path, bytes, brokerCpuMsPerScrape: +cpuMs.toFixed(1), wallMsPerScrape: +wallMs.toFixed(1), loadAverage: loadavg().map((l) => +l.toFixed(2)) }));
} finally {
  cleanup();
}
