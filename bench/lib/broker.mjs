/**
 * What the benchmarks of bench/ share: start a `klog-broker` from a checkout (this one, or
 * another given with --repo, to compare side by side) on a temp log dir and `--port 0`, read
 * its port from the "broker listening" log line, read its CPU time from /proc, run
 * `klog ... --json` commands of the same checkout, stop and clean up.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, release, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

/**
 * Starts a broker of the checkout at `repo` with extra flags; resolves once it listens.
 * @returns { port, metricsPort, pid, logDir, stop(): Promise<void>, cpuSeconds(): number }
 */
export async function startBroker(repo, flags = [], env = {}) {
  const work = mkdtempSync(join(tmpdir(), 'klog-bench-'));
  const logDir = join(work, 'logs');
  // The `klog-broker` command, so the broker runs with the Node flags of its first line (docs/design.md §10).
  const proc = spawn(join(repo, 'apps/broker/bin/klog-broker.js'), ['--port', '0', '--log-dir', logDir, ...flags], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, ...env },
  });
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  let metricsPort;
  const port = await new Promise((resolve, reject) => {
    const lines = createInterface({ input: proc.stdout });
    const timer = setTimeout(() => reject(new Error('broker did not start within 30 s')), 30_000);
    lines.on('line', (line) => {
      try {
        const e = JSON.parse(line);
        if (e.msg === 'broker listening') {
          clearTimeout(timer);
          metricsPort = e.metricsPort;
          resolve(e.port);
        }
      } catch {
        /* not JSON */
      }
    });
    proc.on('exit', (code) => reject(new Error(`broker exited ${code} before listening`)));
  });
  proc.stdout.resume();
  return {
    port,
    /** Port of /metrics when `--metrics-port` was among the flags. */
    metricsPort,
    pid: proc.pid,
    logDir,
    /** CPU seconds (user + system) the broker has used so far, from /proc/<pid>/stat. */
    cpuSeconds: () => {
      const stat = readFileSync(`/proc/${proc.pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return (Number(f[11]) + Number(f[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
    },
    stop: async () => {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      await exited;
      rmSync(work, { recursive: true, force: true });
    },
  };
}

/** Runs `klog <args>` of the checkout at `repo`; resolves with the JSON object it printed on stdout. */
export function klogJson(repo, args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(repo, 'tools/klog/dist/main.js'), ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err = (err + d).slice(-4000)));
    child.on('exit', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('{'));
      if (code === 0 && line) resolve(JSON.parse(line));
      else reject(new Error(`klog ${args.join(' ')} exited ${code}: ${err.trim().split('\n').slice(-3).join(' | ')}`));
    });
  });
}

/** One line saying where and when a benchmark ran. */
export function environment() {
  return { date: new Date().toISOString(), node: process.version, kernel: release(), cpus: cpus().length, memoryGiB: Math.round(totalmem() / 2 ** 30), loadAverage: loadavg().map((l) => +l.toFixed(2)) };
}
