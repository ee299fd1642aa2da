import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  formatLeaderEpochCheckpoint,
  LeaderEpochCheckpoint,
  LeaderEpochCheckpointError,
  leaderEpochCheckpointFileName,
  parseLeaderEpochCheckpoint,
} from '../src/index.js';
import { tempDir } from './helpers.js';

function fileOf(dir: string): string {
  return path.join(dir, leaderEpochCheckpointFileName);
}

function write(dir: string, text: string): void {
  fs.writeFileSync(fileOf(dir), text);
}

describe('the file', () => {
  it('is missing until the first entry, then holds exactly the documented text', async () => {
    const dir = tempDir();
    const cp = await LeaderEpochCheckpoint.load(dir, 0);
    expect(cp.entries).toEqual([]);
    expect(cp.latestEpoch).toBeUndefined();
    expect(fs.existsSync(fileOf(dir))).toBe(false);
    await cp.assign(0, 0);
    await cp.assign(2, 1048576);
    await cp.assign(5, 2097152);
    expect(fs.readFileSync(fileOf(dir), 'utf8')).toBe('klog-leader-epochs 1\n3\n0 0\n2 1048576\n5 2097152\n');
    expect(fs.readdirSync(dir)).toEqual([leaderEpochCheckpointFileName]);
    const again = await LeaderEpochCheckpoint.load(dir, 3_000_000);
    expect(again.entries).toEqual([
      { epoch: 0, startOffset: 0 },
      { epoch: 2, startOffset: 1048576 },
      { epoch: 5, startOffset: 2097152 },
    ]);
    expect(again.latestEpoch).toBe(5);
  });

  it('formats and parses the same entries, with or without the final newline', () => {
    const entries = [
      { epoch: 1, startOffset: 0 },
      { epoch: 4, startOffset: 34 },
    ];
    const text = formatLeaderEpochCheckpoint(entries);
    expect(parseLeaderEpochCheckpoint(text, 'f')).toEqual(entries);
    expect(parseLeaderEpochCheckpoint(text.slice(0, -1), 'f')).toEqual(entries);
    expect(parseLeaderEpochCheckpoint('klog-leader-epochs 1\n0\n', 'f')).toEqual([]);
  });

  it('refuses a file that does not read as a checkpoint, naming the file and the line', async () => {
    const cases: [string, number, RegExp][] = [
      ['', 1, /expected "klog-leader-epochs 1"/],
      ['klog-leader-epochs 2\n0\n', 1, /expected "klog-leader-epochs 1", got "klog-leader-epochs 2"/],
      ['klog-leader-epochs 1\n', 2, /expected the number of entries/],
      ['klog-leader-epochs 1\ntwo\n0 0\n', 2, /expected the number of entries, got "two"/],
      ['klog-leader-epochs 1\n2\n0 0\n', 2, /says 2 entries, the file has 1/],
      ['klog-leader-epochs 1\n1\n0 0\n\n', 2, /says 1 entries, the file has 2/],
      ['klog-leader-epochs 1\n1\n0  0\n', 3, /expected "<epoch> <startOffset>"/],
      ['klog-leader-epochs 1\n1\n-1 0\n', 3, /expected "<epoch> <startOffset>"/],
      ['klog-leader-epochs 1\n1\n01 0\n', 3, /expected "<epoch> <startOffset>"/],
      ['klog-leader-epochs 1\n1\n9999999999999999 0\n', 3, /beyond 2\^53/],
      ['klog-leader-epochs 1\n2\n3 100\n2 200\n', 4, /does not follow \(3, 100\)/],
      ['klog-leader-epochs 1\n2\n3 100\n4 100\n', 4, /epochs and offsets must increase/],
    ];
    for (const [text, line, message] of cases) {
      const dir = tempDir();
      write(dir, text);
      const err = await LeaderEpochCheckpoint.load(dir, 1000).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, JSON.stringify(text)).toBeInstanceOf(LeaderEpochCheckpointError);
      const e = err as LeaderEpochCheckpointError;
      expect(e.line, JSON.stringify(text)).toBe(line);
      expect(e.file).toBe(fileOf(dir));
      expect(e.message).toMatch(message);
      expect(e.code).toBe(-1);
      expect(fs.readFileSync(fileOf(dir), 'utf8')).toBe(text); // left for the operator
    }
  });

  it('ignores and removes a .tmp left by a crash in the middle of a write', async () => {
    const dir = tempDir();
    write(dir, 'klog-leader-epochs 1\n1\n3 0\n');
    fs.writeFileSync(`${fileOf(dir)}.tmp`, 'klog-leader-ep');
    const cp = await LeaderEpochCheckpoint.load(dir, 10);
    expect(cp.entries).toEqual([{ epoch: 3, startOffset: 0 }]);
    expect(fs.existsSync(`${fileOf(dir)}.tmp`)).toBe(false);
  });

  it('drops on load the entries that start past the log end, and rewrites the file', async () => {
    const dir = tempDir();
    write(dir, 'klog-leader-epochs 1\n3\n0 0\n2 100\n5 200\n');
    const cp = await LeaderEpochCheckpoint.load(dir, 100);
    expect(cp.entries).toEqual([
      { epoch: 0, startOffset: 0 },
      { epoch: 2, startOffset: 100 },
    ]);
    expect(fs.readFileSync(fileOf(dir), 'utf8')).toBe('klog-leader-epochs 1\n2\n0 0\n2 100\n');
  });

  it('fails to load when the replica directory does not exist', async () => {
    const dir = path.join(tempDir(), 'missing');
    await expect(LeaderEpochCheckpoint.load(dir, 0)).rejects.toMatchObject({ code: 'ENOENT' });
  });
});

describe('assign', () => {
  it('keeps the latest epoch as it is, appends a newer one, and replaces an epoch that wrote nothing', async () => {
    const dir = tempDir();
    const cp = await LeaderEpochCheckpoint.load(dir, 0);
    await cp.assign(1, 0);
    await cp.assign(1, 500); // more bytes of the same epoch
    expect(cp.entries).toEqual([{ epoch: 1, startOffset: 0 }]);
    await cp.assign(3, 500);
    await cp.assign(4, 500); // epoch 3 wrote nothing before epoch 4 began
    expect(cp.entries).toEqual([
      { epoch: 1, startOffset: 0 },
      { epoch: 4, startOffset: 500 },
    ]);
    expect((await LeaderEpochCheckpoint.load(dir, 500)).entries).toEqual(cp.entries);
  });

  it('refuses an older epoch, a start before the latest entry and bad numbers, changing nothing', async () => {
    const dir = tempDir();
    const cp = await LeaderEpochCheckpoint.load(dir, 0);
    await cp.assign(3, 100);
    const before = fs.readFileSync(fileOf(dir), 'utf8');
    await expect(cp.assign(2, 200)).rejects.toThrow(/epoch 2 is older than the latest epoch 3/);
    await expect(cp.assign(4, 50)).rejects.toThrow(/epoch 4 cannot start at 50, before epoch 3 started \(100\)/);
    await expect(cp.assign(-1, 0)).rejects.toThrow(RangeError);
    await expect(cp.assign(5, 1.5)).rejects.toThrow(/startOffset must be a non-negative integer, got 1.5/);
    expect(cp.entries).toEqual([{ epoch: 3, startOffset: 100 }]);
    expect(fs.readFileSync(fileOf(dir), 'utf8')).toBe(before);
  });

  it('runs changes one at a time, in call order', async () => {
    const dir = tempDir();
    const cp = await LeaderEpochCheckpoint.load(dir, 0);
    await Promise.all([cp.assign(0, 0), cp.assign(1, 10), cp.truncateFromEnd(10), cp.assign(2, 10), cp.assign(3, 20)]);
    expect(cp.entries).toEqual([
      { epoch: 0, startOffset: 0 },
      { epoch: 2, startOffset: 10 },
      { epoch: 3, startOffset: 20 },
    ]);
    expect((await LeaderEpochCheckpoint.load(dir, 20)).entries).toEqual(cp.entries);
  });

  it('leaves the entries in memory as they were when the write fails, and goes on after it', async () => {
    const parent = tempDir();
    const dir = path.join(parent, 'events-0');
    fs.mkdirSync(dir);
    const cp = await LeaderEpochCheckpoint.load(dir, 0);
    await cp.assign(1, 0);
    fs.rmSync(dir, { recursive: true });
    await expect(cp.assign(2, 40)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(cp.entries).toEqual([{ epoch: 1, startOffset: 0 }]);
    fs.mkdirSync(dir);
    await cp.assign(2, 40);
    expect(fs.readFileSync(fileOf(dir), 'utf8')).toBe('klog-leader-epochs 1\n2\n1 0\n2 40\n');
  });
});

describe('truncateFromEnd', () => {
  it('drops the entries that start at or after the new log end', async () => {
    const dir = tempDir();
    const cp = await LeaderEpochCheckpoint.load(dir, 0);
    for (const [epoch, start] of [
      [0, 0],
      [2, 100],
      [5, 200],
    ] as const) {
      await cp.assign(epoch, start);
    }
    await cp.truncateFromEnd(201);
    expect(cp.latestEpoch).toBe(5);
    await cp.truncateFromEnd(200);
    expect(cp.entries).toEqual([
      { epoch: 0, startOffset: 0 },
      { epoch: 2, startOffset: 100 },
    ]);
    await cp.truncateFromEnd(0);
    expect(cp.entries).toEqual([]);
    expect(fs.readFileSync(fileOf(dir), 'utf8')).toBe('klog-leader-epochs 1\n0\n');
  });
});

describe('the epoch lookups of docs/replication.md §10', () => {
  async function checkpointOf(entries: [number, number][]): Promise<LeaderEpochCheckpoint> {
    const dir = tempDir();
    const cp = await LeaderEpochCheckpoint.load(dir, 0);
    for (const [epoch, start] of entries) await cp.assign(epoch, start);
    return cp;
  }

  it('endOffsetFor answers the largest epoch not above the one asked, and where it ends', async () => {
    const cp = await checkpointOf([
      [1, 0],
      [3, 100],
      [6, 250],
    ]);
    expect(cp.endOffsetFor(0, 400)).toEqual({ epoch: -1, endOffset: -1 });
    expect(cp.endOffsetFor(1, 400)).toEqual({ epoch: 1, endOffset: 100 });
    expect(cp.endOffsetFor(2, 400)).toEqual({ epoch: 1, endOffset: 100 });
    expect(cp.endOffsetFor(3, 400)).toEqual({ epoch: 3, endOffset: 250 });
    expect(cp.endOffsetFor(5, 400)).toEqual({ epoch: 3, endOffset: 250 });
    expect(cp.endOffsetFor(6, 400)).toEqual({ epoch: 6, endOffset: 400 });
    expect(cp.endOffsetFor(9, 400)).toEqual({ epoch: 6, endOffset: 400 });
    expect((await checkpointOf([])).endOffsetFor(4, 0)).toEqual({ epoch: -1, endOffset: -1 });
  });

  it('startOfEpochAfter gives where the epochs after one begin, or the log end', async () => {
    const cp = await checkpointOf([
      [1, 0],
      [3, 100],
      [6, 250],
    ]);
    expect(cp.startOfEpochAfter(0, 400)).toBe(0);
    expect(cp.startOfEpochAfter(1, 400)).toBe(100);
    expect(cp.startOfEpochAfter(4, 400)).toBe(250);
    expect(cp.startOfEpochAfter(6, 400)).toBe(400);
  });

  it('resolve the KIP-279 divergence: the follower cuts the epoch the leader never had, then matches it', async () => {
    // m1 (10 bytes) at 0 written in epoch 1 by A; m2 at 10 in epoch 1 reached C, not B; B led
    // epoch 2 and wrote m3 at 10; C leads epoch 3 from 20, after m2.
    const leaderC = await checkpointOf([
      [1, 0],
      [3, 20],
    ]);
    const followerB = await checkpointOf([
      [1, 0],
      [2, 10],
    ]);
    let followerEnd = 20; // m1 and m3
    const leaderEnd = 20;
    for (let round = 0; round < 5; round++) {
      const e = followerB.latestEpoch!;
      const answer = leaderC.endOffsetFor(e, leaderEnd);
      if (answer.epoch === e) {
        followerEnd = Math.min(answer.endOffset, followerEnd);
        await followerB.truncateFromEnd(followerEnd);
        break;
      }
      followerEnd = followerB.startOfEpochAfter(answer.epoch, followerEnd);
      await followerB.truncateFromEnd(followerEnd);
    }
    expect(followerEnd).toBe(10); // m3 is cut; m2 is fetched from C next
    expect(followerB.entries).toEqual([{ epoch: 1, startOffset: 0 }]);
  });
});
