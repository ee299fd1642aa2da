/**
 * The output directory of `klog load` and how a run is committed.
 *
 * ```
 * <out>/
 *   run-00000001/                  a committed run (only ever created by one rename)
 *     offsets.json                 topic → "<brokerId>-<partition>" (replicated: "<partition>") → next offset to read
 *     manifest.json                what the run read: per partition its range, counts, gaps
 *     <topic>/<brokerId>-<partition>.jsonl[.gz] | .raw[.gz]   (replicated: <topic>/<partition>.…)
 *   run-00000002/
 *   .tmp-run-00000003-<pid>/       a run in progress (or one that died): never read
 * ```
 *
 * A run writes everything into its temp directory, fsyncs every file and directory in it, then
 * renames the temp directory to `run-<seq>` and fsyncs `<out>`. That rename is the commit point:
 * before it the run does not exist, after it its data files and its offsets exist together. The
 * loader's state is the `offsets.json` of the highest-numbered run, so no crash can leave offsets
 * advanced without their data or data without its offsets. Temp directories whose process is gone
 * are removed when the next run starts.
 */
import { mkdir, open, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { KlogError } from '@klog/client';
import { makeDirs } from '@klog/storage';

/** topic → `"<brokerId>-<partition>"` (a replicated topic's: `"<partition>"`, docs/replication.md §14) → the next offset to read. */
export type Offsets = Record<string, Record<string, number>>;

/** Digits of the run number in directory names, so that names sort in run order. */
export const runDigits = 8;

const runPattern = /^run-(\d+)$/;
const tempPattern = /^\.tmp-run-\d+-(\d+)$/;

/** `run-00000042`. */
export function runName(seq: number): string {
  return `run-${String(seq).padStart(runDigits, '0')}`;
}

/** The committed runs in `out`, by ascending number. */
export async function listRuns(out: string): Promise<{ seq: number; dir: string }[]> {
  const runs: { seq: number; dir: string }[] = [];
  for (const name of await readdir(out)) {
    const m = runPattern.exec(name);
    if (m) runs.push({ seq: Number(m[1]), dir: join(out, name) });
  }
  return runs.sort((a, b) => a.seq - b.seq);
}

/** The state left by the previous runs: the last run's number (0 when none) and its offsets. */
export interface LoaderState {
  readonly lastRun: number;
  readonly offsets: Offsets;
}

/**
 * Reads the state of `out` (created when missing): the offsets of its highest run.
 * @throws KlogError when that run has no readable offsets.json (the directory was changed by hand)
 */
export async function readState(out: string): Promise<LoaderState> {
  await makeDirs(out);
  const last = (await listRuns(out)).at(-1);
  if (last === undefined) return { lastRun: 0, offsets: {} };
  const path = join(last.dir, offsetsFileName);
  let offsets: unknown;
  try {
    offsets = JSON.parse(await readFile(path, 'utf8'));
  } catch (e) {
    throw new KlogError(`cannot read the offsets of the last run, ${path}: ${(e as Error).message}`);
  }
  if (!isOffsets(offsets)) throw new KlogError(`${path} is not a map of topic → "<brokerId>-<partition>" or "<partition>" → offset`);
  return { lastRun: last.seq, offsets };
}

function isOffsets(v: unknown): v is Offsets {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  return Object.values(v as Record<string, unknown>).every(
    (t) =>
      typeof t === 'object' &&
      t !== null &&
      !Array.isArray(t) &&
      Object.entries(t).every(([k, o]) => /^(\d+-)?\d+$/.test(k) && Number.isSafeInteger(o) && (o as number) >= 0),
  );
}

/** Whether process `pid` is alive (EPERM: alive, owned by someone else). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Removes the temp directories of runs whose process is gone (killed or crashed).
 * @returns the names removed
 */
export async function removeDeadTempDirs(out: string): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await readdir(out)) {
    const m = tempPattern.exec(name);
    if (m && !alive(Number(m[1]))) {
      await rm(join(out, name), { recursive: true, force: true });
      removed.push(name);
    }
  }
  return removed;
}

export const offsetsFileName = 'offsets.json';
export const manifestFileName = 'manifest.json';

/** Fsyncs a file or a directory. */
export async function fsyncPath(path: string): Promise<void> {
  const fh = await open(path, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Writes `text` to a new file and fsyncs it. */
export async function writeDurable(path: string, text: string): Promise<void> {
  await writeFile(path, text, { flag: 'wx' });
  await fsyncPath(path);
}

/** A run being written: its temp directory and the name it gets when committed. */
export class PendingRun {
  /** The temp directory the run writes into. */
  readonly dir: string;
  /** The directory of the committed run. */
  readonly finalDir: string;

  private constructor(
    readonly out: string,
    readonly seq: number,
  ) {
    this.dir = join(out, `.tmp-${runName(seq)}-${process.pid}`);
    this.finalDir = join(out, runName(seq));
  }

  /** Creates the temp directory of run `seq`. */
  static async create(out: string, seq: number): Promise<PendingRun> {
    const run = new PendingRun(out, seq);
    await mkdir(run.dir);
    return run;
  }

  /** Creates `<temp dir>/<topic>` when missing and returns it. */
  async topicDir(topic: string): Promise<string> {
    const dir = join(this.dir, topic);
    await makeDirs(dir);
    return dir;
  }

  /**
   * Commits the run. The data files must already be closed and fsynced. Writes and fsyncs
   * offsets.json and manifest.json, fsyncs the topic directories and the temp directory, renames
   * it to `run-<seq>` (the commit point) and fsyncs `out`.
   * @param pause awaited between steps (a testing aid that widens the window for a crash)
   * @throws KlogError when `run-<seq>` exists already (another loader committed it first)
   */
  async commit(offsets: Offsets, manifest: unknown, pause: () => Promise<void>): Promise<void> {
    await writeDurable(join(this.dir, offsetsFileName), `${JSON.stringify(offsets, null, 2)}\n`);
    await pause();
    await writeDurable(join(this.dir, manifestFileName), `${JSON.stringify(manifest, null, 2)}\n`);
    await pause();
    for (const entry of await readdir(this.dir, { withFileTypes: true })) {
      if (entry.isDirectory()) {
        await fsyncPath(join(this.dir, entry.name));
        await pause();
      }
    }
    await fsyncPath(this.dir);
    await pause();
    try {
      // Linux and macOS refuse to rename a directory onto a non-empty one: a run is never replaced.
      await rename(this.dir, this.finalDir);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOTEMPTY' || code === 'EEXIST') {
        throw new KlogError(`${this.finalDir} appeared while this run was loading: is another klog load writing to ${this.out}?`);
      }
      throw e;
    }
    await pause();
    await fsyncPath(this.out);
  }

  /** Removes the temp directory (after a failure). */
  async discard(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
