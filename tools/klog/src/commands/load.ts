/**
 * `klog load`: the offline loader, a batch job that copies topics into files for the data teams.
 *
 * Each run finds in ZooKeeper every partition of every topic whose whole name matches `--topic`
 * (a paper topic's `<brokerId>-<partition>`, a replicated topic's `<partition>`, `0..N-1`, read
 * from its leader, docs/replication.md §14), reads each one from the offset the previous run stored (a
 * partition never seen before: from its earliest offset) up to its log end as read at the start
 * of the run (OFFSETS latest; nothing past it is read), and writes its messages to one file per
 * partition in a new run directory. Data and offsets are committed together by one rename of
 * that directory (see load/layout.ts): a run that fails or is killed leaves the previous runs as
 * they were, and the next run reads again what it would have read. Every successful run commits,
 * also one that found nothing new: its directory then holds only offsets.json and manifest.json.
 *
 * Failures end the run with nothing committed: a partition the previous run read whose broker
 * is no longer registered, a replicated partition with no live leader (offline), a broker that
 * cannot be reached, and offsets deleted by retention
 * since the previous run (named as a range; `--allow-gaps` skips them instead and records the
 * range in the manifest).
 *
 * Progress goes to stderr (see load/progress.ts); the summary line to stdout.
 *
 * `--throttle-ms` (hidden) sleeps that long before each fetch and between the steps of the
 * commit. It is a testing aid that keeps a run alive long enough to be killed at any point.
 */
import { type Command, Option } from 'commander';
import { groupPartition, KlogError, OffsetOutOfRangeError, replicatedBrokerId, SimpleConsumer } from '@klog/client';
import { allPartitions, BrokerRegistry, type BrokerInfo, groupPartitionName, ReplicatedTopicRegistry } from '@klog/zk-registry';
import { withZooKeeper, zookeeperOption } from '../cluster.js';
import { createLogger } from '../logger.js';
import { PendingRun, readState, removeDeadTempDirs, runName, type Offsets } from '../load/layout.js';
import { dataFileName, type LoadFormat, PartitionFile } from '../load/partition-file.js';
import { formatBytes, Progress } from '../load/progress.js';
import { intParser, optionParser } from '../options.js';

interface LoadOptions {
  zookeeper: string;
  topic: RegExp;
  out: string;
  format: LoadFormat;
  gzip?: boolean;
  allowGaps?: boolean;
  fetchBytes: number;
  maxFetchBytes: number;
  throttleMs: number;
}

/** Adds `klog load` to `program`. */
export function registerLoad(program: Command): void {
  program
    .command('load')
    .description(
      'batch-load topics into files under --out: every partition from where the previous run stopped to its log end now, one file per partition; data and offsets are committed together',
    )
    .addOption(zookeeperOption())
    .requiredOption('--topic <regex>', 'load the topics whose whole name matches this regular expression', parseTopicRegex)
    .requiredOption(
      '--out <dir>',
      'output directory: run-<seq>/ directories, each with offsets.json, manifest.json and <topic>/<brokerId>-<partition> files (<topic>/<partition> for a replicated topic)',
    )
    .addOption(
      new Option('--format <format>', 'json: one {"topic","brokerId","partition","offset","payload"(base64)} per line; raw: each payload then a newline')
        .choices(['json', 'raw'])
        .default('json'),
    )
    .option('--gzip', 'gzip the data files (.gz)')
    .option('--allow-gaps', 'when retention deleted offsets not loaded yet, continue from the earliest offset and record the lost range in the manifest (default: fail)')
    .option('--fetch-bytes <bytes>', 'bytes per fetch (grown for a larger message)', intParser(1, 2 ** 31 - 1, true), 1024 * 1024)
    .option('--max-fetch-bytes <bytes>', 'largest fetch; a larger message is an error', intParser(1, 2 ** 31 - 1, true), 16 * 1024 * 1024)
    .addOption(new Option('--throttle-ms <ms>', 'testing aid: sleep before each fetch and between commit steps').argParser(intParser(0)).default(0).hideHelp())
    .addHelpText(
      'after',
      `
Examples:
  klog load --zookeeper 127.0.0.1:2181/klog --topic 'events|clicks' --out /data/klog-load
  klog load --zookeeper 127.0.0.1:2181/klog --topic 'logs\\..*' --out /data/klog-load --format raw --gzip`,
    )
    .action(async (opts: LoadOptions) => load(opts));
}

/** A regular expression anchored at both ends, so that `--topic events` loads only `events`. */
const parseTopicRegex = optionParser((value) => new RegExp(`^(?:${value})$`));

/**
 * A partition of a matching topic: a paper one (`brokerId`, `partition`) or a replicated one
 * (`brokerId` −1, `replicatedBrokerId`), read through the broker `readFrom` (a replicated
 * partition's leader when the run starts; the consumer follows the leader if it moves).
 */
interface FoundPartition {
  readonly topic: string;
  readonly brokerId: number;
  readonly partition: number;
  readonly readFrom: number;
}

/** A partition to load in this run. */
interface PartitionPlan extends FoundPartition {
  /** Offset this run starts at. */
  readonly from: number;
  /** The log end at the start of the run: this run reads up to it, not past it. */
  readonly end: number;
  /** Offsets lost before this run started (only with --allow-gaps). */
  readonly gaps: Gap[];
}

/** Offsets `[from, to)` deleted by retention before they were loaded. */
interface Gap {
  readonly from: number;
  readonly to: number;
}

/** What the run did with one partition, as recorded in its manifest. */
interface PartitionResult {
  readonly topic: string;
  readonly brokerId: number;
  readonly partition: number;
  readonly from: number;
  /** The offset the next run starts at. */
  readonly to: number;
  readonly messages: number;
  /** Log bytes read: `to - from` less the gaps. */
  readonly logBytes: number;
  /** Bytes written to the data file before any gzip. */
  readonly bytes: number;
  /** Size of the data file on disk (after any gzip). */
  readonly fileBytes: number;
  /** The data file, relative to the run directory; null when the partition had nothing new. */
  readonly file: string | null;
  readonly gaps: Gap[];
}

/** The partition's name in offsets.json, the data file's and the messages: `<brokerId>-<partition>`, or `<partition>` for a replicated topic's. */
const key = (brokerId: number, partition: number): string => groupPartitionName(groupPartition({ brokerId, partition }));

async function load(opts: LoadOptions): Promise<void> {
  const logger = createLogger('klog-load');
  const started = Date.now();
  const state = await readState(opts.out);
  const removed = await removeDeadTempDirs(opts.out);
  if (removed.length > 0) logger.info({ removed }, 'removed the temp directories of runs that did not finish');
  const seq = state.lastRun + 1;

  const { brokers, partitions } = await withZooKeeper(opts.zookeeper, logger, (zk) =>
    findPartitions(new BrokerRegistry(zk, { logger }), new ReplicatedTopicRegistry(zk, { logger }), opts.topic, state.offsets),
  );

  const consumers = new Map<number, SimpleConsumer>();
  const consumerOf = (brokerId: number): SimpleConsumer => {
    let c = consumers.get(brokerId);
    if (!c) {
      const b = brokers.get(brokerId)!;
      const maxFetchBytes = Math.max(opts.maxFetchBytes, opts.fetchBytes);
      c = new SimpleConsumer({ host: b.host, port: b.port, maxFetchBytes, connectTimeoutMs: 5000, requestTimeoutMs: 30_000 });
      consumers.set(brokerId, c);
    }
    return c;
  };
  let run: PendingRun | undefined;
  let progress: Progress | undefined;
  try {
    const plans: PartitionPlan[] = [];
    for (const p of partitions) plans.push(await planPartition(p, state.offsets[p.topic]?.[key(p.brokerId, p.partition)], consumerOf(p.readFrom), opts));
    logger.info({ run: seq, partitions: plans.length }, 'loading');

    run = await PendingRun.create(opts.out, seq);
    const pending = run;
    progress = new Progress(
      plans.reduce((n, p) => n + (p.end - p.from), 0),
      plans.length,
    );
    const bar = progress;
    // Brokers are read in parallel, the partitions of one broker (or led by it) one after the other.
    const byBroker = new Map<number, PartitionPlan[]>();
    for (const p of plans) byBroker.set(p.readFrom, [...(byBroker.get(p.readFrom) ?? []), p]);
    const stop = { failed: false };
    const settled = await Promise.allSettled(
      [...byBroker.entries()].map(async ([brokerId, list]) => {
        const out: PartitionResult[] = [];
        for (const plan of list) {
          if (stop.failed) break;
          try {
            const r = await loadPartition(plan, consumerOf(brokerId), pending, opts, bar, stop);
            out.push(r);
            bar.partitionDone(describeResult(r));
          } catch (e) {
            stop.failed = true;
            throw e;
          }
        }
        return out;
      }),
    );
    const failure = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failure) throw failure.reason;
    const results = settled.flatMap((s) => (s.status === 'fulfilled' ? s.value : []));
    results.sort((a, b) => a.topic.localeCompare(b.topic) || a.brokerId - b.brokerId || a.partition - b.partition);

    const offsets: Offsets = structuredClone(state.offsets);
    for (const r of results) (offsets[r.topic] ??= {})[key(r.brokerId, r.partition)] = r.to;
    const sorted: Offsets = Object.fromEntries(
      Object.keys(offsets)
        .sort()
        .map((t) => [t, Object.fromEntries(Object.entries(offsets[t]!).sort(([a], [b]) => compareKeys(a, b)))]),
    );
    const messages = results.reduce((n, r) => n + r.messages, 0);
    const logBytes = results.reduce((n, r) => n + r.logBytes, 0);
    const bytes = results.reduce((n, r) => n + r.bytes, 0);
    const fileBytes = results.reduce((n, r) => n + r.fileBytes, 0);
    const manifest = {
      run: seq,
      previousRun: state.lastRun === 0 ? null : runName(state.lastRun),
      startedAt: new Date(started).toISOString(),
      finishedAt: new Date().toISOString(),
      zookeeper: opts.zookeeper,
      topicPattern: opts.topic.source,
      format: opts.format,
      payloadEncoding: opts.format === 'json' ? 'base64' : 'raw, newline-terminated',
      gzip: opts.gzip === true,
      messages,
      logBytes,
      bytes,
      fileBytes,
      gaps: results.flatMap((r) => r.gaps.map((g) => ({ topic: r.topic, brokerId: r.brokerId, partition: r.partition, ...g }))),
      partitions: results,
    };
    await pending.commit(sorted, manifest, () => sleep(opts.throttleMs));
    run = undefined;
    progress.finish();
    const seconds = (Date.now() - started) / 1000;
    process.stdout.write(
      `run ${seq} committed to ${pending.finalDir}: ${results.length} partitions, ${messages} messages, ` +
        `${formatBytes(logBytes)} of log → ${formatBytes(fileBytes)} on disk (${fileBytes} bytes), ${seconds.toFixed(2)} s` +
        `${manifest.gaps.length > 0 ? `, ${manifest.gaps.length} gaps skipped (see manifest.json)` : ''}\n`,
    );
  } finally {
    progress?.finish();
    if (run !== undefined) await run.discard().catch(() => {});
    await Promise.all([...consumers.values()].map((c) => c.close()));
  }
}

/**
 * The partitions of the matching topics: those of paper topics registered in ZooKeeper now, and
 * every partition `0..N-1` of each replicated topic (docs/replication.md §14), checked against the
 * ones the previous runs read.
 * @throws KlogError when no topic matches, a partition read before is not registered now (its
 *   broker is down), or a replicated partition has no live leader (offline)
 */
async function findPartitions(
  registry: BrokerRegistry,
  replicated: ReplicatedTopicRegistry,
  pattern: RegExp,
  previous: Offsets,
): Promise<{ brokers: Map<number, BrokerInfo>; partitions: FoundPartition[] }> {
  const topics = (await registry.listTopics()).filter((t) => pattern.test(t));
  const definitions = [...(await replicated.readDefinitions()).entries()].filter(([t]) => pattern.test(t)).sort(([a], [b]) => a.localeCompare(b));
  const brokers = new Map((await registry.listBrokers()).map((b) => [b.id, b]));
  const partitions: FoundPartition[] = [];
  const missing: string[] = [];
  const offline: string[] = [];
  const checkPrevious = (topic: string, liveKeys: ReadonlySet<string>): void => {
    for (const k of Object.keys(previous[topic] ?? {}).sort(compareKeys)) {
      if (!liveKeys.has(k)) missing.push(`${topic} ${k}`);
    }
  };
  for (const topic of topics) {
    const live = allPartitions((await registry.topicPartitions(topic)).filter((c) => brokers.has(c.brokerId)));
    checkPrevious(topic, new Set(live.map((p) => key(p.brokerId, p.partition))));
    for (const p of live) partitions.push({ topic, ...p, readFrom: p.brokerId });
  }
  for (const [topic, definition] of definitions) {
    const states = await replicated.readPartitionStates(topic);
    const numbers = definition.partitions.map((_replicas, partition) => partition);
    checkPrevious(topic, new Set(numbers.map((partition) => key(replicatedBrokerId, partition))));
    for (const partition of numbers) {
      const leader = states.get(partition)?.state.leader ?? -1;
      if (!brokers.has(leader)) offline.push(`${topic} ${partition}`);
      else partitions.push({ topic, brokerId: replicatedBrokerId, partition, readFrom: leader });
    }
  }
  if (missing.length > 0) {
    throw new KlogError(
      `partitions loaded by earlier runs are not registered in ZooKeeper now (is their broker down?): ${missing.join(', ')}; nothing committed`,
    );
  }
  if (offline.length > 0) throw new KlogError(`replicated partitions without a live leader (offline): ${offline.join(', ')}; nothing committed`);
  if (topics.length === 0 && definitions.length === 0) throw new KlogError(`no topic in ZooKeeper matches ${pattern.source}`);
  return { brokers, partitions };
}

/** Orders partition names: `<brokerId>-<partition>` by broker then partition, `<partition>` (replicated) by partition. */
function compareKeys(a: string, b: string): number {
  const parts = (k: string): [number, number] => {
    const n = k.split('-').map(Number);
    return n.length === 1 ? [replicatedBrokerId, n[0]!] : [n[0]!, n[1]!];
  };
  const [ab, ap] = parts(a);
  const [bb, bp] = parts(b);
  return ab - bb || ap - bp;
}

function where(p: { topic: string; brokerId: number; partition: number }): string {
  return `topic ${p.topic} partition ${key(p.brokerId, p.partition)}`;
}

/** Prefixes a failure with the partition it concerns. */
function inPartition(p: { topic: string; brokerId: number; partition: number }, e: unknown): KlogError {
  if (e instanceof KlogError && e.message.startsWith(where(p))) return e;
  return new KlogError(`${where(p)}: ${(e as Error).message}; nothing committed`, { cause: e });
}

/** The lost range as an error, or recorded when --allow-gaps. */
function gapError(p: { topic: string; brokerId: number; partition: number }, gap: Gap): KlogError {
  return new KlogError(
    `${where(p)}: offsets [${gap.from}, ${gap.to}) were deleted by retention before they were loaded (the partition now starts at ${gap.to}); ` +
      'nothing committed; rerun with --allow-gaps to continue from the earliest offset (the lost range is recorded in the manifest)',
  );
}

/** Where the partition starts and ends in this run, from the stored offset and OFFSETS earliest/latest. */
async function planPartition(
  p: FoundPartition,
  stored: number | undefined,
  consumer: SimpleConsumer,
  opts: LoadOptions,
): Promise<PartitionPlan> {
  let earliest: number;
  let end: number;
  try {
    end = await consumer.latestOffset(p.topic, p.partition);
    earliest = await consumer.earliestOffset(p.topic, p.partition);
  } catch (e) {
    throw inPartition(p, e);
  }
  if (stored === undefined) return { ...p, from: earliest, end, gaps: [] };
  if (stored > end) {
    throw new KlogError(
      `${where(p)}: the stored offset ${stored} is past the log end ${end} (the broker lost data, or this is another cluster); nothing committed`,
    );
  }
  if (stored < earliest) {
    const gap = { from: stored, to: earliest };
    if (!opts.allowGaps) throw gapError(p, gap);
    return { ...p, from: earliest, end, gaps: [gap] };
  }
  return { ...p, from: stored, end, gaps: [] };
}

/** Reads one partition from `plan.from` up to `plan.end` into its data file (created on the first message). */
async function loadPartition(
  plan: PartitionPlan,
  consumer: SimpleConsumer,
  run: PendingRun,
  opts: LoadOptions,
  progress: Progress,
  stop: { failed: boolean },
): Promise<PartitionResult> {
  const { topic, brokerId, partition, end } = plan;
  const gaps = [...plan.gaps];
  const fileName = dataFileName(key(brokerId, partition), opts.format, opts.gzip === true);
  let file: PartitionFile | undefined;
  let offset = plan.from;
  let messages = 0;
  const fetchBytes = Math.min(opts.fetchBytes, consumer.maxFetchBytes);
  try {
    while (offset < end && !stop.failed) {
      if (opts.throttleMs > 0) await sleep(opts.throttleMs);
      let r;
      try {
        r = await consumer.fetchWhole({ topic, partition, offset, maxBytes: fetchBytes });
      } catch (e) {
        if (e instanceof OffsetOutOfRangeError && e.earliest !== undefined && e.earliest > offset) {
          // Retention deleted a segment while this run was reading it.
          const gap = { from: offset, to: e.earliest };
          if (!opts.allowGaps) throw gapError(plan, gap);
          gaps.push(gap);
          progress.advance(Math.min(e.earliest, end) - offset);
          offset = e.earliest;
          continue;
        }
        throw e;
      }
      // The log may have grown since the run started: keep only what lies before its end then.
      let n = r.messages.length;
      while (n > 0 && r.messages[n - 1]!.offset >= end) n--;
      if (n === 0) {
        throw new KlogError(`${where(plan)}: the broker returned nothing at offset ${offset}, before the log end ${end} read at the start of the run; nothing committed`);
      }
      const batch = n === r.messages.length ? r.messages : r.messages.slice(0, n);
      file ??= new PartitionFile(`${await run.topicDir(topic)}/${fileName}`, plan, opts.format, opts.gzip === true);
      await file.write(batch);
      const next = batch[n - 1]!.nextOffset;
      progress.advance(next - offset);
      offset = next;
      messages += n;
    }
    if (file) await file.close();
  } catch (e) {
    await file?.abort();
    throw inPartition(plan, e);
  }
  // The plan's gaps lie before `plan.from`; only those met while reading lie inside [from, offset).
  const logBytes = offset - plan.from - gaps.slice(plan.gaps.length).reduce((n, g) => n + (g.to - g.from), 0);
  return {
    topic,
    brokerId,
    partition,
    from: plan.from,
    to: offset,
    messages,
    logBytes,
    bytes: file?.bytes ?? 0,
    fileBytes: file?.fileBytes ?? 0,
    file: file ? `${topic}/${fileName}` : null,
    gaps,
  };
}

function describeResult(r: PartitionResult): string {
  const gaps = r.gaps.map((g) => `, lost [${g.from}, ${g.to})`).join('');
  return `${r.topic} ${key(r.brokerId, r.partition)}: ${r.messages} messages, ${formatBytes(r.logBytes)} of log → ${formatBytes(r.fileBytes)} on disk, offsets ${r.from}..${r.to}${gaps}`;
}

function sleep(ms: number): Promise<void> {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}
