/**
 * Processes for klog's system tests: brokers (`klog-broker`) and consumer-group members
 * (`fixtures/member.mjs`) as child processes that a test can kill with SIGKILL, freeze with
 * SIGSTOP and SIGCONT, stop with SIGTERM and restart on the same log dir, plus helpers to read
 * the group's state from ZooKeeper.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { ZkClient } from '@klog/zk-registry';
import { sleep, waitFor } from '@klog/retry';

const here = dirname(fileURLToPath(import.meta.url));
/** The broker's command line, built by `turbo run build`. */
export const brokerMain = join(here, '../../../apps/broker/dist/main.js');
const memberScript = join(here, 'fixtures/member.mjs');
/** The `klog` command line. */
export const klogMain = join(here, '../../../tools/klog/dist/main.js');

/** The waits of @klog/retry: `waitFor` polls every 50 ms, 30 s at the most by default. */
export { sleep, waitFor };

/**
 * A small deterministic generator of numbers in [0, 1) (mulberry32), so that a test's random
 * choices (which partition, which moment) can be replayed from the seed it prints.
 */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The seed of a test's random choices: `KLOG_TEST_SEED` when set (to replay a failure), else one drawn from the clock. */
export function testSeed(): number {
  const fromEnv = process.env['KLOG_TEST_SEED'];
  return fromEnv !== undefined && fromEnv !== '' ? Number(fromEnv) : Date.now() % 1_000_000;
}

/** Every child started by this module, killed by {@link killAll}. */
const children = new Set<ChildProcess>();

/** Kills every child process still running (SIGKILL). */
export async function killAll(): Promise<void> {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  children.clear();
}

function exited(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => proc.once('exit', () => resolve()));
}

/** A broker process. */
export class BrokerProcess {
  proc!: ChildProcess;
  port = 0;
  /** Port of the broker's Prometheus endpoint when started with `--metrics-port`, else undefined. */
  metricsPort: number | undefined;
  readonly lines: string[] = [];

  constructor(
    readonly id: number,
    readonly zookeeper: string,
    readonly logDir: string,
    readonly extraArgs: string[] = [],
  ) {}

  /**
   * Starts (or restarts) the broker on its log dir and waits for "broker listening".
   * @param runArgs flags for this run only, after {@link extraArgs} (a later flag wins)
   */
  async start(runArgs: readonly string[] = []): Promise<this> {
    const args = [brokerMain, '--zookeeper', this.zookeeper, '--broker-id', String(this.id), '--port', '0', '--log-dir', this.logDir, ...this.extraArgs, ...runArgs];
    const proc = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc = proc;
    children.add(proc);
    proc.stderr.on('data', (d: Buffer) => this.lines.push(d.toString()));
    const listening = new Promise<number>((resolve, reject) => {
      createInterface({ input: proc.stdout }).on('line', (line) => {
        this.lines.push(line);
        try {
          const o = JSON.parse(line) as { msg?: string; port?: number; metricsPort?: number };
          if (o.msg === 'broker listening') {
            this.metricsPort = o.metricsPort;
            resolve(o.port!);
          }
        } catch {
          // not JSON
        }
      });
      proc.once('exit', (code) => reject(new Error(`broker ${this.id} exited with ${code}: ${this.lines.slice(-5).join('\n')}`)));
    });
    this.port = await listening;
    return this;
  }

  /** SIGKILL: no clean shutdown, its ZooKeeper registrations stay until its session times out. */
  async kill9(): Promise<void> {
    this.proc.kill('SIGKILL');
    await exited(this.proc);
  }

  /** True while the process runs (a frozen one included). */
  get running(): boolean {
    return this.proc !== undefined && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /**
   * SIGSTOP: the broker freezes at once, sockets and ZooKeeper session open but silent; its
   * session expires once frozen longer than the session timeout. Undone by {@link resume}.
   */
  pause(): void {
    this.proc.kill('SIGSTOP');
  }

  /** SIGCONT: a broker frozen by {@link pause} runs on from where it stopped. */
  resume(): void {
    this.proc.kill('SIGCONT');
  }

  /**
   * SIGTERM: the broker shuts down as it does on SIGTERM (controlled shutdown where it has one)
   * and exits; waits at most `timeoutMs`, then kills it with SIGKILL and throws.
   * @returns the exit code
   */
  async terminate(timeoutMs = 60_000): Promise<number | null> {
    this.proc.kill('SIGTERM');
    const proc = this.proc;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    const r = await Promise.race([exited(proc).then(() => 'exited' as const), timedOut]);
    clearTimeout(timer);
    if (r === 'timeout') {
      proc.kill('SIGKILL');
      await exited(proc);
      throw new Error(`broker ${this.id} did not exit within ${timeoutMs} ms of SIGTERM: ${this.lines.slice(-5).join('\n')}`);
    }
    return proc.exitCode;
  }

  /**
   * The value of one series of the broker's Prometheus endpoint (`name` and labels as written
   * there, e.g. `klog_partitions_led`), summed over every series of that name when `labels` is
   * absent; 0 when the broker does not export it.
   * @throws Error when the broker was started without `--metrics-port`
   */
  async metric(name: string, labels?: string): Promise<number> {
    if (this.metricsPort === undefined) throw new Error(`broker ${this.id} has no metrics endpoint (start it with --metrics-port 0)`);
    const text = await (await fetch(`http://127.0.0.1:${this.metricsPort}/metrics`)).text();
    let total = 0;
    for (const line of text.split('\n')) {
      if (line.startsWith('#')) continue;
      const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$/.exec(line);
      if (m === null || m[1] !== name || (labels !== undefined && m[2] !== `{${labels}}`)) continue;
      total += Number(m[3]);
    }
    return total;
  }

  /**
   * The JSON log lines of this broker (every run of it) that `match`.
   * @param since index in {@link lines} to start at (`lines.length` taken before a restart: that run's lines only)
   */
  logged(match: (line: Record<string, unknown>) => boolean, since = 0): Record<string, unknown>[] {
    const out: Record<string, unknown>[] = [];
    for (const line of this.lines.slice(since)) {
      if (!line.startsWith('{')) continue;
      try {
        const o = JSON.parse(line) as Record<string, unknown>;
        if (match(o)) out.push(o);
      } catch {
        // a stderr chunk or a partial line
      }
    }
    return out;
  }
}

/** Starts `n` brokers with ids 0..n-1 on fresh log dirs, one after the other (or all at once with `parallel`). */
export async function startBrokers(zookeeper: string, n: number, extraArgs: string[], parallel = false): Promise<BrokerProcess[]> {
  const brokers = Array.from({ length: n }, (_, id) => new BrokerProcess(id, zookeeper, mkdtempSync(join(tmpdir(), `klog-cluster-${id}-`)), extraArgs));
  if (parallel) {
    await Promise.all(brokers.map((b) => b.start()));
    return brokers;
  }
  for (const b of brokers) await b.start();
  return brokers;
}

/** Removes the brokers' log dirs. */
export function removeLogDirs(brokers: readonly BrokerProcess[]): void {
  for (const b of brokers) rmSync(b.logDir, { recursive: true, force: true });
}

/** A message as a member printed it. */
export interface Received {
  /** Member (process) that received it. */
  readonly member: string;
  /** When the member printed it (epoch ms, the member's clock). */
  readonly t: number;
  readonly b: number;
  readonly p: number;
  readonly o: number;
  readonly n: number;
  readonly v: string;
}

/** A log line of a member. */
export interface MemberLog {
  readonly t: number;
  readonly level: string;
  readonly msg: string;
  readonly [k: string]: unknown;
}

/** Settings of a member (see fixtures/member.mjs). */
export interface MemberSettings {
  zookeeper: string;
  group: string;
  topic: string;
  consumerId: string;
  streams?: number;
  sessionTimeoutMs?: number;
  autoCommitIntervalMs?: number;
  rebalanceBackoffMs?: number;
  rebalanceMaxRetries?: number;
  delayEvery?: number;
  delayMs?: number;
}

/** A consumer-group member process. */
export class Member {
  readonly proc: ChildProcess;
  readonly received: Received[] = [];
  readonly logs: MemberLog[] = [];
  readonly errors: string[] = [];
  readonly stderr: string[] = [];
  start: { sessionId: string; password: string; t: number } | undefined;

  constructor(
    readonly settings: MemberSettings,
    /** Where every member of a test appends what it received. */
    readonly sink: Received[],
  ) {
    this.proc = spawn(process.execPath, [memberScript, JSON.stringify(settings)], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(this.proc);
    this.proc.stderr!.on('data', (d: Buffer) => this.stderr.push(d.toString()));
    createInterface({ input: this.proc.stdout! }).on('line', (line) => this.onLine(line));
  }

  get id(): string {
    return this.settings.consumerId;
  }

  private onLine(line: string): void {
    let o: Record<string, unknown>;
    try {
      o = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    if (o['e'] === 'm') {
      const r: Received = { member: this.id, t: o['t'] as number, b: o['b'] as number, p: o['p'] as number, o: o['o'] as number, n: o['n'] as number, v: o['v'] as string };
      this.received.push(r);
      this.sink.push(r);
    } else if (o['e'] === 'log') {
      this.logs.push(o as unknown as MemberLog);
    } else if (o['e'] === 'start') {
      this.start = { sessionId: o['sessionId'] as string, password: o['password'] as string, t: o['t'] as number };
    } else if (o['e'] === 'error') {
      this.errors.push(o['message'] as string);
    }
  }

  /** Resolves once the member joined and ran its first rebalance. */
  async started(timeoutMs = 30_000): Promise<this> {
    await waitFor(`member ${this.id} to start (stderr: ${this.stderr.join('').slice(-500)})`, () => {
      if (this.proc.exitCode !== null) throw new Error(`member ${this.id} exited with ${this.proc.exitCode}: ${this.stderr.join('').slice(-1000)}`);
      return this.start !== undefined;
    }, timeoutMs);
    return this;
  }

  /** The last offset this member reported committing for each partition (`b-p` → offset). */
  lastCommits(): Map<string, number> {
    const out = new Map<string, number>();
    for (const l of this.logs) {
      if (l.msg !== 'offsets committed') continue;
      for (const c of l['offsets'] as Array<{ brokerId: number; partition: number; offset: number }>) out.set(`${c.brokerId}-${c.partition}`, c.offset);
    }
    return out;
  }

  /** The partitions (`b-p`) of each "rebalance done" line, with its time. */
  rebalances(): Array<{ t: number; owned: string[] }> {
    return this.logs
      .filter((l) => l.msg === 'rebalance done')
      .map((l) => ({ t: l.t, owned: (l['owned'] as string[]).map((k) => k.slice(k.indexOf('/') + 1)) }));
  }

  /** SIGKILL. */
  async kill9(): Promise<void> {
    this.proc.kill('SIGKILL');
    await exited(this.proc);
  }

  /** SIGTERM: the member closes (commits, releases) and exits. */
  async stop(): Promise<void> {
    this.proc.kill('SIGTERM');
    await exited(this.proc);
  }
}

/** The owner of each partition of `topic` in `group`: `b-p` → thread id. */
export async function owners(zk: ZkClient, group: string, topic: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const name of await zk.getChildren(`/consumers/${group}/owners/${topic}`)) {
    const node = await zk.getData(`/consumers/${group}/owners/${topic}/${name}`);
    if (node) out.set(name, node.data.toString());
  }
  return out;
}

/** `<consumerId>-<i>` → `<consumerId>`. */
export function consumerOf(threadId: string): string {
  return threadId.slice(0, threadId.lastIndexOf('-'));
}

/** When each (group, topic) was first seen settled with its current owners, for {@link settled}. */
const settledSince = new Map<string, { owners: string; since: number }>();
/** How long the ownership must hold still before {@link settled} says so, in ms. */
const settledStableMs = 1000;

/**
 * True when every one of `partitions` has exactly one owner, every owner is a thread of a
 * consumer in `liveIds`, the group's registry lists exactly `liveIds`, and all this has held
 * with the same owners for {@link settledStableMs} (members may still run a rebalance for a
 * change they saw late, releasing and claiming again). Meant to be polled.
 */
export async function settled(zk: ZkClient, group: string, topic: string, partitions: readonly string[], liveIds: readonly string[]): Promise<boolean> {
  const key = `${group}/${topic}`;
  const ids = await zk.getChildren(`/consumers/${group}/ids`);
  const own = await owners(zk, group, topic);
  const ok =
    ids.join(',') === [...liveIds].sort().join(',') &&
    [...own.keys()].sort().join(',') === [...partitions].sort().join(',') &&
    [...own.values()].every((t) => liveIds.includes(consumerOf(t)));
  if (!ok) {
    settledSince.delete(key);
    return false;
  }
  const signature = JSON.stringify([...own].sort());
  const seen = settledSince.get(key);
  if (seen === undefined || seen.owners !== signature) {
    settledSince.set(key, { owners: signature, since: Date.now() });
    return false;
  }
  return Date.now() - seen.since >= settledStableMs;
}

/** Counts how often each value was received. */
export function counts(received: readonly Received[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const r of received) out.set(r.v, (out.get(r.v) ?? 0) + 1);
  return out;
}

export { ZkClient };

/** One partition row of `klog groups --describe --json`. */
export interface DescribedPartition {
  topic: string;
  brokerId: number;
  partition: number;
  owner: string | null;
  offset: number | null;
  logEnd: number | null;
  lag: number | null;
}

/** Runs `klog groups --zookeeper <connect> --describe <group> --json` as a child process and returns its partition rows. */
export async function describeGroup(zookeeper: string, group: string): Promise<DescribedPartition[]> {
  const { stdout } = await promisify(execFile)(process.execPath, [klogMain, 'groups', '--zookeeper', zookeeper, '--describe', group, '--json']);
  return (JSON.parse(stdout) as { partitions: DescribedPartition[] }).partitions;
}
