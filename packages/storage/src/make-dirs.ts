/**
 * Creating a directory and its missing parents, one level at a time.
 *
 * Node's `mkdir(path, { recursive: true })` loops for ever, at full CPU, where a directory
 * cannot be created although its parent exists and no error but ENOENT is given (a path under
 * `/proc` or `/sys`, e.g. `--log-dir /proc/x`): it retries the parent, finds it, retries the
 * child, forever. Walking down from the first existing ancestor and creating each level once
 * turns every such case into one error naming the directory.
 */
import fs from 'node:fs';
import path from 'node:path';

/**
 * Creates `dir` and its missing parents (mode 0o777 less the umask); a directory that exists is
 * left as it is.
 * @throws Error with the code of the failing `mkdir` (ENOENT, EACCES, ENOTDIR, EROFS, ...) and
 *   a message naming the level that could not be made; an existing non-directory is ENOTDIR.
 */
export async function makeDirs(dir: string): Promise<void> {
  const missing: string[] = [];
  let at = path.resolve(dir);
  for (;;) {
    const stat = await fs.promises.stat(at).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return undefined;
      throw err;
    });
    if (stat !== undefined) {
      if (!stat.isDirectory()) throw Object.assign(new Error(`ENOTDIR: not a directory: ${at}`), { code: 'ENOTDIR', path: at });
      break;
    }
    missing.push(at);
    const parent = path.dirname(at);
    if (parent === at) break;
    at = parent;
  }
  for (const level of missing.reverse()) {
    await fs.promises.mkdir(level).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'EEXIST') return;
      throw Object.assign(new Error(`cannot create directory ${level}: ${err.message}`), { code: err.code, path: level });
    });
  }
}
