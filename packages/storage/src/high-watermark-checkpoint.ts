/**
 * A replica's high-watermark checkpoint (docs/replication.md §8.1, Kafka's
 * replication-offset-checkpoint, one per replica): the high watermark the broker last knew for
 * the partition, as leader or follower, so that after a restart it does not start from 0 and
 * make consumers wait until the followers have fetched (§9.5). The file is text:
 *
 * ```
 * klog-high-watermark 1
 * 1048576
 * ```
 *
 * Line 1 names the format and its version; line 2 is the byte offset, in decimal. It is replaced
 * as a whole (`replaceFileDurably`: written to `.tmp`, fdatasynced, renamed, the directory
 * fsynced). The value on disk is never above what was committed when it was written; a reader
 * caps it at the log end (a truncation after the write).
 */
import * as path from 'node:path';
import { ErrorCode } from '@klog/protocol';
import { readDurableFile, replaceFileDurably } from './durable-file.js';
import { StorageError } from './errors.js';

/** The checkpoint's file name in a replica directory. */
export const highWatermarkFile = 'high-watermark-checkpoint';
const header = 'klog-high-watermark 1';

/** The file's text for `highWatermark`. @throws RangeError for a value that is not a non-negative safe integer */
export function formatHighWatermark(highWatermark: number): string {
  if (!Number.isSafeInteger(highWatermark) || highWatermark < 0) throw new RangeError(`high watermark must be a non-negative integer, got ${highWatermark}`);
  return `${header}\n${highWatermark}\n`;
}

/** Parses the file's text. @throws StorageError naming `file` and the line when it is not the format above */
export function parseHighWatermark(text: string, file: string): number {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  const bad = (line: number, what: string): StorageError => new StorageError(ErrorCode.Unknown, `high-watermark checkpoint ${file} line ${line}: ${what}`);
  if (lines[0] !== header) throw bad(1, `expected "${header}"`);
  if (lines.length !== 2) throw bad(lines.length < 2 ? 2 : 3, 'expected one offset on line 2 and nothing after it');
  if (!/^(0|[1-9][0-9]*)$/.test(lines[1]!) || !Number.isSafeInteger(Number(lines[1]))) throw bad(2, `not a decimal offset: "${lines[1]}"`);
  return Number(lines[1]);
}

/**
 * Reads the checkpoint of the replica in `dir`.
 * @returns the high watermark, capped at `logEndOffset`; undefined when the file does not exist
 * @throws StorageError for a file that does not parse; other file system errors
 */
export async function readHighWatermark(dir: string, logEndOffset: number): Promise<number | undefined> {
  const file = path.join(dir, highWatermarkFile);
  const text = await readDurableFile(file);
  if (text === undefined) return undefined;
  return Math.min(parseHighWatermark(text, file), logEndOffset);
}

/**
 * Writes `highWatermark` as the checkpoint of the replica in `dir`, durably (see the file comment).
 * @throws RangeError for a bad value; DiskFullError and other file system errors
 */
export async function writeHighWatermark(dir: string, highWatermark: number): Promise<void> {
  await replaceFileDurably(path.join(dir, highWatermarkFile), formatHighWatermark(highWatermark));
}
