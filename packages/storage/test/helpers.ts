import fsDefault, * as fs from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { encodeMessageSet, iterateMessageSet } from '@klog/protocol';
import { afterEach } from 'vitest';
import type { Logger } from '@klog/logger';

const dirs: string[] = [];

/** A fresh temp directory, removed after the test. */
export function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'klog-storage-'));
  dirs.push(dir);
  return dir;
}

afterEach(() => {
  for (const dir of dirs.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** A message set of `count` messages with payloads `${prefix}-${i}`. */
export function messages(prefix: string, count: number, padTo = 0): Buffer {
  const payloads: Buffer[] = [];
  for (let i = 0; i < count; i++) payloads.push(Buffer.from(`${prefix}-${i}`.padEnd(padTo, '.')));
  return encodeMessageSet(payloads);
}

/** Payloads (as strings) of the whole messages in `buf`; a trailing partial message is dropped. */
export function payloads(buf: Buffer): string[] {
  return [...iterateMessageSet(buf)].map((m) => m.message.payload.toString());
}

/** A logger that records every entry. */
export function recordingLogger(): Logger & { entries: { level: string; obj: object; msg?: string }[] } {
  const entries: { level: string; obj: object; msg?: string }[] = [];
  const at = (level: string) => (obj: object, msg?: string) => void entries.push({ level, obj, msg });
  return { entries, debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
}

/** Segment file names in `dir`, sorted. */
export function segmentFiles(dir: string): string[] {
  return fs.readdirSync(dir).filter((n) => n.endsWith('.kafka')).sort();
}

/** The synchronous file calls that do file work on the caller's thread (a close of an idle descriptor aside). */
const syncFileCalls = [
  'openSync', 'mkdirSync', 'readdirSync', 'statSync', 'lstatSync', 'fstatSync', 'writeSync', 'writeFileSync', 'readSync', 'readFileSync',
  'ftruncateSync', 'truncateSync', 'fsyncSync', 'fdatasyncSync', 'renameSync', 'rmSync', 'rmdirSync', 'unlinkSync', 'existsSync', 'accessSync',
] as const;

/**
 * Runs `fn` while counting calls to the synchronous file functions of node:fs (the real ones
 * still run), seen by every module that imported node:fs (`syncBuiltinESMExports`).
 * @returns the names called during `fn`, in order
 */
export async function syncFileCallsDuring(fn: () => Promise<unknown>): Promise<string[]> {
  const calls: string[] = [];
  const fsObject = fsDefault as unknown as Record<string, (...args: unknown[]) => unknown>;
  const saved = new Map<string, (...args: unknown[]) => unknown>();
  for (const name of syncFileCalls) {
    const original = fsObject[name]!;
    saved.set(name, original);
    fsObject[name] = (...args: unknown[]) => {
      calls.push(name);
      return original.apply(fsDefault, args);
    };
  }
  syncBuiltinESMExports();
  try {
    await fn();
  } finally {
    for (const [name, original] of saved) fsObject[name] = original;
    syncBuiltinESMExports();
  }
  return calls;
}
