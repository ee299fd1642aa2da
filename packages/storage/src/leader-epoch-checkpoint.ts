/**
 * The leader-epoch checkpoint of one replica (docs/replication.md §8.2): where each leader epoch
 * started in the partition's log. `LOG_DIR/<topic>-<partition>/leader-epoch-checkpoint`, text:
 *
 * ```
 * klog-leader-epochs 1        format and version
 * 3                           number of entries
 * 0 0                         epoch startOffset, oldest first,
 * 2 1048576                   both strictly increasing
 * 5 2097152
 * ```
 *
 * The entry `(2, 1048576)` says that the bytes from offset 1,048,576 up to the next entry's start
 * were written by the leader of epoch 2. A follower truncating after a leader change compares its
 * entries with the leader's (docs/replication.md §10).
 *
 * Every change rewrites the whole file through `leader-epoch-checkpoint.tmp` (durable-file.ts): written,
 * fdatasynced, renamed over the checkpoint, then the directory fsynced, so the file on disk is
 * always a whole old or a whole new checkpoint. Changes run one at a time, and the entries in
 * memory change only once the new file is on disk.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ErrorCode } from '@klog/protocol';
import { readDurableFile, replaceFileDurably, replacingSuffix } from './durable-file.js';
import { StorageError } from './errors.js';

/** Name of the checkpoint file in a replica's directory. */
export const leaderEpochCheckpointFileName = 'leader-epoch-checkpoint';
/** First line of the file: the format's name and version. */
export const leaderEpochCheckpointHeader = 'klog-leader-epochs 1';

const decimal = /^(0|[1-9]\d{0,15})$/;

/** One entry: the leader epoch that started writing at `startOffset`. */
export interface EpochEntry {
  /** Leader epoch, a non-negative integer. */
  readonly epoch: number;
  /** Byte offset in the partition's log of the epoch's first byte. */
  readonly startOffset: number;
}

/** Where an epoch ends on a replica: the answer to OFFSET_FOR_LEADER_EPOCH (docs/replication.md §6.4). */
export interface EpochEnd {
  /** The largest epoch of the checkpoint that is ≤ the one asked for; −1 when there is none. */
  readonly epoch: number;
  /** The start of the entry after it, or the log end for the latest; −1 with epoch −1. */
  readonly endOffset: number;
}

/**
 * A checkpoint file that does not read as one: a wrong header, a count that does not match the
 * entries, a field that is not a decimal integer, entries out of order. The replica must not
 * guess which epoch wrote what (docs/replication.md §8.2).
 */
export class LeaderEpochCheckpointError extends StorageError {
  constructor(
    /** Path of the file. */
    readonly file: string,
    /** 1-based line the problem was found on. */
    readonly line: number,
    reason: string,
  ) {
    super(ErrorCode.Unknown, `leader-epoch checkpoint ${file} line ${line}: ${reason}`);
  }
}

/** The text of a checkpoint holding `entries` (which must be strictly increasing; not checked here). */
export function formatLeaderEpochCheckpoint(entries: readonly EpochEntry[]): string {
  return `${leaderEpochCheckpointHeader}\n${entries.length}\n${entries.map((e) => `${e.epoch} ${e.startOffset}\n`).join('')}`;
}

/**
 * Parses the text of a checkpoint. Accepts exactly what {@link formatLeaderEpochCheckpoint}
 * writes, the final newline optional.
 * @param file the file's path, for the error
 * @throws LeaderEpochCheckpointError naming the line that is wrong
 */
export function parseLeaderEpochCheckpoint(text: string, file: string): EpochEntry[] {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  if (lines[0] !== leaderEpochCheckpointHeader) {
    throw new LeaderEpochCheckpointError(file, 1, `expected ${JSON.stringify(leaderEpochCheckpointHeader)}, got ${JSON.stringify((lines[0] ?? '').slice(0, 80))}`);
  }
  const countText = lines[1];
  if (countText === undefined || !decimal.test(countText)) throw new LeaderEpochCheckpointError(file, 2, `expected the number of entries, got ${JSON.stringify((countText ?? '').slice(0, 80))}`);
  const count = Number(countText);
  if (lines.length - 2 !== count) throw new LeaderEpochCheckpointError(file, 2, `says ${count} entries, the file has ${lines.length - 2}`);
  const entries: EpochEntry[] = [];
  for (let i = 2; i < lines.length; i++) {
    const fields = lines[i]!.split(' ');
    if (fields.length !== 2 || !decimal.test(fields[0]!) || !decimal.test(fields[1]!)) {
      throw new LeaderEpochCheckpointError(file, i + 1, `expected "<epoch> <startOffset>", got ${JSON.stringify(lines[i]!.slice(0, 80))}`);
    }
    const entry = { epoch: Number(fields[0]), startOffset: Number(fields[1]) };
    if (!Number.isSafeInteger(entry.epoch) || !Number.isSafeInteger(entry.startOffset)) {
      throw new LeaderEpochCheckpointError(file, i + 1, 'a number beyond 2^53 - 1');
    }
    const prev = entries[entries.length - 1];
    if (prev !== undefined && (entry.epoch <= prev.epoch || entry.startOffset <= prev.startOffset)) {
      throw new LeaderEpochCheckpointError(file, i + 1, `entry (${entry.epoch}, ${entry.startOffset}) does not follow (${prev.epoch}, ${prev.startOffset}): epochs and offsets must increase`);
    }
    entries.push(entry);
  }
  return entries;
}

/** The leader-epoch checkpoint of one replica. Open with {@link LeaderEpochCheckpoint.load}. */
export class LeaderEpochCheckpoint {
  /** Path of the checkpoint file. */
  readonly file: string;
  /** The entries as on disk, oldest first; replaced as a whole by each change. */
  #entries: readonly EpochEntry[];
  /** The last change in the chain; changes run one at a time. */
  #tail: Promise<void> = Promise.resolve();

  private constructor(
    /** The replica's directory. */
    readonly dir: string,
    entries: readonly EpochEntry[],
  ) {
    this.file = path.join(dir, leaderEpochCheckpointFileName);
    this.#entries = entries;
  }

  /**
   * Reads the checkpoint of the replica in `dir` (no file: no entries), removes a `.tmp` left by
   * a crash, and drops entries that start past `logEndOffset` (their bytes are not in the log: a
   * crash between a truncation of the log and of the checkpoint), rewriting the file if it did.
   * @param logEndOffset the replica log's end offset
   * @throws LeaderEpochCheckpointError for a file that does not parse; RangeError for a bad
   *   `logEndOffset`; file system errors (a missing `dir` among them)
   */
  static async load(dir: string, logEndOffset: number): Promise<LeaderEpochCheckpoint> {
    checkOffset('logEndOffset', logEndOffset);
    const file = path.join(dir, leaderEpochCheckpointFileName);
    await fs.promises.rm(file + replacingSuffix, { force: true });
    const text = await readDurableFile(file);
    if (text === undefined) await fs.promises.access(dir);
    const entries = text === undefined ? [] : parseLeaderEpochCheckpoint(text, file);
    const checkpoint = new LeaderEpochCheckpoint(dir, entries);
    const kept = entries.filter((e) => e.startOffset <= logEndOffset);
    if (kept.length < entries.length) await checkpoint.#change(() => kept);
    return checkpoint;
  }

  /** The entries, oldest first (a snapshot: later changes replace the array). */
  get entries(): readonly EpochEntry[] {
    return this.#entries;
  }

  /** The latest entry's epoch, or undefined when there is none. */
  get latestEpoch(): number | undefined {
    return this.#entries[this.#entries.length - 1]?.epoch;
  }

  /**
   * Records that `epoch` starts writing at `startOffset`: a new leader calls it with its log end
   * before it accepts a produce, a follower with its log end before it appends the first bytes of
   * a newer epoch. Nothing changes when `epoch` is already the latest. A newer epoch is appended;
   * if the latest entry starts at the same offset (an epoch that wrote nothing), it is replaced.
   * @throws RangeError for an epoch older than the latest, a start before the latest entry's,
   *   or a value that is not a non-negative safe integer; the write error (nothing changed then)
   */
  async assign(epoch: number, startOffset: number): Promise<void> {
    checkOffset('epoch', epoch);
    checkOffset('startOffset', startOffset);
    return this.#change((entries) => {
      const latest = entries[entries.length - 1];
      if (latest === undefined) return [{ epoch, startOffset }];
      if (epoch === latest.epoch) return undefined;
      if (epoch < latest.epoch) throw new RangeError(`epoch ${epoch} is older than the latest epoch ${latest.epoch} of ${this.file}`);
      if (startOffset < latest.startOffset) {
        throw new RangeError(`epoch ${epoch} cannot start at ${startOffset}, before epoch ${latest.epoch} started (${latest.startOffset}) in ${this.file}`);
      }
      const kept = startOffset === latest.startOffset ? entries.slice(0, -1) : entries;
      return [...kept, { epoch, startOffset }];
    });
  }

  /**
   * Drops every entry that starts at or after `endOffset`: called once the log has been cut to
   * `endOffset`, so the epochs whose bytes are gone are forgotten too (docs/replication.md §10).
   * @throws RangeError for a bad `endOffset`; the write error (nothing changed then)
   */
  async truncateFromEnd(endOffset: number): Promise<void> {
    checkOffset('endOffset', endOffset);
    return this.#change((entries) => {
      const kept = entries.filter((e) => e.startOffset < endOffset);
      return kept.length < entries.length ? kept : undefined;
    });
  }

  /**
   * Where `epoch` ends in this replica's log (the leader's answer to OFFSET_FOR_LEADER_EPOCH,
   * docs/replication.md §6.4): the largest epoch ≤ `epoch` and the start of the entry after it,
   * or `logEndOffset` when it is the latest; `{ epoch: -1, endOffset: -1 }` when every entry is
   * newer than `epoch` or there is none.
   * @throws RangeError for a bad argument
   */
  endOffsetFor(epoch: number, logEndOffset: number): EpochEnd {
    checkOffset('epoch', epoch);
    checkOffset('logEndOffset', logEndOffset);
    const entries = this.#entries;
    let i = entries.length - 1;
    while (i >= 0 && entries[i]!.epoch > epoch) i--;
    if (i < 0) return { epoch: -1, endOffset: -1 };
    return { epoch: entries[i]!.epoch, endOffset: i + 1 < entries.length ? entries[i + 1]!.startOffset : logEndOffset };
  }

  /**
   * The start of the first entry newer than `epoch`, or `logEndOffset` when there is none: where
   * a follower cuts the bytes of the epochs its leader never had (docs/replication.md §10).
   * @throws RangeError for a bad argument
   */
  startOfEpochAfter(epoch: number, logEndOffset: number): number {
    checkOffset('epoch', epoch);
    checkOffset('logEndOffset', logEndOffset);
    return this.#entries.find((e) => e.epoch > epoch)?.startOffset ?? logEndOffset;
  }

  /**
   * Runs `next` on the entries once the changes before it are done; when it returns new entries,
   * writes them and only then makes them the entries in memory.
   */
  #change(next: (entries: readonly EpochEntry[]) => readonly EpochEntry[] | undefined): Promise<void> {
    const run = this.#tail.then(async () => {
      const entries = next(this.#entries);
      if (entries === undefined) return;
      await replaceFileDurably(this.file, formatLeaderEpochCheckpoint(entries));
      this.#entries = entries;
    });
    this.#tail = run.catch(() => {});
    return run;
  }
}

function checkOffset(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${name} must be a non-negative integer, got ${value}`);
}
