/**
 * What the cluster commands (`topics`, `groups`, and `produce`/`consume` with `--zookeeper`)
 * share: the `--zookeeper` option, a short-lived ZooKeeper session, log end offsets read from
 * the brokers, and plain-text tables.
 */
import { type Command, Option } from 'commander';
import { SimpleConsumer } from '@klog/client';
import { type BrokerInfo, parseConnectString, ZkClient } from '@klog/zk-registry';
import type { Logger } from 'pino';
import { optionCheck } from './options.js';

/** A ZooKeeper connect string `host:port[,host:port...][/chroot]`, kept as given once checked. */
export const parseZkConnect: (value: string) => string = optionCheck(parseConnectString);

/** The required `--zookeeper` option of the commands that read the cluster from ZooKeeper. */
export function zookeeperOption(): Option {
  return new Option('--zookeeper <connect>', 'ZooKeeper connect string host:port[,host:port...][/chroot]').argParser(parseZkConnect).makeOptionMandatory();
}

/** Most ms a command waits for its first ZooKeeper session. */
export const zkConnectTimeoutMs = 10_000;

/** Runs `fn` with a ZooKeeper session on `connect`, closing it afterwards. */
export async function withZooKeeper<T>(connect: string, logger: Logger, fn: (zk: ZkClient) => Promise<T>): Promise<T> {
  const zk = await ZkClient.connect(connect, { logger, connectTimeoutMs: zkConnectTimeoutMs });
  try {
    return await fn(zk);
  } finally {
    await zk.close();
  }
}

/** Reads log end offsets (OFFSETS latest) from brokers, one connection per broker. */
export class LogEnds {
  private readonly consumers = new Map<number, SimpleConsumer>();

  constructor(private readonly brokers: ReadonlyMap<number, BrokerInfo>) {}

  /** The log end of a partition; undefined when its broker is not alive or does not answer (logged). */
  async of(topic: string, brokerId: number, partition: number, logger: Logger): Promise<number | undefined> {
    const c = this.consumer(brokerId);
    if (!c) return undefined;
    try {
      return await c.latestOffset(topic, partition);
    } catch (e) {
      logger.warn({ topic, brokerId, partition, err: (e as Error).message }, 'could not read the log end offset');
      return undefined;
    }
  }

  /** The connection to a live broker (made on first use); undefined when the broker is not alive. */
  consumer(brokerId: number): SimpleConsumer | undefined {
    const info = this.brokers.get(brokerId);
    if (!info) return undefined;
    let c = this.consumers.get(brokerId);
    if (!c) {
      c = new SimpleConsumer({ host: info.host, port: info.port, connectTimeoutMs: 5000, requestTimeoutMs: 10_000 });
      this.consumers.set(brokerId, c);
    }
    return c;
  }

  async close(): Promise<void> {
    await Promise.all([...this.consumers.values()].map((c) => c.close()));
  }
}

/** Formats rows as left-aligned columns separated by two spaces, one line each. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  return rows.map((row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ')).join('\n') + '\n';
}

/** A number, or `-` when unknown. */
export function orDash(v: number | string | undefined): string {
  return v === undefined ? '-' : String(v);
}

/** The options of a command made by {@link addListOrDescribeCommand}. */
export interface ListOrDescribeOptions {
  zookeeper: string;
  describe?: string;
  json?: boolean;
}

/**
 * Adds a cluster command that lists the names registered in ZooKeeper (`klog groups`) or, with
 * `--describe <name>`, describes one; `--json` for JSON. `run` gets the parsed
 * options; with no `--describe` it may print the names with {@link writeNames}.
 * @param describe the `--describe` argument (`topic`, `group`), its help and its parser
 * @param examples argument lists after `klog <name>`, shown in the help
 */
export function addListOrDescribeCommand(
  program: Command,
  name: string,
  description: string,
  describe: { readonly arg: string; readonly help: string; readonly parse: (value: string) => string },
  examples: readonly string[],
  run: (opts: ListOrDescribeOptions) => Promise<void>,
): Command {
  return program
    .command(name)
    .description(description)
    .addOption(zookeeperOption())
    .option(`--describe <${describe.arg}>`, describe.help, describe.parse)
    .option('--json', 'print JSON instead of text')
    .addHelpText('after', `\nExamples:\n${examples.map((e) => `  klog ${name} ${e}`).join('\n')}`)
    .action(run);
}

/** Prints `names` one per line, or as one JSON array with `json` (`klog topics`, `klog groups`). */
export function writeNames(names: readonly string[], json: boolean | undefined): void {
  process.stdout.write(json ? `${JSON.stringify(names)}\n` : names.map((n) => `${n}\n`).join(''));
}
