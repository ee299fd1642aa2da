/**
 * A log's record of its last visible message (`Log.lastVisibleMessage`, what the Kafka
 * listener's high watermark is made of: docs/kafka-protocol.md, "Offsets"): known for what this
 * process appended and flushed, by a producer or as a follower, forgotten on a cut or a reopen.
 */
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Log, ReplicaLog, lastMessageOf } from '../src/index.js';
import { messages, tempDir } from './helpers.js';

function openLog(dir: string): Log {
  return Log.open({ dir, topic: 'events', partition: 0, config: { flushPolicy: 'interval', flushIntervalMs: 60_000, flushMessages: 1_000_000 } });
}

describe('lastVisibleMessage', () => {
  it('is the last message below the flushed end, unknown before the first flush and after a reopen', async () => {
    const dir = tempDir();
    const log = openLog(dir);
    expect(log.lastVisibleMessage).toBeUndefined();
    const a = messages('a', 3); // 13 bytes each
    log.append(a, 3);
    expect(log.lastVisibleMessage).toBeUndefined(); // appended, not visible
    await log.flush();
    expect(log.lastVisibleMessage).toBe(26);
    log.append(messages('b', 2), 2); // 39, 52
    expect(log.lastVisibleMessage).toBe(26);
    await log.flush();
    expect([log.visibleEnd, log.lastVisibleMessage]).toEqual([65, 52]);
    await log.close();
    const again = openLog(dir);
    expect(again.lastVisibleMessage).toBeUndefined(); // not appended by this process: walk the log
    again.append(messages('c', 1), 1);
    await again.flush();
    expect(again.lastVisibleMessage).toBe(65);
    await again.close();
  });

  it('follows a follower’s appends, and is forgotten when it truncates', async () => {
    const dir = path.join(tempDir(), 'events-0');
    const log = await ReplicaLog.create({ dir, topic: 'events', partition: 0, topicId: '5f0c3a9e12b7d604', config: { flushIntervalMs: 60_000 } });
    await log.appendAsFollower(messages('a', 4), 4, 0);
    await log.flush();
    expect(log.lastVisibleMessage).toBe(39);
    await log.truncateTo(26);
    expect(log.lastVisibleMessage).toBeUndefined();
    await log.close();
  });

  it('lastMessageOf reads the length fields of a set; -1 for an empty set or lengths that do not add up', () => {
    const set = messages('m', 5);
    expect(lastMessageOf(set, 1000)).toBe(1000 + 52);
    expect(lastMessageOf(Buffer.alloc(0), 7)).toBe(-1);
    expect(lastMessageOf(set.subarray(0, set.length - 1), 0)).toBe(-1);
    expect(lastMessageOf(Buffer.from([0, 0, 0, 2, 1, 0]), 0)).toBe(-1);
  });
});
