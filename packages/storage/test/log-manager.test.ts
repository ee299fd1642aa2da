import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { cleanShutdownFileName, InvalidTopicError, LogDirLockedError, LogManager, lockFileName, parsePartitionDirName, WrongPartitionError } from '../src/index.js';
import { messages, payloads, recordingLogger, segmentFiles, tempDir } from './helpers.js';

const quiet = { retentionCheckIntervalMs: 3_600_000 };

describe('LogManager', () => {
  it('creates the log dir and topics with numPartitions partitions', async () => {
    const logDir = path.join(tempDir(), 'nested', 'logs');
    const manager = await LogManager.open({ logDir, numPartitions: 3, ...quiet });
    expect(fs.existsSync(logDir)).toBe(true);
    expect(manager.getLog('clicks', 0)).toBeUndefined();
    expect(manager.partitionCount('clicks')).toBeUndefined();
    const created: [string, number][] = [];
    const stopListening = manager.onTopicCreated((topic, partitions) => created.push([topic, partitions]));

    const log = await manager.getOrCreateLog('clicks', 1);
    expect([log.topic, log.partition, log.dir]).toEqual(['clicks', 1, path.join(logDir, 'clicks-1')]);
    expect(manager.partitionCount('clicks')).toBe(3);
    expect(fs.readdirSync(logDir).sort()).toEqual(['.lock', 'clicks-0', 'clicks-1', 'clicks-2']);
    for (const p of [0, 1, 2]) expect(segmentFiles(path.join(logDir, `clicks-${p}`))).toEqual(['00000000000000000000.kafka']);
    expect(await manager.getOrCreateLog('clicks', 1)).toBe(log);
    expect(manager.getLog('clicks', 2)).toBeDefined();
    expect([...manager.topics()]).toEqual([['clicks', 3]]);
    expect([...manager.logs()]).toHaveLength(3);
    expect(await manager.createTopic('clicks')).toBe(3);
    expect(created).toEqual([['clicks', 3]]);
    stopListening();
    await manager.createTopic('unheard');
    expect(created).toEqual([['clicks', 3]]);

    let err: unknown;
    try {
      await manager.getOrCreateLog('clicks', 3);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(WrongPartitionError);
    expect(err).toMatchObject({ code: 3, topic: 'clicks', partition: 3, partitionCount: 3 });
    await expect(manager.getOrCreateLog('clicks', -1)).rejects.toThrow(WrongPartitionError);
    await expect(manager.getOrCreateLog('clicks', 1.5)).rejects.toThrow(WrongPartitionError);
    await expect(manager.getOrCreateLog('../escape', 0)).rejects.toThrow(InvalidTopicError);
    await expect(manager.createTopic('')).rejects.toThrow(InvalidTopicError);
    await expect(manager.getOrCreateLog('fresh', 3)).rejects.toThrow(WrongPartitionError);
    expect(manager.partitionCount('fresh')).toBeUndefined();
    expect(fs.readdirSync(logDir).sort()).toEqual(['.lock', 'clicks-0', 'clicks-1', 'clicks-2', 'unheard-0', 'unheard-1', 'unheard-2']);
    expect(await manager.createTopic('five', 5)).toBe(5);
    expect(await manager.createTopic('five', 2)).toBe(5);
    await expect(manager.createTopic('none', 0)).rejects.toThrow(RangeError);
    expect(manager.partitionCount('none')).toBeUndefined();
    await manager.close();
  });

  it('loads existing partitions, keeps their count, splits names at the last dash and skips others', async () => {
    const logDir = tempDir();
    const first = await LogManager.open({ logDir, numPartitions: 2, ...quiet });
    (await first.getOrCreateLog('page-views-eu', 1)).append(messages('pv', 2), 2);
    await first.close();
    fs.mkdirSync(path.join(logDir, 'legacy-0'));
    fs.mkdirSync(path.join(logDir, 'legacy-4'));
    fs.mkdirSync(path.join(logDir, 'nodash'));
    fs.mkdirSync(path.join(logDir, 'bad-p1'));
    fs.writeFileSync(path.join(logDir, 'stray-0'), 'not a directory');

    const logger = recordingLogger();
    const manager = await LogManager.open({ logDir, numPartitions: 2, logger, ...quiet });
    expect(Object.fromEntries(manager.topics())).toEqual({ 'page-views-eu': 2, legacy: 5 });
    expect(payloads(manager.getLog('page-views-eu', 1)!.read(0, 100))).toEqual(['pv-0', 'pv-1']);
    const warned = logger.entries.filter((e) => e.level === 'warn').map((e) => (e.obj as { dir: string }).dir);
    expect(warned.sort()).toEqual(['bad-p1', 'nodash']);
    expect(manager.getLog('legacy', 2)?.partition).toBe(2); // a gap is filled on open
    expect(await manager.getOrCreateLog('legacy', 2)).toBe(manager.getLog('legacy', 2));
    await expect(manager.getOrCreateLog('legacy', 5)).rejects.toThrow(WrongPartitionError);
    expect(manager.partitionCount('legacy')).toBe(5);
    await manager.close();
  });

  it('parses partition directory names', () => {
    expect(parsePartitionDirName('a-b-c-12')).toEqual({ topic: 'a-b-c', partition: 12 });
    expect(parsePartitionDirName('t-0')).toEqual({ topic: 't', partition: 0 });
    expect(parsePartitionDirName('t--1')).toEqual({ topic: 't-', partition: 1 });
    for (const bad of ['t', '-1', 't-', 't-x', 't-1.5', 't-01', 'sp ace-1']) expect(parsePartitionDirName(bad)).toBeUndefined();
  });

  it('writes the clean-shutdown marker on close and removes it on open', async () => {
    const logDir = tempDir();
    const marker = path.join(logDir, cleanShutdownFileName);
    const a = await LogManager.open({ logDir, ...quiet });
    expect(fs.existsSync(marker)).toBe(false);
    (await a.getOrCreateLog('t', 0)).append(messages('x', 1), 1);
    await a.close();
    await a.close(); // idempotent
    expect(fs.existsSync(marker)).toBe(true);
    const b = await LogManager.open({ logDir, ...quiet });
    expect(fs.existsSync(marker)).toBe(false);
    expect(b.getLog('t', 0)!.visibleEnd).toBe(13);
    await b.close();
  });

  it('flushes all logs and runs retention over all of them', async () => {
    const logDir = tempDir();
    const manager = await LogManager.open({ logDir, numPartitions: 2, segmentBytes: 1024, flushMessages: 10_000, retentionMs: 60_000, ...quiet });
    const logs = [await manager.getOrCreateLog('a', 0), await manager.getOrCreateLog('a', 1), await manager.getOrCreateLog('b', 0)];
    for (const log of logs) for (let i = 0; i < 12; i++) log.append(messages(`m${i}`, 1, 100), 1); // segments 0, 990
    expect(logs.map((l) => l.visibleEnd)).toEqual([0, 0, 0]);
    await manager.flushAll();
    expect(logs.map((l) => l.visibleEnd)).toEqual([1320, 1320, 1320]);
    expect(await manager.cleanupExpired()).toBe(0);
    expect(await manager.cleanupExpired(Date.now() + 120_000)).toBe(6); // 2 each, 3 logs rolled
    for (const log of logs) {
      expect(log.segmentStarts()).toEqual([1320]);
      expect(segmentFiles(log.dir)).toEqual(['00000000000000001320.kafka']);
    }
    await manager.close();
    await expect(manager.createTopic('late')).rejects.toThrow(/closed/);
  });

  it('runs retention on its timer', async () => {
    const logDir = tempDir();
    const manager = await LogManager.open({ logDir, segmentBytes: 1024, retentionBytes: 0, flushMessages: 1, retentionCheckIntervalMs: 20 });
    const log = await manager.getOrCreateLog('r', 0);
    for (let i = 0; i < 20; i++) log.append(messages(`m${i}`, 1, 100), 1);
    await log.flush();
    expect(log.segmentCount).toBe(3);
    for (let i = 0; i < 50 && log.segmentCount > 1; i++) await new Promise((r) => setTimeout(r, 10));
    expect(log.segmentStarts()).toEqual([1980]);
    await manager.close();
  });

  it('keeps a second log manager out of its log dir, and takes over the lock of a process that is gone, whatever pid it names', async () => {
    const logDir = tempDir();
    const first = await LogManager.open({ logDir, ...quiet });
    expect(fs.readFileSync(path.join(logDir, lockFileName), 'utf8')).toBe(`${process.pid}\n`);
    await expect(LogManager.open({ logDir, ...quiet })).rejects.toBeInstanceOf(LogDirLockedError);
    // A process that holds it (this test's parent, alive) keeps others out too.
    fs.writeFileSync(path.join(logDir, lockFileName), `${process.ppid}\n`);
    await expect(LogManager.open({ logDir, ...quiet })).rejects.toThrow(new RegExp(`in use by process ${process.ppid}`));
    fs.writeFileSync(path.join(logDir, lockFileName), `${process.pid}\n`);
    await first.close();
    expect(fs.existsSync(path.join(logDir, lockFileName))).toBe(false);
    // The lock of a crashed broker (its pid no longer runs) is stale and taken over.
    const gone = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']).stdout.toString();
    fs.writeFileSync(path.join(logDir, lockFileName), `${gone}\n`);
    const second = await LogManager.open({ logDir, ...quiet });
    expect(fs.readFileSync(path.join(logDir, lockFileName), 'utf8')).toBe(`${process.pid}\n`);
    await second.close({ markClean: false });
    expect(fs.existsSync(path.join(logDir, lockFileName))).toBe(false);
    // A lock file that names a live process (PID 1, this test's own pid reused) but that no
    // one holds locked is a dead broker's: taken over too.
    for (const pid of [1, process.pid, process.ppid]) {
      fs.writeFileSync(path.join(logDir, lockFileName), `${pid}\n`);
      const again = await LogManager.open({ logDir, ...quiet });
      await again.close({ markClean: false });
    }
  });
});
