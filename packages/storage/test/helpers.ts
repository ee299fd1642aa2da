import * as fs from 'node:fs';
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
