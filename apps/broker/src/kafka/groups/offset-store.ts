/**
 * Where the offsets Kafka consumer groups commit are kept (docs/kafka-protocol.md, "Consumer
 * groups"): in cluster mode in ZooKeeper under the paper's
 * `/consumers/<group>/offsets/<topic>/<brokerId>-<partition>`, a replicated topic's under
 * `…/<topic>/<partition>` (docs/replication.md §14; so `klog groups --describe` shows them beside
 * klog's own groups); a standalone broker keeps them in its log dir, one JSON file
 * per group in `kafka-group-offsets/`, written to a temporary file, fsynced and renamed.
 */
import { open, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { makeDirs } from '@klog/storage';
import { OffsetRegistry, checkGroup, isReplicatedPartition, type GroupPartition, type ZkClient } from '@klog/zk-registry';

/** Commits and reads group offsets: the next byte offset to read of a paper (broker, partition) or a replicated partition. */
export interface GroupOffsetStore {
  /** @throws InvalidNameError for a group or topic that cannot be a path; I/O and ZooKeeper errors */
  commit(group: string, topic: string, partition: GroupPartition, offset: number): Promise<void>;
  /** The committed offset, or undefined when none is. */
  read(group: string, topic: string, partition: GroupPartition): Promise<number | undefined>;
}

/** A partition's key in a group offset file: `<brokerId>-<partition>`, or `<partition>` for a replicated one. */
const fileKey = (p: GroupPartition): string => (isReplicatedPartition(p) ? String(p.partition) : `${p.brokerId}-${p.partition}`);

/** The offsets in ZooKeeper (cluster mode). */
export function zkOffsetStore(zk: ZkClient): GroupOffsetStore {
  const registry = new OffsetRegistry(zk);
  return {
    commit: (group, topic, bp, offset) => registry.commit(group, topic, bp, offset),
    read: (group, topic, bp) => registry.read(group, topic, bp),
  };
}

/** Directory of the group offset files inside a standalone broker's log dir. */
export const groupOffsetsDirName = 'kafka-group-offsets';

type GroupFile = Record<string, Record<string, number>>;

/** The offsets in files under `logDir` (standalone). Commits of one group are written one at a time. */
export function fileOffsetStore(logDir: string): GroupOffsetStore {
  const dir = join(logDir, groupOffsetsDirName);
  const cache = new Map<string, GroupFile>();
  const writing = new Map<string, Promise<void>>();
  const path = (group: string): string => join(dir, `${encodeURIComponent(checkGroup(group))}.json`);
  const load = async (group: string): Promise<GroupFile> => {
    let g = cache.get(group);
    if (g !== undefined) return g;
    try {
      g = JSON.parse(await readFile(path(group), 'utf8')) as GroupFile;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      g = {};
    }
    cache.set(group, g);
    return g;
  };
  const write = async (group: string, g: GroupFile): Promise<void> => {
    await makeDirs(dir);
    const tmp = `${path(group)}.tmp`;
    const f = await open(tmp, 'w');
    try {
      await f.writeFile(JSON.stringify(g));
      await f.sync();
    } finally {
      await f.close();
    }
    await rename(tmp, path(group));
    const d = await open(dir, 'r');
    try {
      await d.sync();
    } finally {
      await d.close();
    }
  };
  return {
    async commit(group, topic, bp, offset) {
      const g = await load(group);
      (g[topic] ??= {})[fileKey(bp)] = offset;
      const prev = writing.get(group) ?? Promise.resolve();
      const next = prev.catch(() => {}).then(() => write(group, g));
      writing.set(group, next);
      await next;
    },
    async read(group, topic, bp) {
      return (await load(group))[topic]?.[fileKey(bp)];
    },
  };
}
