/** Runs `klog-audit` and `klog produce` as child processes, as users run them. */
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AuditReport } from '../src/reconcile.js';

const here = dirname(fileURLToPath(import.meta.url));
const auditMain = join(here, '../dist/main.js');
const klogMain = join(here, '../../../tools/klog/dist/main.js');

export interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `node script args` with `input` on stdin. */
export function run(script: string, args: readonly string[], input = ''): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

/** `klog-audit args`. */
export function runAudit(args: readonly string[]): Promise<Run> {
  return run(auditMain, args);
}

/** `klog args` with `input` on stdin. */
export function runKlog(args: readonly string[], input = ''): Promise<Run> {
  return run(klogMain, args, input);
}

/** `klog-audit --json args`, parsed; throws with its stderr when it did not print a report. */
export async function auditReport(args: readonly string[]): Promise<AuditReport & { warnings: string[]; exitCode: number | null }> {
  const r = await runAudit(['--json', ...args]);
  if (r.code !== 0 && r.code !== 1) throw new Error(`klog-audit exited with ${r.code}: ${r.stderr}`);
  return { ...(JSON.parse(r.stdout) as AuditReport & { warnings: string[] }), exitCode: r.code };
}

/** Total count of one tier over every window (of one topic, if given). */
export function tierTotal(report: AuditReport, tier: string, topic?: string): number {
  let n = 0;
  for (const w of report.windows) if (topic === undefined || w.topic === topic) n += w.counts.find((c) => c.tier === tier)?.count ?? 0;
  return n;
}
