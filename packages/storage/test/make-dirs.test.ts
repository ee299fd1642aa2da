import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { LogManager } from '../src/index.js';
import { makeDirs } from '../src/make-dirs.js';

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

function tmp(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'klog-make-dirs-'));
  made.push(dir);
  return dir;
}

describe('makeDirs', () => {
  it('creates missing parents and leaves an existing directory alone', async () => {
    const root = tmp();
    await makeDirs(path.join(root, 'a', 'b', 'c'));
    expect(fs.statSync(path.join(root, 'a', 'b', 'c')).isDirectory()).toBe(true);
    fs.writeFileSync(path.join(root, 'a', 'b', 'c', 'kept'), 'x');
    await makeDirs(path.join(root, 'a', 'b', 'c'));
    expect(fs.readFileSync(path.join(root, 'a', 'b', 'c', 'kept'), 'utf8')).toBe('x');
  });

  it('refuses a path through a file with ENOTDIR', async () => {
    const root = tmp();
    fs.writeFileSync(path.join(root, 'file'), 'x');
    await expect(makeDirs(path.join(root, 'file', 'log'))).rejects.toMatchObject({ code: 'ENOTDIR' });
  });

  // Node's recursive mkdir loops for ever here (ENOENT under /proc although /proc exists).
  it.runIf(fs.existsSync('/proc/self'))('fails at once under /proc instead of looping', async () => {
    const started = Date.now();
    await expect(makeDirs('/proc/klog-no-such-dir/logs')).rejects.toMatchObject({ code: 'ENOENT' });
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it.runIf(fs.existsSync('/proc/self'))('LogManager.open refuses a log dir that cannot be made', async () => {
    await expect(LogManager.open({ logDir: '/proc/klog-no-such-dir' })).rejects.toThrow(/cannot create directory \/proc\/klog-no-such-dir/);
  });
});
