/**
 * (`@klog/mirror-maker/testing`, for tests of klog itself) Processes for the mirror maker's and
 * the audit's tests: brokers (`klog-broker`) and mirror makers
 * (`klog-mirror-maker`) as child processes that a test can stop, freeze or kill with SIGKILL;
 * a producer that remembers where every message went; a reader of a whole cluster's topic.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { SimpleConsumer, ZkProducer } from '@klog/client';
import { BrokerRegistry, ZkClient, allPartitions } from '@klog/zk-registry';
import { removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { waitFor as poll } from '@klog/retry';

const here = dirname(fileURLToPath(import.meta.url));
export const brokerMain = join(here, '../../broker/dist/main.js');
export const mirrorMain = join(here, '../dist/main.js');

export { sleep } from '@klog/retry';

/** Polls `check` every 100 ms until it is true; throws naming `what` after `timeoutMs` (@klog/retry's waitFor). */
export function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  return poll(what, check, timeoutMs, 100);
}

const children = new Set<ChildProcess>();
const dirs: string[] = [];
const chroots: string[] = [];

/** SIGKILLs every child still running, removes log dirs and ZooKeeper chroots. */
export async function cleanup(): Promise<void> {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const c of children) await exited(c);
  children.clear();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  for (const c of chroots.splice(0)) await removeChroot(c).catch(() => {});
}

function exited(proc: ChildProcess): Promise<number | null> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve(proc.exitCode);
  return new Promise((resolve) => proc.once('exit', (code) => resolve(code)));
}

/** A JSON log line of a child. */
export type LogLine = { level: number; msg: string; time: number } & Record<string, unknown>;

/** Spawns `node script args`, collecting stdout JSON lines. */
function spawnNode(script: string, args: string[], lines: LogLine[], stderr: string[]): ChildProcess {
  const proc = spawn(process.execPath, [script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(proc);
  proc.stderr.on('data', (d: Buffer) => stderr.push(d.toString()));
  createInterface({ input: proc.stdout }).on('line', (line) => {
    try {
      lines.push(JSON.parse(line) as LogLine);
    } catch {
      stderr.push(line);
    }
  });
  return proc;
}

/** A broker process on a log dir that survives restarts. */
export class BrokerProcess {
  proc: ChildProcess | undefined;
  readonly lines: LogLine[] = [];
  readonly stderr: string[] = [];
  port = 0;

  constructor(
    readonly id: number,
    readonly zookeeper: string,
    readonly logDir: string,
    readonly extraArgs: readonly string[],
  ) {}

  async start(): Promise<this> {
    const from = this.lines.length;
    const args = ['--zookeeper', this.zookeeper, '--broker-id', String(this.id), '--port', '0', '--log-dir', this.logDir, '--zk-session-timeout-ms', '4000', ...this.extraArgs];
    const proc = spawnNode(brokerMain, args, this.lines, this.stderr);
    this.proc = proc;
    await waitFor(`broker ${this.id} listening`, () => {
      if (proc.exitCode !== null) throw new Error(`broker ${this.id} exited with ${proc.exitCode}: ${this.stderr.join('').slice(-500)}`);
      const l = this.lines.slice(from).find((x) => x.msg === 'broker listening');
      if (l) this.port = l['port'] as number;
      return l !== undefined;
    });
    return this;
  }

  /** SIGTERM (clean shutdown: flushes, unregisters); resolves with the exit code. */
  async stop(): Promise<number | null> {
    this.proc!.kill('SIGTERM');
    return exited(this.proc!);
  }
}

/** A cluster: its own ZooKeeper chroot and brokers 0..n-1. */
export interface Cluster {
  readonly zookeeper: string;
  readonly brokers: BrokerProcess[];
}

/** Starts a cluster of `n` brokers on fresh log dirs under a fresh chroot. */
export async function startCluster(name: string, n: number, extraArgs: readonly string[] = []): Promise<Cluster> {
  const zookeeper = testConnectString(`klog-mirror-${name}`);
  chroots.push(zookeeper);
  const brokers: BrokerProcess[] = [];
  for (let id = 0; id < n; id++) {
    const dir = mkdtempSync(join(tmpdir(), `klog-mirror-${name}-${id}-`));
    dirs.push(dir);
    brokers.push(new BrokerProcess(id, zookeeper, dir, ['--num-partitions', '2', '--flush-ms', '100', ...extraArgs]));
  }
  await Promise.all(brokers.map((b) => b.start()));
  return { zookeeper, brokers };
}

/** A `klog-mirror-maker` process. */
export class MirrorProcess {
  readonly proc: ChildProcess;
  readonly lines: LogLine[] = [];
  readonly stderr: string[] = [];

  constructor(readonly args: readonly string[]) {
    this.proc = spawnNode(mirrorMain, [...args], this.lines, this.stderr);
  }

  /** Resolves once every source is mirroring (one "mirroring" line per source), or throws when it exits. */
  async mirroring(sources: number, timeoutMs = 30_000): Promise<this> {
    await waitFor(
      `the mirror maker to start (stderr: ${this.stderr.join('').slice(-500)})`,
      () => {
        if (this.proc.exitCode !== null) throw new Error(`mirror maker exited with ${this.proc.exitCode}: ${this.stderr.join('').slice(-1000)}`);
        return this.logs('mirroring').length >= sources;
      },
      timeoutMs,
    );
    return this;
  }

  logs(msg: string | RegExp): LogLine[] {
    return this.lines.filter((l) => (typeof msg === 'string' ? l.msg === msg : msg.test(l.msg)));
  }

  async kill9(): Promise<void> {
    this.proc.kill('SIGKILL');
    await exited(this.proc);
  }

  /** SIGTERM; resolves with the exit code. */
  async stop(): Promise<number | null> {
    this.proc.kill('SIGTERM');
    return exited(this.proc);
  }

  freeze(): void {
    this.proc.kill('SIGSTOP');
  }

  thaw(): void {
    this.proc.kill('SIGCONT');
  }
}

/** Where a produced message went in its source cluster. */
export interface Sent {
  readonly topic: string;
  readonly value: string;
  readonly key: string | undefined;
  readonly brokerId: number;
  readonly partition: number;
  readonly offset: number;
}

/** Sends records with acks 1 and returns where each went. */
export async function produce(
  producer: ZkProducer,
  topic: string,
  records: ReadonlyArray<{ value: string; key?: string; timestamp?: number }>,
  chunk = 1000,
): Promise<Sent[]> {
  const out: Sent[] = [];
  for (let i = 0; i < records.length; i += chunk) {
    const part = records.slice(i, i + chunk);
    const metas = await producer.send(topic, part);
    metas.forEach((m, j) => out.push({ topic, value: part[j]!.value, key: part[j]!.key, brokerId: m.brokerId, partition: m.partition, offset: m.offset! }));
  }
  return out;
}

/** A producer with acks 1; `stampMetadata` stores keys (and creation time, host) in the messages. */
export function newProducer(zookeeper: string, stampMetadata = false): ZkProducer {
  return new ZkProducer({ zookeeper, acks: 1, batchSize: 500, lingerMs: 2, stampMetadata });
}

/** A message read back from a cluster. */
export interface Read {
  readonly topic: string;
  readonly brokerId: number;
  readonly partition: number;
  readonly offset: number;
  readonly value: string;
  readonly key: string | undefined;
  readonly timestamp: number | undefined;
  readonly host: string | undefined;
}

/**
 * Reads topics of a cluster incrementally: each {@link poll} fetches what was added to every
 * partition since the last one.
 */
export class ClusterReader {
  readonly messages: Read[] = [];
  private readonly cursors = new Map<string, number>();
  private zk: ZkClient | undefined;

  constructor(readonly zookeeper: string) {}

  /**
   * Polls `topics` until each of `values` has been read at least once (the mirror copied every
   * message sent). @throws after `timeoutMs` ms, as {@link waitFor}
   */
  async waitForValues(topics: readonly string[], values: Iterable<string>, timeoutMs: number): Promise<void> {
    const wanted = [...values];
    await waitFor(
      'every message in the target',
      async () => {
        const got = countValues(await this.poll(topics));
        return wanted.every((v) => got.has(v));
      },
      timeoutMs,
    );
  }

  async poll(topics: readonly string[]): Promise<Read[]> {
    this.zk ??= await ZkClient.connect(this.zookeeper, { sessionTimeoutMs: 10_000 });
    const registry = new BrokerRegistry(this.zk);
    const brokers = new Map((await registry.listBrokers()).map((b) => [b.id, b]));
    for (const topic of topics) {
      for (const bp of allPartitions(await registry.topicPartitions(topic))) {
        const broker = brokers.get(bp.brokerId);
        if (!broker) continue;
        const k = `${topic}/${bp.brokerId}-${bp.partition}`;
        const consumer = new SimpleConsumer({ host: broker.host, port: broker.port, requestTimeoutMs: 5000 });
        try {
          let offset = this.cursors.get(k) ?? (await consumer.earliestOffset(topic, bp.partition));
          const end = await consumer.latestOffset(topic, bp.partition);
          while (offset < end) {
            const r = await consumer.fetch({ topic, partition: bp.partition, offset, maxBytes: 1 << 20 });
            for (const m of r.messages) {
              this.messages.push({
                topic,
                brokerId: bp.brokerId,
                partition: bp.partition,
                offset: m.offset,
                value: m.payload.toString('utf8'),
                key: m.key?.toString('utf8'),
                timestamp: m.timestamp,
                host: m.host,
              });
            }
            if (r.nextOffset === offset) break;
            offset = r.nextOffset;
          }
          this.cursors.set(k, offset);
        } finally {
          await consumer.close();
        }
      }
    }
    return this.messages;
  }

  async close(): Promise<void> {
    await this.zk?.close();
  }
}

/** Count of each value. */
export function countValues(read: readonly Read[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const r of read) out.set(r.value, (out.get(r.value) ?? 0) + 1);
  return out;
}

/** The committed offset of each partition (`b-p`) of `topic` in `group`. */
export async function committedOffsets(zookeeper: string, group: string, topic: string): Promise<Map<string, number>> {
  const zk = await ZkClient.connect(zookeeper);
  try {
    const out = new Map<string, number>();
    for (const name of await zk.getChildren(`/consumers/${group}/offsets/${topic}`)) {
      const node = await zk.getData(`/consumers/${group}/offsets/${topic}/${name}`);
      if (node) out.set(name, Number(node.data.toString()));
    }
    return out;
  } finally {
    await zk.close();
  }
}

/** Common mirror flags for tests: short intervals and sessions. */
export function mirrorArgs(sources: readonly string[], target: string, group: string, extra: readonly string[] = []): string[] {
  return [
    ...sources.flatMap((s) => ['--source', s]),
    '--target', target,
    '--group', group,
    '--commit-interval-ms', '500',
    '--stats-interval-ms', '1000',
    '--zk-session-timeout-ms', '3000',
    '--rebalance-backoff-ms', '500',
    '--rebalance-max-retries', '20',
    ...extra,
  ];
}
