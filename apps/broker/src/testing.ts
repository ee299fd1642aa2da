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
