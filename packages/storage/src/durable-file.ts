/**
 * Small files that must be whole on disk after a crash (docs/replication.md §8.1, §8.2:
 * `replica.properties`, `leader-epoch-checkpoint`): each is replaced as a whole, never edited.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { asStorageError } from './errors.js';
import { syncDir } from './segment.js';

/** Suffix of the file a replacement is written to before it is renamed over the real one. */
export const replacingSuffix = '.tmp';

/**
 * Replaces `file` with `text` (UTF-8) without blocking the event loop: written to
 * `<file>.tmp`, fdatasynced, renamed over `file`, then its directory fsynced. The file on disk
 * is always the whole old one or the whole new one; a `.tmp` left by a crash is overwritten by
 * the next replacement.
 * @throws DiskFullError when there is no space; other file system errors (ENOENT when the
 *   directory is gone)
 */
export async function replaceFileDurably(file: string, text: string): Promise<void> {
  const tmp = file + replacingSuffix;
  try {
    const handle = await fs.promises.open(tmp, 'w');
    try {
      await handle.writeFile(text, 'utf8');
      await handle.datasync();
    } finally {
      await handle.close();
    }
  } catch (err) {
    throw asStorageError(err, tmp);
  }
  await fs.promises.rename(tmp, file);
  await syncDir(path.dirname(file));
}

/**
 * Reads a file that {@link replaceFileDurably} writes, as UTF-8.
 * @returns its text, or undefined when it does not exist (ENOENT)
 * @throws other file system errors
 */
export async function readDurableFile(file: string): Promise<string | undefined> {
  try {
    return await fs.promises.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}
