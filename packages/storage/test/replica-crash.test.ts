/**
 * A follower killed with `kill -9` in the middle of its appends, rolls and truncations
 * (docs/replication.md §8.3, §10): whatever moment the kill comes, the replica opened again is
 * a prefix of the leader's log, in the leader's segment files, and its checkpoint names only
 * epochs whose bytes are in it. The follower is a child process running the built package.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ReplicaLog } from '../src/index.js';
import { tempDir } from './helpers.js';

const packageDir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = pathToFileURL(path.join(packageDir, 'dist', 'index.js')).href;
const topicId = '5f0c3a9e12b7d604';
const setCount = 400;
const leaderSegmentBytes = 1000;

/**
 * The leader's log, the same in the child and here: set `i` at `offsets[i]`, in the leader's
 * segment starting at `starts[i]`, written in epoch `floor(i / 10)`.
 */
const leaderLogSource = `
const sets = [], offsets = [], starts = [];
let end = 0, segment = 0;
for (let i = 0; i < ${setCount}; i++) {
  const set = encodeMessageSet([Buffer.from(('m' + i).padEnd(20 + ((i * 37) % 200), '.'))]);
  if (end > segment && end - segment + set.length > ${leaderSegmentBytes}) segment = end;
  sets.push(set); offsets.push(end); starts.push(segment); end += set.length;
}
offsets.push(end);
`;

/**
 * The follower: grows the log towards the leader's end, flushes, cuts it back at random, for
 * ever. With the argument \`leader\` it prints the leader log as JSON instead and exits.
 */
const followerSource = `
import { encodeMessageSet } from '@klog/protocol';
import { ReplicaLog } from '${dist}';
${leaderLogSource}
if (process.argv[1] === 'leader') {
  process.stdout.write(JSON.stringify({ sets: sets.map((s) => s.toString('base64')), offsets, starts }));
  process.exit(0);
}
const dir = process.argv[1];
let seed = Number(process.argv[2]);
const rand = (n) => { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % n; };
const options = { dir, topic: 'events', partition: 0, topicId: '${topicId}', config: { flushIntervalMs: 60000 } };
const log = await ReplicaLog.create(options);
let n = offsets.indexOf(log.logEndOffset);
if (n < 0) { console.error('log end ' + log.logEndOffset + ' is not a set boundary'); process.exit(3); }
for (;;) {
  const target = Math.min(${setCount}, n + 1 + rand(60));
  for (; n < target; n++) {
    if (n % 10 === 0) await log.leaderEpochs.assign(n / 10, offsets[n]);
    await log.appendAsFollower(sets[n], 1, starts[n]);
  }
  await log.flush();
  process.stdout.write(log.logEndOffset + '\\n');
  n = rand(n + 1);
  await log.truncateTo(offsets[n]);
}
`;

interface LeaderLog {
  sets: Buffer[];
  offsets: number[];
  starts: number[];
}

/** The leader log, as the follower's own code builds it. */
function leaderLog(): LeaderLog {
  const out = spawnSync(process.execPath, ['--input-type=module', '-e', followerSource, 'leader'], { cwd: packageDir, encoding: 'utf8' });
  if (out.status !== 0) throw new Error(`leader log: ${out.stderr}`);
  const parsed = JSON.parse(out.stdout) as { sets: string[]; offsets: number[]; starts: number[] };
  return { sets: parsed.sets.map((s) => Buffer.from(s, 'base64')), offsets: parsed.offsets, starts: parsed.starts };
}

function startFollower(dir: string, seed: number): ChildProcess {
  return spawn(process.execPath, ['--input-type=module', '-e', followerSource, dir, String(seed)], { cwd: packageDir, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Resolves after the child has printed `lines` lines (rounds of growth), rejects if it exits first. */
function roundsDone(child: ChildProcess, lines: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = 0;
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdout!.on('data', (d: Buffer) => {
      seen += d.toString().split('\n').length - 1;
      if (seen >= lines) resolve();
    });
    child.on('exit', (code) => reject(new Error(`follower exited with ${code}: ${stderr}`)));
  });
}

describe.skipIf(!fs.existsSync(new URL(dist)))('a follower killed with kill -9', () => {
  it('always opens again as a prefix of the leader log, in the leader\'s segments, with its epochs', async () => {
    const leader = leaderLog();
    const dir = path.join(tempDir(), 'events-0');
    for (let round = 0; round < 6; round++) {
      const child = startFollower(dir, 1000 + round);
      await roundsDone(child, 3 + round);
      await new Promise((r) => setTimeout(r, round * 7)); // kill at another point of the loop each round
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;

      const log = await ReplicaLog.load({ dir, topic: 'events', partition: 0, recover: true });
      const end = log.logEndOffset;
      const n = leader.offsets.indexOf(end);
      expect(n, `log end ${end} is a set boundary of the leader log`).toBeGreaterThanOrEqual(0);
      // Byte for byte the leader's first n sets, in segment files named where the leader rolled.
      const starts = log.segmentStarts();
      const leaderStarts = [...new Set(leader.starts.slice(0, n))];
      expect(starts.slice(0, leaderStarts.length)).toEqual(leaderStarts);
      expect(starts.length - leaderStarts.length).toBeLessThanOrEqual(1); // a roll's empty segment, before its first bytes
      if (starts.length > leaderStarts.length) expect(leader.starts).toContain(starts[starts.length - 1]);
      const expected = Buffer.concat(leader.sets.slice(0, n));
      const got: Buffer[] = [];
      for (let offset = 0; offset < end; ) {
        const chunk = log.read(offset, 1 << 20);
        expect(chunk.length, `bytes at ${offset} (a gap between segments reads as none)`).toBeGreaterThan(0);
        got.push(chunk);
        offset += chunk.length;
      }
      expect(Buffer.concat(got).equals(expected)).toBe(true);
      // Only epochs whose first bytes are in the log, each where the leader started it.
      for (const e of log.leaderEpochs.entries) {
        expect(e.startOffset).toBe(leader.offsets[e.epoch * 10]);
        expect(e.startOffset).toBeLessThanOrEqual(end);
      }
      await log.close();
    }
  });
});
