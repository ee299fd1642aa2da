/**
 * `replica.properties` (docs/replication.md §8.1): the file that tells a replica's directory
 * from a paper partition's, and names the topic id the replica belongs to. Text, one
 * `key=value` a line:
 *
 * ```
 * topic.id=5f0c3a9e12b7d604
 * ```
 *
 * `topic.id` is the topic definition's `id` (16 lowercase hex digits, docs/replication.md §3.1);
 * a replica whose topic id is not its topic's in ZooKeeper is a leftover of a deleted topic.
 * Blank lines and `#` comments are allowed, other keys are ignored (for later versions). The
 * file is written once, through a `.tmp` beside it (written, fdatasynced, renamed), before the
 * directory holds any segment (see `ReplicaLog.create`).
 */
import * as path from 'node:path';
import { ErrorCode } from '@klog/protocol';
import { readDurableFile, replaceFileDurably } from './durable-file.js';
import { StorageError } from './errors.js';

/** Name of the file in a replica's directory. */
export const replicaPropertiesFileName = 'replica.properties';

const topicIdPattern = /^[0-9a-f]{16}$/;

/** What `replica.properties` says. */
export interface ReplicaMetadata {
  /** The topic id: 16 lowercase hex digits (docs/replication.md §3.1). */
  readonly topicId: string;
}

/** True when `id` is a topic id: 16 lowercase hex digits. */
export function isTopicId(id: string): boolean {
  return topicIdPattern.test(id);
}

/** A `replica.properties` that does not read as one: no `topic.id`, or one that is not 16 hex digits. Wire error code −1 (unknown). */
export class ReplicaMetadataError extends StorageError {
  constructor(
    /** Path of the file. */
    readonly file: string,
    reason: string,
  ) {
    super(ErrorCode.Unknown, `replica properties ${file}: ${reason}`);
  }
}

/** The text of `replica.properties` for `metadata`. @throws RangeError for a bad topic id */
export function formatReplicaProperties(metadata: ReplicaMetadata): string {
  if (!isTopicId(metadata.topicId)) throw new RangeError(`topic id must be 16 lowercase hex digits, got ${JSON.stringify(metadata.topicId)}`);
  return `topic.id=${metadata.topicId}\n`;
}

/**
 * Parses the text of `replica.properties`.
 * @param file the file's path, for the error
 * @throws ReplicaMetadataError when `topic.id` is missing, repeated or not a topic id, or a line is not `key=value`
 */
export function parseReplicaProperties(text: string, file: string): ReplicaMetadata {
  let topicId: string | undefined;
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === '' || line.startsWith('#')) continue;
    const eq = line.indexOf('=');
    if (eq <= 0) throw new ReplicaMetadataError(file, `line ${i + 1} is not key=value: ${JSON.stringify(line.slice(0, 80))}`);
    if (line.slice(0, eq).trim() !== 'topic.id') continue;
    if (topicId !== undefined) throw new ReplicaMetadataError(file, `topic.id is given twice (line ${i + 1})`);
    topicId = line.slice(eq + 1).trim();
    if (!isTopicId(topicId)) throw new ReplicaMetadataError(file, `topic.id must be 16 lowercase hex digits, got ${JSON.stringify(topicId.slice(0, 80))}`);
  }
  if (topicId === undefined) throw new ReplicaMetadataError(file, 'no topic.id');
  return { topicId };
}

/**
 * Reads `dir/replica.properties`.
 * @returns its metadata, or undefined when `dir` has no such file (a paper partition)
 * @throws ReplicaMetadataError for a file that does not parse; other file system errors
 */
export async function readReplicaMetadata(dir: string): Promise<ReplicaMetadata | undefined> {
  const file = path.join(dir, replicaPropertiesFileName);
  const text = await readDurableFile(file);
  if (text === undefined) return undefined;
  return parseReplicaProperties(text, file);
}

/**
 * Writes `dir/replica.properties` durably ({@link replaceFileDurably}: to `replica.properties.tmp`,
 * fdatasynced, renamed over the file, then `dir` fsynced). `dir` must exist.
 * @throws RangeError for a bad topic id; DiskFullError when there is no space; file system errors
 */
export async function writeReplicaMetadata(dir: string, metadata: ReplicaMetadata): Promise<void> {
  await replaceFileDurably(path.join(dir, replicaPropertiesFileName), formatReplicaProperties(metadata));
}
