/**
 * Replica logs in a log manager (docs/replication.md §8.1): apart from the paper logs, created
 * with their topic id, loaded with their checkpoint, renamed aside when stale, deleted.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  LeaderEpochCheckpointError,
  leaderEpochCheckpointFileName,
  LogManager,
  ReplicaDirError,
  ReplicaLog,
  ReplicatedTopicError,
  replicaPropertiesFileName,
} from '../src/index.js';
import { messages, payloads, syncFileCallsDuring, tempDir } from './helpers.js';

const idA = '5f0c3a9e12b7d604';
const idB = '00000000000000b2';

function openManager(logDir: string): Promise<LogManager> {
  return LogManager.open({ logDir, flushIntervalMs: 60_000 });
}

describe('replica logs in the log manager', () => {
  it('keeps replicas apart from paper logs: never in getLog, logs, topics or onTopicCreated', async () => {
    const logDir = tempDir();
    const manager = await openManager(logDir);
    const created: string[] = [];
    manager.onTopicCreated((topic) => created.push(topic));
    await manager.getOrCreateLog('clicks', 0);
    const replica = await manager.createReplicaLog('events', 2, idA);
    expect(replica).toBeInstanceOf(ReplicaLog);
    expect(fs.readFileSync(path.join(logDir, 'events-2', replicaPropertiesFileName), 'utf8')).toBe(`topic.id=${idA}\n`);
    expect(manager.getReplicaLog('events', 2)).toBe(replica);
    expect(await manager.createReplicaLog('events', 2, idA)).toBe(replica); // the one held
    expect(manager.getLog('events', 2)).toBeUndefined();
    expect([...manager.topics().keys()]).toEqual(['clicks']);
    expect([...manager.logs()].map((l) => l.topic)).toEqual(['clicks']);
    expect(created).toEqual(['clicks']);
    expect([...manager.replicaLogs()]).toEqual([replica]);
    expect(manager.replicaDirs().map(({ topic, partition, topicId }) => ({ topic, partition, topicId }))).toEqual([{ topic: 'events', partition: 2, topicId: idA }]);
    // One namespace for topic names (docs/replication.md §3).
    await expect(manager.getOrCreateLog('events', 0)).rejects.toThrow(ReplicatedTopicError);
    await expect(manager.createTopic('events')).rejects.toThrow(ReplicatedTopicError);
    await expect(manager.createReplicaLog('clicks', 0, idA)).rejects.toThrow(/holds a paper partition/);
    await expect(manager.createReplicaLog('clicks', 1, idA)).rejects.toThrow(/is a paper topic/);
    await expect(manager.createReplicaLog('events', 2, idB)).rejects.toThrow(ReplicaDirError);
    await expect(manager.createReplicaLog('events', 3, 'not-an-id')).rejects.toThrow(RangeError);
    // Flushes and retention cover replicas.
    await replica.appendAsFollower(messages('r', 2), 2, 0);
    await manager.flushAll();
    expect(replica.visibleEnd).toBe(26);
    await manager.close();
  });

  it('loads a replica at start with its topic id and checkpoint, as a replica', async () => {
    const logDir = tempDir();
    let manager = await openManager(logDir);
    const replica = await manager.createReplicaLog('events', 0, idA);
    await replica.leaderEpochs.assign(0, 0);
    await replica.appendAsFollower(messages('a', 3), 3, 0);
    await replica.leaderEpochs.assign(1, 39);
    await manager.close();
    manager = await openManager(logDir);
    const loaded = manager.getReplicaLog('events', 0)!;
    expect(loaded).toBeInstanceOf(ReplicaLog);
    expect([loaded.topicId, loaded.logEndOffset]).toEqual([idA, 39]);
    expect(loaded.leaderEpochs.entries).toEqual([{ epoch: 0, startOffset: 0 }, { epoch: 1, startOffset: 39 }]);
    expect(payloads(loaded.read(0, 100))).toEqual(['a-0', 'a-1', 'a-2']);
    expect(manager.topics().size).toBe(0);
    expect([...manager.logs()]).toEqual([]);
    await manager.close();
  });

  it('keeps a replica whose checkpoint does not parse out of every role, without failing the start', async () => {
    const logDir = tempDir();
    let manager = await openManager(logDir);
    await manager.createReplicaLog('events', 0, idA);
    await manager.createReplicaLog('events', 1, idA);
    await manager.close();
    fs.writeFileSync(path.join(logDir, 'events-1', leaderEpochCheckpointFileName), 'klog-leader-epochs 1\n2\n0 0\n');
    manager = await openManager(logDir);
    expect(manager.getReplicaLog('events', 0)).toBeInstanceOf(ReplicaLog);
    expect(() => manager.getReplicaLog('events', 1)).toThrow(LeaderEpochCheckpointError);
    const failed = manager.replicaDirs().find((r) => r.partition === 1)!;
    expect([failed.topicId, failed.log, failed.error]).toEqual([idA, undefined, expect.any(LeaderEpochCheckpointError)]);
    await expect(manager.createReplicaLog('events', 1, idA)).rejects.toThrow(/failed to open/);
    // A paper produce to the name is still refused.
    await expect(manager.getOrCreateLog('events', 1)).rejects.toThrow(ReplicatedTopicError);
    expect(await manager.deleteReplicaLog('events', 1)).toBe(true);
    expect(fs.existsSync(path.join(logDir, 'events-1'))).toBe(false);
    await manager.close();
  });

  it('renames a stale replica aside, counts it, and leaves it alone at the next start', async () => {
    const logDir = tempDir();
    let manager = await openManager(logDir);
    const replica = await manager.createReplicaLog('events', 0, idA);
    await replica.appendAsFollower(messages('kept', 1), 1, 0);
    const before = Date.now();
    const stale = (await manager.renameStaleReplica('events', 0))!;
    expect(path.dirname(stale)).toBe(logDir);
    const match = /^events-0\.(\d+)\.stale$/.exec(path.basename(stale));
    expect(Number(match![1])).toBeGreaterThanOrEqual(before);
    expect(manager.staleReplicaDirs).toBe(1);
    expect(manager.getReplicaLog('events', 0)).toBeUndefined();
    expect(await manager.renameStaleReplica('events', 0)).toBeUndefined();
    expect(fs.readdirSync(stale).sort()).toEqual(['00000000000000000000.kafka', replicaPropertiesFileName]);
    expect(fs.statSync(path.join(stale, '00000000000000000000.kafka')).size).toBe(16); // flushed on close, nothing deleted
    await manager.close();
    manager = await openManager(logDir);
    expect([manager.replicaDirs(), manager.topics().size, manager.staleReplicaDirs]).toEqual([[], 0, 0]);
    expect(fs.existsSync(stale)).toBe(true);
    // The partition can be created again, as a new replica.
    expect((await manager.createReplicaLog('events', 0, idB)).logEndOffset).toBe(0);
    await manager.close();
  });

  it('deletes a replica log off the request path, and removes what a crash left of a creation or a deletion', async () => {
    const logDir = tempDir();
    let manager = await openManager(logDir);
    const replica = await manager.createReplicaLog('events', 0, idA);
    await replica.appendAsFollower(messages('x', 1), 1, 0);
    expect(await manager.deleteReplicaLog('events', 0)).toBe(true);
    expect(replica.closed).toBe(true);
    expect(fs.readdirSync(logDir).filter((n) => n.startsWith('events'))).toEqual([]);
    expect(await manager.deleteReplicaLog('events', 0)).toBe(false);
    await manager.close();
    // A crash in the middle of a creation and of a deletion.
    fs.mkdirSync(path.join(logDir, 'events-1.creating'));
    fs.writeFileSync(path.join(logDir, 'events-1.creating', replicaPropertiesFileName), `topic.id=${idA}\n`);
    fs.mkdirSync(path.join(logDir, 'events-2.1764600000000.deleting'));
    fs.writeFileSync(path.join(logDir, 'events-2.1764600000000.deleting', '00000000000000000000.kafka'), messages('gone', 1));
    manager = await openManager(logDir);
    expect(fs.readdirSync(logDir).filter((n) => n.startsWith('events'))).toEqual([]);
    expect([manager.replicaDirs(), manager.topics().size]).toEqual([[], 0]);
    await manager.close();
  });

  it('creates, deletes and renames replica logs without a synchronous file call', async () => {
    const logDir = tempDir();
    const manager = await openManager(logDir);
    const calls = await syncFileCallsDuring(async () => {
      const replica = await manager.createReplicaLog('events', 0, idA);
      await replica.appendAsFollower(messages('x', 1), 1, 0);
      await manager.createReplicaLog('events', 1, idA);
      await manager.deleteReplicaLog('events', 0);
      await manager.renameStaleReplica('events', 1);
    });
    expect(calls).toEqual([]);
    expect(fs.readdirSync(logDir).filter((n) => n.startsWith('events')).map((n) => n.replace(/\d{13}/, 'MS'))).toEqual(['events-1.MS.stale']);
    await manager.close();
  });

  it('counts replicas toward max.partitions', async () => {
    const logDir = tempDir();
    const manager = await LogManager.open({ logDir, maxPartitions: 2 });
    await manager.createReplicaLog('events', 0, idA);
    await manager.getOrCreateLog('clicks', 0);
    await expect(manager.createReplicaLog('events', 1, idA)).rejects.toMatchObject({ name: 'TooManyPartitionsError' });
    await expect(manager.createTopic('views')).rejects.toMatchObject({ name: 'TooManyPartitionsError' });
    await manager.close();
  });
});
