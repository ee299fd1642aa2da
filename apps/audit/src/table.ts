/**
 * The terminal report: one row per (topic, window), one column per tier, each count with its
 * difference from what it is compared with, the verdict, then the discrepancies in words
 * (docs/audit.md, "Reading the report").
 */
import Table from 'cli-table3';
import type { AuditReport, Discrepancy } from './reconcile.js';

/** `2026-11-30 08:20:00` (UTC; milliseconds shown only when not 0). */
export function formatTime(ms: number): string {
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) return `${ms} ms`;
  const iso = d.toISOString();
  return (iso.endsWith('.000Z') ? iso.slice(0, 19) : iso.slice(0, 23)).replace('T', ' ');
}

/** A window as `<start> +<length>` for messages. */
function formatWindow(report: AuditReport, windowStart: number): string {
  return `${formatTime(windowStart)} UTC +${report.windowMs / 1000}s`;
}

/** One discrepancy in words. */
export function describeDiscrepancy(report: AuditReport, d: Discrepancy): string {
  const what = d.kind === 'short' ? `${d.messages} missing` : `${d.messages} extra (duplicates)`;
  return `${d.kind}: topic ${d.topic}, window ${formatWindow(report, d.windowStart)}: ${d.tier} counted ${d.count} of ${d.expected} (${d.against}): ${what}`;
}

/** The summary line. */
export function summaryLine(report: AuditReport): string {
  const s = report.summary;
  return `${s.windows} windows: ${s.complete} complete, ${s.short} short (${s.missing} messages missing), ${s.over} over (${s.extra} extra), ${s.incomplete} incomplete, ${s.open} open`;
}

/** The whole terminal report, ending with a newline. */
export function renderTable(report: AuditReport): string {
  const head = `audit of ${report.clusters.join(' → ')}, windows of ${report.windowMs} ms, grace ${report.graceMs} ms, at ${formatTime(report.generatedAt)} UTC`;
  if (report.windows.length === 0) return `${head}\nno audit events yet\n`;
  const table = new Table({
    head: ['topic', 'window (UTC)', ...report.tiers.map((t) => t.id), 'status'],
    style: { head: [], border: [], compact: true, 'padding-left': 0, 'padding-right': 0 },
    chars: { top: '', 'top-mid': '', 'top-left': '', 'top-right': '', bottom: '', 'bottom-mid': '', 'bottom-left': '', 'bottom-right': '', left: '', 'left-mid': '', mid: '', 'mid-mid': '', right: '', 'right-mid': '', middle: '  ' },
  });
  for (const w of report.windows) {
    const cells = report.tiers.map((t) => {
      const c = w.counts.find((x) => x.tier === t.id);
      if (!c) return '-';
      return c.diff === undefined ? String(c.count) : `${c.count} (${c.diff > 0 ? '+' : ''}${c.diff})`;
    });
    table.push([w.topic, formatTime(w.windowStart), ...cells, w.status]);
  }
  const lines = [
    head,
    table.toString(),
    summaryLine(report),
    ...report.discrepancies.map((d) => describeDiscrepancy(report, d)),
    ...report.incomplete.map((i) => `not judged: ${i.cluster}/${i.tier ?? 'every tier'}, ${i.topic === undefined ? 'every topic' : `topic ${i.topic}`}: ${i.reason}`),
  ];
  const ig = report.ignored;
  const ignored = ig.duplicateEvents + ig.otherGroups + ig.unalignedWindows + ig.undecodable;
  if (ignored > 0) {
    lines.push(`ignored events: ${ig.duplicateEvents} seen twice, ${ig.otherGroups} of other consumer groups, ${ig.unalignedWindows} with windows that do not divide ${report.windowMs} ms, ${ig.undecodable} undecodable`);
  }
  return `${lines.join('\n')}\n`;
}
