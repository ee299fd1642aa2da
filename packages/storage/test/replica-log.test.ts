/**
 * A replica's log (docs/replication.md §8.3): reads bounded by `upTo`, the follower's appends
 * rolling where the leader rolled, truncation, starting over, and the crashes between their steps.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  Log,
  LogOffsetOutOfRangeError,
  ReplicaDirError,
  ReplicaLog,
  leaderEpochCheckpointFileName,
  replicaPropertiesFileName,
  type LogConfig,
} from '../src/index.js';
import { messages, payloads, segmentFiles, syncFileCallsDuring, tempDir } from './helpers.js';

const topicId = '5f0c3a9e12b7d604';

function createReplica(dir: string, config: Partial<LogConfig> = {}): Promise<ReplicaLog> {
  return ReplicaLog.create({ dir, topic: 'events', partition: 0, topicId, config: { flushIntervalMs: 60_000, ...config } });
}

function loadReplica(dir: string, config: Partial<LogConfig> = {}, recover = true): Promise<ReplicaLog> {
  return ReplicaLog.load({ dir, topic: 'events', partition: 0, config: { flushIntervalMs: 60_000, ...config }, recover });
}

/** Files of `dir` with their bytes, segments and checkpoint alike. */
function filesOf(dir: string): Map<string, Buffer> {
  return new Map(segmentFiles(dir).map((f) => [f, fs.readFileSync(path.join(dir, f))]));
}

/** One-message sets of 60 bytes each (50-byte payloads). */
function sets(prefix: string, count: number): Buffer[] {
  return Array.from({ length: count }, (_, i) => messages(`${prefix}${i}`, 1, 50));
}

describe('creating and loading a replica', () => {
  it('writes replica.properties before the directory takes its name, with an empty segment 0 and no checkpoint', async () => {
    const parent = tempDir();
    const dir = path.join(parent, 'events-0');
    const log = await createReplica(dir);
    expect(fs.readdirSync(parent)).toEqual(['events-0']); // no .creating left
    expect(fs.readFileSync(path.join(dir, replicaPropertiesFileName), 'utf8')).toBe(`topic.id=${topicId}\n`);
    expect(fs.readdirSync(dir).sort()).toEqual(['00000000000000000000.kafka', replicaPropertiesFileName]);
    expect([log.topicId, log.earliestOffset, log.logEndOffset, log.leaderEpochs.entries]).toEqual([topicId, 0, 0, []]);
    await log.close();
  });

  it('opens a replica of the same topic id, and refuses another id or a paper partition', async () => {
    const parent = tempDir();
    const dir = path.join(parent, 'events-0');
    const log = await createReplica(dir);
    await log.appendAsFollower(messages('a', 2), 2, 0);
    await log.close();
    const again = await createReplica(dir);
    expect(again.logEndOffset).toBe(26);
    await again.close();
    await expect(ReplicaLog.create({ dir, topic: 'events', partition: 0, topicId: '0000000000000001' })).rejects.toThrow(ReplicaDirError);
    const paperDir = path.join(parent, 'events-1');
    await (await Log.create({ dir: paperDir, topic: 'events', partition: 1 })).close();
    await expect(ReplicaLog.create({ dir: paperDir, topic: 'events', partition: 1, topicId })).rejects.toThrow(/without replica.properties/);
    await expect(ReplicaLog.load({ dir: paperDir, topic: 'events', partition: 1 })).rejects.toThrow(ReplicaDirError);
    expect(fs.readdirSync(paperDir)).toEqual(['00000000000000000000.kafka']); // untouched
  });

  it('removes a half-built .creating directory left by a crash and builds the replica again', async () => {
    const parent = tempDir();
    const dir = path.join(parent, 'events-0');
    fs.mkdirSync(`${dir}.creating`);
    fs.writeFileSync(path.join(`${dir}.creating`, replicaPropertiesFileName), 'topic.id=');
    const log = await createReplica(dir);
    expect(fs.readdirSync(parent)).toEqual(['events-0']);
    await log.close();
  });

  it('creates, appends as a follower, truncates, starts over and flushes without a synchronous file call', async () => {
    const dir = path.join(tempDir(), 'events-0');
    let log: ReplicaLog | undefined;
    const calls = await syncFileCallsDuring(async () => {
      log = await createReplica(dir, { flushPolicy: 'interval', flushMessages: 10_000 });
      for (const set of sets('a', 3)) await log.appendAsFollower(set, 1, 0);
      await log.appendAsFollower(sets('b', 1)[0]!, 1, 180); // a roll
      await log.flush();
      await log.truncateTo(120);
      await log.truncateFullyAndStartAt(5000);
      await log.appendAsFollower(sets('c', 1)[0]!, 1, 5000);
      await log.flush();
    });
    expect(calls).toEqual([]);
    expect([log!.earliestOffset, log!.visibleEnd]).toEqual([5000, 5060]);
    await log!.close();
  });
});

describe('readRange and read bounded by upTo', () => {
  it('reads unflushed bytes up to upTo, refuses an upTo past the log end, and names the segment start', async () => {
    const dir = tempDir();
    const log = Log.open({ dir, topic: 'events', partition: 0, config: { segmentBytes: 150, flushPolicy: 'interval', flushMessages: 10_000, flushIntervalMs: 60_000 } });
    for (const set of sets('m', 4)) log.append(set, 1); // segments 0 (120 bytes) and 120 (120 bytes)
    expect(log.segmentStarts()).toEqual([0, 120]);
    expect(log.visibleEnd).toBe(0);
    // The existing callers (no upTo) see the visible end only.
    expect(log.read(0, 1000).length).toBe(0);
    expect(() => log.readRange(60, 100)).toThrow(LogOffsetOutOfRangeError);
    // A follower's fetch reads to the log end, one segment at a time.
    const region = log.readRange(60, 1000, log.logEndOffset);
    expect([region.offset, region.length, region.segmentStart]).toEqual([60, 60, 0]);
    expect(payloads(region.read(0, region.length))).toEqual(['m1-0'.padEnd(50, '.')]);
    region.release();
    const second = log.readRange(120, 1000, log.logEndOffset);
    expect([second.length, second.segmentStart]).toEqual([120, 120]);
    second.release();
    // A high watermark below the log end bounds a consumer's read.
    expect(log.read(120, 1000, 180).length).toBe(60);
    expect(log.readRange(180, 1000, 180).length).toBe(0);
    // An empty region names the segment holding its offset, not a segment starting there.
    expect(log.readRange(240, 1000, 240).segmentStart).toBe(120);
    expect(log.readRange(120, 1000, 120).segmentStart).toBe(120);
    expect(() => log.read(181, 10, 180)).toThrow(expect.objectContaining({ code: 1, end: 180 }) as Error);
    expect(() => log.read(0, 10, 241)).toThrow(RangeError);
    expect(() => log.read(0, 10, 1.5)).toThrow(RangeError);
    // flush() resolves with the flushed end, whatever flush.messages and flush.ms say.
    expect(await log.flush()).toBe(240);
    expect(log.read(0, 1000).length).toBe(120);
    await log.close();
  });
});

describe('appendAsFollower', () => {
  it('rolls exactly where the leader rolled, never by its own segment.bytes', async () => {
    const log = await createReplica(path.join(tempDir(), 'events-0'), { segmentBytes: 100 });
    for (const set of sets('a', 4)) await log.appendAsFollower(set, 1, 0); // 240 bytes in segment 0, past segment.bytes
    expect(log.segmentStarts()).toEqual([0]);
    expect(await log.appendAsFollower(sets('b', 1)[0]!, 1, 240)).toEqual({ offset: 240, nextOffset: 300 });
    expect(log.segmentStarts()).toEqual([0, 240]);
    expect(await log.appendAsFollower(Buffer.alloc(0), 0, 300)).toEqual({ offset: 300, nextOffset: 300 }); // an empty set at a new segment rolls too
    expect(log.segmentStarts()).toEqual([0, 240, 300]);
    expect(await log.flush()).toBe(300);
    await log.close();
  });

  it('refuses a segment start that does not match, changing nothing', async () => {
    const log = await createReplica(path.join(tempDir(), 'events-0'));
    for (const set of sets('a', 2)) await log.appendAsFollower(set, 1, 0);
    await log.appendAsFollower(sets('b', 1)[0]!, 1, 120);
    const set = sets('c', 1)[0]!;
    await expect(log.appendAsFollower(set, 1, 0)).rejects.toThrow(RangeError); // before the active segment
    await expect(log.appendAsFollower(set, 1, 150)).rejects.toThrow(/does not match/); // past it, not the log end
    await expect(log.appendAsFollower(set, 1, 200)).rejects.toThrow(RangeError);
    await expect(log.appendAsFollower(set, 1, -1)).rejects.toThrow(RangeError);
    expect([log.segmentStarts(), log.logEndOffset]).toEqual([[0, 120], 180]);
    await log.close();
  });

  it('gives segment files byte-identical to the leader log given the same sets', async () => {
    const leaderDir = path.join(tempDir(), 'events-0');
    const followerDir = path.join(tempDir(), 'events-0');
    const leader = Log.open({ dir: leaderDir, topic: 'events', partition: 0, config: { segmentBytes: 1000, flushIntervalMs: 60_000 } });
    // A follower with another segment.bytes: only the leader's segment starts count.
    const follower = await createReplica(followerDir, { segmentBytes: 64 * 1024 * 1024 });
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    for (let i = 0; i < 200; i++) {
      const count = 1 + rand(5);
      leader.append(messages(`s${i}`, count, rand(120)), count);
    }
    await leader.flush();
    // Fetch as REPLICA_FETCH does: from the follower's log end, up to the leader's log end, at most maxBytes, one segment at a time.
    let fetches = 0;
    while (follower.logEndOffset < leader.logEndOffset) {
      const region = leader.readRange(follower.logEndOffset, 1 + rand(700), leader.logEndOffset);
      const bytes = region.read(0, region.length);
      // Keep whole messages only, as the fetcher does (a partial tail is fetched again).
      let whole = 0;
      while (whole + 4 <= bytes.length && whole + 4 + bytes.readInt32BE(whole) <= bytes.length) whole += 4 + bytes.readInt32BE(whole);
      const segmentStart = region.segmentStart;
      region.release();
      if (whole === 0) continue;
      await follower.appendAsFollower(bytes.subarray(0, whole), 1, segmentStart);
      await follower.flush();
      fetches++;
    }
    expect(fetches).toBeGreaterThan(20);
    // Caught up: a fetch at the leader's log end is empty and names the leader's active segment, so nothing rolls.
    const tail = leader.readRange(follower.logEndOffset, 1000, leader.logEndOffset);
    expect(tail.length).toBe(0);
    await follower.appendAsFollower(Buffer.alloc(0), 0, tail.segmentStart);
    expect(follower.segmentStarts()).toEqual(leader.segmentStarts());
    expect(leader.segmentCount).toBeGreaterThan(5);
    expect(filesOf(followerDir)).toEqual(filesOf(leaderDir));
    await Promise.all([leader.close(), follower.close()]);
  });
});

describe('truncateTo', () => {
  /** A replica of segments 0, 180 and 360 (three 60-byte messages each) and epochs 0 at 0, 1 at 240, 2 at 420. */
  async function threeSegments(dir: string): Promise<ReplicaLog> {
    const log = await createReplica(dir);
    await log.leaderEpochs.assign(0, 0);
    for (const [i, set] of sets('m', 9).entries()) {
      if (i === 4) await log.leaderEpochs.assign(1, 240);
      if (i === 7) await log.leaderEpochs.assign(2, 420);
      await log.appendAsFollower(set, 1, Math.floor(i / 3) * 180);
    }
    await log.flush();
    return log;
  }

  it('deletes the later segments, cuts and fsyncs the kept one, moves visibleEnd down and drops the later epochs', async () => {
    const dir = path.join(tempDir(), 'events-0');
    const log = await threeSegments(dir);
    expect([log.segmentStarts(), log.visibleEnd]).toEqual([[0, 180, 360], 540]);
    expect(await log.truncateTo(240)).toBe(300);
    expect([log.segmentStarts(), log.logEndOffset, log.visibleEnd]).toEqual([[0, 180], 240, 240]);
    expect(segmentFiles(dir)).toEqual(['00000000000000000000.kafka', '00000000000000000180.kafka']);
    expect(fs.statSync(path.join(dir, '00000000000000000180.kafka')).size).toBe(60);
    expect(log.leaderEpochs.entries).toEqual([{ epoch: 0, startOffset: 0 }]);
    expect(() => log.read(240, 10)).not.toThrow();
    expect(() => log.read(241, 10)).toThrow(LogOffsetOutOfRangeError);
    // The kept segment is the active one again: the leader's next bytes go there.
    expect(await log.appendAsFollower(messages('n', 1, 50), 1, 180)).toEqual({ offset: 240, nextOffset: 300 });
    expect(await log.flush()).toBe(300);
    expect(payloads(log.read(180, 1000))).toEqual(['m3-0'.padEnd(50, '.'), 'n-0'.padEnd(50, '.')]);
    await log.close();
  });

  it('deletes a segment that starts at the offset, so the one before takes the leader\'s next bytes', async () => {
    const dir = path.join(tempDir(), 'events-0');
    const log = await threeSegments(dir);
    await log.truncateTo(360);
    expect([log.segmentStarts(), log.logEndOffset]).toEqual([[0, 180], 360]);
    expect(log.leaderEpochs.entries).toEqual([{ epoch: 0, startOffset: 0 }, { epoch: 1, startOffset: 240 }]);
    await log.appendAsFollower(messages('n', 1, 50), 1, 180); // the leader's epoch wrote on in segment 180
    expect(log.segmentStarts()).toEqual([0, 180]);
    await log.truncateTo(0); // to the earliest offset: one empty segment 0 left
    expect([log.segmentStarts(), log.logEndOffset, log.visibleEnd, log.leaderEpochs.entries]).toEqual([[0], 0, 0, []]);
    expect(segmentFiles(dir)).toEqual(['00000000000000000000.kafka']);
    await log.close();
  });

  it('changes nothing at or past the log end, and refuses an offset below the earliest', async () => {
    const dir = path.join(tempDir(), 'events-0');
    const log = await threeSegments(dir);
    const before = filesOf(dir);
    expect(await log.truncateTo(540)).toBe(0);
    expect(await log.truncateTo(10_000)).toBe(0);
    expect(filesOf(dir)).toEqual(before);
    expect(log.leaderEpochs.entries).toHaveLength(3);
    await log.truncateFullyAndStartAt(1000);
    await expect(log.truncateTo(999)).rejects.toThrow(/below its earliest offset 1000/);
    await expect(log.truncateTo(1.5)).rejects.toThrow(RangeError);
    await log.close();
  });

  it('survives a reopen: the truncated log and checkpoint are what is on disk', async () => {
    const dir = path.join(tempDir(), 'events-0');
    const log = await threeSegments(dir);
    await log.truncateTo(300);
    await log.close();
    const again = await loadReplica(dir);
    expect([again.segmentStarts(), again.logEndOffset, again.visibleEnd]).toEqual([[0, 180], 300, 300]);
    expect(again.leaderEpochs.entries).toEqual([{ epoch: 0, startOffset: 0 }, { epoch: 1, startOffset: 240 }]);
    expect(payloads(again.read(240, 100))).toEqual(['m4-0'.padEnd(50, '.')]);
    await again.close();
  });

  it('drops on load the epochs past the log end when a crash came between the log\'s cut and the checkpoint\'s', async () => {
    const dir = path.join(tempDir(), 'events-0');
    const log = await threeSegments(dir);
    await log.close();
    // The log's cut to 300 reached the disk (later segment removed, kept one cut), the checkpoint's did not.
    fs.rmSync(path.join(dir, '00000000000000000360.kafka'));
    fs.truncateSync(path.join(dir, '00000000000000000180.kafka'), 120);
    expect(fs.readFileSync(path.join(dir, leaderEpochCheckpointFileName), 'utf8')).toBe('klog-leader-epochs 1\n3\n0 0\n1 240\n2 420\n');
    const again = await loadReplica(dir);
    expect(again.logEndOffset).toBe(300);
    expect(again.leaderEpochs.entries).toEqual([{ epoch: 0, startOffset: 0 }, { epoch: 1, startOffset: 240 }]);
    expect(fs.readFileSync(path.join(dir, leaderEpochCheckpointFileName), 'utf8')).toBe('klog-leader-epochs 1\n2\n0 0\n1 240\n');
    await again.close();
  });

  it('never lets a flush that started before the cut move visibleEnd past it', async () => {
    const dir = path.join(tempDir(), 'events-0');
    const log = await createReplica(dir, { flushPolicy: 'interval', flushMessages: 10_000 });
    for (const set of sets('m', 5)) await log.appendAsFollower(set, 1, 0);
    const flushing = log.flush(); // target 300
    const cut = log.truncateTo(120);
    await flushing;
    await cut;
    expect([log.logEndOffset, log.visibleEnd]).toEqual([120, 120]);
    await log.appendAsFollower(messages('n', 1, 50), 1, 0);
    expect(await log.flush()).toBe(180);
    await log.close();
  });

  it('refuses a leader append while a follower operation runs', async () => {
    const log = await createReplica(path.join(tempDir(), 'events-0'));
    await log.appendAsFollower(messages('a', 1), 1, 0);
    const cut = log.truncateTo(0);
    expect(() => log.append(messages('b', 1), 1)).toThrow(/as a follower/);
    await cut;
    expect(log.append(messages('b', 1), 1)).toEqual({ offset: 0, nextOffset: 13 });
    await log.close();
  });
});

describe('truncateFullyAndStartAt', () => {
  it('deletes every segment, starts empty at the offset, clears the checkpoint, and survives a reopen', async () => {
    const dir = path.join(tempDir(), 'events-0');
    const log = await createReplica(dir);
    await log.leaderEpochs.assign(3, 0);
    for (const [i, set] of sets('m', 4).entries()) await log.appendAsFollower(set, 1, i < 2 ? 0 : 120);
    await log.flush();
    await log.truncateFullyAndStartAt(100_000);
    expect([log.segmentStarts(), log.earliestOffset, log.logEndOffset, log.visibleEnd]).toEqual([[100_000], 100_000, 100_000, 100_000]);
    expect(segmentFiles(dir)).toEqual(['00000000000000100000.kafka']);
    expect(log.leaderEpochs.entries).toEqual([]);
    await log.leaderEpochs.assign(4, 100_000);
    expect(await log.appendAsFollower(messages('n', 1, 50), 1, 100_000)).toEqual({ offset: 100_000, nextOffset: 100_060 });
    expect(await log.flush()).toBe(100_060);
    await log.close();
    const again = await loadReplica(dir);
    expect([again.earliestOffset, again.logEndOffset, again.leaderEpochs.entries]).toEqual([100_000, 100_060, [{ epoch: 4, startOffset: 100_000 }]]);
    expect(payloads(again.read(100_000, 100))).toEqual(['n-0'.padEnd(50, '.')]);
    // Starting over below the earliest offset works too (a leader whose log starts lower).
    await again.truncateFullyAndStartAt(0);
    expect([again.segmentStarts(), again.logEndOffset]).toEqual([[0], 0]);
    await again.close();
  });
});
