/**
 * Helpers for tests that run a broker and press on its limits (memory, back-pressure): not
 * part of the broker's API, exported as `@klog/broker/testing`.
 */
import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';

/** Resident memory of process `pid` in MiB, from /proc/<pid>/status (Linux only). */
export function rssMiB(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS:'))!;
  return Number(/(\d+)/.exec(line)![1]) / 1024;
}

/** Resolves when `s` drains, closes or fails (never rejects). */
export function writable(s: Socket): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      s.off('drain', done);
      s.off('close', done);
      s.off('error', done);
      resolve();
    };
    s.on('drain', done);
    s.on('close', done);
    s.on('error', done);
  });
}

/**
 * Writes `head` (a frame's size field and its first bytes), then the rest of a frame of
 * `frameBytes` (after the size field) but its last byte, as fast as the peer takes it: a frame
 * the peer must hold unfinished. Resolves when written or when `s` closes.
 */
export async function sendAllButLastByte(s: Socket, head: Buffer, frameBytes: number): Promise<void> {
  const chunk = Buffer.alloc(1024 * 1024);
  s.write(head);
  for (let sent = head.length - 4; sent < frameBytes - 1 && !s.destroyed; ) {
    const n = Math.min(chunk.length, frameBytes - 1 - sent);
    sent += n;
    if (!s.write(n === chunk.length ? chunk : chunk.subarray(0, n))) await writable(s);
  }
}

/**
 * Samples the RSS of `pid` every 50 ms while `holdMs` pass and then `until` settles: `held` is
 * the RSS after `holdMs`, `peak` the most sampled, both MiB.
 */
export async function rssWhile(pid: number, holdMs: number, until: () => Promise<unknown>): Promise<{ held: number; peak: number }> {
  let peak = rssMiB(pid);
  const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 50);
  try {
    await new Promise((resolve) => setTimeout(resolve, holdMs));
    const held = rssMiB(pid);
    await until();
    return { held, peak: Math.max(peak, held) };
  } finally {
    clearInterval(sampler);
  }
}

/** Resolves once the RSS of `pid` is below `mib` (polled every 100 ms), or after `ms`; returns the last RSS, MiB. */
export async function rssFallsBelow(pid: number, mib: number, ms: number): Promise<number> {
  const deadline = Date.now() + ms;
  let rss = rssMiB(pid);
  while (rss >= mib && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    rss = rssMiB(pid);
  }
  return rss;
}
