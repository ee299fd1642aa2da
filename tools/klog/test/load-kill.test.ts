/**
 * `klog load` killed with SIGKILL at random points in 10 runs, each followed by a run that
 * completes: after every kill the output directory holds only complete runs (plus, at most, the
 * temp directory of the killed one), after every completing run only complete runs, and the union
 * of every run's messages equals what was produced, each message exactly once.
 *
 * The loader runs slowed down (`--throttle-ms`, small fetches) so that a kill can land in any
 * phase: start-up, reading, writing the offsets and manifest, the fsyncs and renames of the commit.
 * The seed of the kill times is printed and can be set with KLOG_TEST_SEED to replay a failure.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Broker, startBroker } from '@klog/broker';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { id, klog, payloads, perPartition, produce, readRuns, type Sent, start } from './load-helpers.js';

/** A small deterministic generator (mulberry32), so that a failing sequence of kill times can be replayed. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('klog load killed with SIGKILL', () => {
  let zookeeper: string;
  let work: string;
  let brokers: Broker[] = [];

  beforeAll(async () => {
    await assertZooKeeperRunning();
    zookeeper = testConnectString();
    work = mkdtempSync(join(tmpdir(), 'klog-load-kill-'));
    brokers = await Promise.all(
      [0, 1].map((brokerId) =>
        startBroker(
          { logDir: join(work, `broker-${brokerId}`), host: '127.0.0.1', port: 0, brokerId, zookeeper, numPartitions: 2 },
          pino({ level: 'silent' }),
        ),
      ),
    );
  });
  afterAll(async () => {
    for (const b of brokers) await b.close();
    await removeChroot(zookeeper);
    rmSync(work, { recursive: true, force: true });
  });

  it('leaves only complete runs after each of 10 kills, and every message exactly once after the runs that complete', { timeout: 240_000 }, async () => {
    const seed = Number(process.env['KLOG_TEST_SEED'] ?? Date.now() % 1_000_000);
    console.log(`load-kill seed ${seed} (KLOG_TEST_SEED=${seed} replays it)`);
    const rand = random(seed);
    const out = join(work, 'out');
    const args = ['load', '--zookeeper', zookeeper, '--topic', 'events|clicks', '--out', out, '--fetch-bytes', '256'];
    const sent: Sent[] = [];
    const outcomes: string[] = [];
    /** How long a completing run took, to spread the kill times over a whole run. */
    let runMs = 1500;
    const throttleMs = 25;
    /** Partitions of events and clicks: 2 brokers × 2 each. */
    const partitions = 8;

    for (let round = 0; round < 10; round++) {
      sent.push(...(await produce(zookeeper, brokers, 'events', payloads(`r${round}`, 150 + Math.floor(rand() * 150)))));
      if (round % 3 === 0) sent.push(...(await produce(zookeeper, brokers, 'clicks', payloads(`c${round}`, 40))));
      const before = readRuns(out).runs.length;
      const gzip = round % 2 === 1 ? ['--gzip'] : [];

      // Even rounds: a kill at any time of the run, once it has begun (its temp dir exists; the
      // time before that is process start-up). Odd rounds: once every partition is read, during
      // the commit (each of its steps is slowed by the throttle).
      const inCommit = round % 2 === 1;
      const delayMs = Math.floor(rand() * (inCommit ? 7 * throttleMs : runMs * 0.6));
      const child = start([...args, ...gzip, '--throttle-ms', String(throttleMs)]);
      if (inCommit) await child.stderrLines(partitions);
      else {
        const t0 = Date.now();
        while (readRuns(out).others.length === 0 && Date.now() - t0 < 10_000) await sleep(5);
      }
      await sleep(delayMs);
      child.kill('SIGKILL');
      const r = await child.done;
      const killed = r.signal === 'SIGKILL';

      // Only complete runs: readRuns checks each run's offsets, manifest, files and continuity.
      const afterKill = readRuns(out);
      expect(afterKill.others.every((name) => /^\.tmp-run-\d{8}-\d+$/.test(name)), afterKill.others.join(', ')).toBe(true);
      const committed = afterKill.runs.length > before;
      outcomes.push(`${inCommit ? 'commit+' : ''}${delayMs}ms:${killed ? (committed ? 'killed-after-commit' : afterKill.others.length > 0 ? 'killed-mid-run' : 'killed-at-start') : `exited-${r.code}`}`);
      if (!killed) expect(r.code, r.stderr).toBe(0);
      const soFar = afterKill.runs.flatMap((x) => x.messages).map(id);
      expect(new Set(soFar).size, 'a message loaded twice').toBe(soFar.length);

      // A run that completes: it cleans up after the killed one and loads the rest.
      const t0 = Date.now();
      const done = await klog([...args, ...gzip, '--throttle-ms', String(throttleMs)]);
      runMs = Math.max(300, Date.now() - t0);
      expect(done.code, done.stderr).toBe(0);
      const { runs, others } = readRuns(out);
      expect(others).toEqual([]);
      const loaded = runs.flatMap((x) => x.messages);
      expect(loaded.map(id).sort()).toEqual(sent.map(id).sort());
      expect(perPartition(loaded)).toEqual(perPartition(sent));
    }
    console.log(`load-kill outcomes: ${outcomes.join(' ')}`);
    // The kills must have hit runs in progress, not only finished or not yet started ones.
    expect(outcomes.filter((o) => o.includes('killed-mid-run')).length, outcomes.join(' ')).toBeGreaterThanOrEqual(3);
    expect(outcomes.filter((o) => o.startsWith('commit+') && o.includes('killed')).length, outcomes.join(' ')).toBeGreaterThanOrEqual(3);
  });
});
