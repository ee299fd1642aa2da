/**
 * The audit report as one self-contained HTML page (docs/audit.md, "HTML report"): everything
 * it needs is inline (styles, data, the chart library), so it opens from a file or an e-mail
 * attachment with no network, and its Content-Security-Policy forbids any fetch.
 *
 * The page, from an {@link AuditReport} and the warnings `klog-audit` printed:
 * - a header: when it was generated, window length, grace, the clusters in flow order, the
 *   tiers, and the summary (windows, open, incomplete, complete, short, over, messages missing
 *   and extra, events ignored and why);
 * - when there is any, the "Not judged / warnings" section (`#warnings`): the counts known to be
 *   partial (`report.incomplete`, each `cluster / tier / topic: reason`, "all tiers" and "all
 *   topics" where the entry names none), whose closed windows are `incomplete` and not judged,
 *   then the warning lines (partitions not counted, ranges retention deleted, messages without
 *   a creation time), each as given;
 * - the discrepancies of closed windows (they are what to act on): topic (a link to its
 *   section), window start (ISO 8601, UTC), tier, the tier(s) it is compared with, and the
 *   messages missing or extra;
 * - then per topic (sorted as the report sorts them): a line chart of the count of every tier in
 *   every window (windows on the x axis, one series per tier; short windows on a red band, over
 *   windows on an amber one, incomplete windows on a violet hatched one, open windows on a grey
 *   one; a tier that counted fewer than it was compared with is a red triangle, more an amber
 *   diamond, a count known to be partial a violet cross), then a table with a row per window
 *   (short rows red, over rows amber, incomplete rows violet and striped, open rows grey) and a
 *   column per tier, each cell the tier's count and its diff against what it is compared with
 *   (`±0`, `−n`, `+n`, bold and coloured only in judged windows; `origin` for a tier compared
 *   with nothing; `partial` for a count known to be partial; the tiers compared with are named
 *   in the cell's title where a discrepancy names them, as the report does not carry them
 *   otherwise). An incomplete window's status badge has the reasons in its title.
 *
 * Tables and lists are plain HTML (readable with scripts off); the charts are drawn by Chart.js
 * (the package `chart.js`, its UMD build read from node_modules when rendering and inlined).
 * Every string from the report (topic, cluster and tier names, reasons) and every warning is
 * HTML-escaped where it goes
 * into markup, and the chart data goes in as JSON in a non-executed `<script
 * type="application/json">` with `<`, `>`, `&`, U+2028 and U+2029 written as `\uXXXX`, so no
 * name can close the element or run as code. The two executed scripts are allowed by hash.
 *
 * Hooks for tests and tools: each table row has `data-status`
 * (`open|incomplete|complete|short|over`; a discrepancy row `short|over`),
 * each chart canvas `data-topic-index`, and once every chart is drawn `<body>` gets
 * `data-charts-ready="<number of charts>"`.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import escapeHtml from 'escape-html';
import type { AuditReport, Discrepancy, IncompleteTier, TierCount, WindowRow, WindowStatus } from './reconcile.js';

/**
 * Renders the report as a complete HTML document (UTF-8, starts with `<!doctype html>`).
 * @param warnings the lines `klog-audit` printed as warnings (without its `klog-audit: warning: `
 *   prefix), e.g. `online: clicks 1-0 not counted: …`; shown as text in "Not judged / warnings"
 * @throws Error when the chart library cannot be found in node_modules
 */
export function renderHtmlReport(report: AuditReport, warnings: readonly string[] = []): string {
  const topics = groupByTopic(report.windows);
  const chartData = chartDataOf(report, topics);
  const library = chartLibrary();
  const client = clientScript;
  const csp = [
    "default-src 'none'",
    `script-src ${scriptHash(library)} ${scriptHash(client)}`,
    "style-src 'unsafe-inline'",
    'img-src data:',
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');

  const s = report.summary;
  const ig = report.ignored;
  const ignoredTotal = ig.duplicateEvents + ig.otherGroups + ig.unalignedWindows + ig.undecodable;
  const tierList = report.tiers.map((t) => `<span class="tier">${esc(t.id)}</span>`).join(' ');

  const out: string[] = [];
  out.push(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${esc(csp)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>klog audit report, ${esc(isoTime(report.generatedAt))}</title>
<style>${css}</style>
</head>
<body>
<header>
<h1>klog audit report</h1>
<dl class="facts">
<dt>generated</dt><dd>${esc(isoTime(report.generatedAt))}</dd>
<dt>window</dt><dd>${esc(duration(report.windowMs))}</dd>
<dt>grace</dt><dd>${esc(duration(report.graceMs))}</dd>
<dt>clusters</dt><dd>${report.clusters.map((c) => `<span class="cluster">${esc(c)}</span>`).join(' → ') || '<span class="muted">none</span>'}</dd>
<dt>tiers</dt><dd>${tierList || '<span class="muted">none</span>'}</dd>
</dl>
<ul class="summary" id="summary">
${card('windows', s.windows, '')}
${card('open', s.open, s.open > 0 ? 'open' : '')}
${card('incomplete', s.incomplete, s.incomplete > 0 ? 'incomplete' : '', s.incomplete > 0 ? 'closed, not judged: some counts are partial' : undefined)}
${card('complete', s.complete, s.complete > 0 ? 'complete' : '')}
${card('short', s.short, s.short > 0 ? 'short' : '')}
${card('over', s.over, s.over > 0 ? 'over' : '')}
${card('messages missing', s.missing, s.missing > 0 ? 'short' : '')}
${card('messages extra', s.extra, s.extra > 0 ? 'over' : '')}
${card('events ignored', ignoredTotal, '', `duplicates ${num(ig.duplicateEvents)} · other groups ${num(ig.otherGroups)} · unaligned windows ${num(ig.unalignedWindows)} · undecodable ${num(ig.undecodable)}`)}
</ul>
<p class="legend"><span class="swatch short"></span>short: a tier counted fewer than it was compared with (messages lost)
<span class="swatch over"></span>over: more (duplicates)
<span class="swatch incomplete"></span>incomplete: some counts are partial (a partition not read, or a tier's windows do not fit); not judged
<span class="swatch open"></span>open: within the grace after the window's end, not judged yet</p>
</header>
<main>`);

  const topicIndex = new Map(topics.map(([topic], i) => [topic, i]));
  if (report.incomplete.length > 0 || warnings.length > 0) out.push(warningSection(report, warnings, topicIndex));
  out.push(discrepancySection(report.discrepancies, topicIndex, s.incomplete));
  if (topics.length === 0) out.push('<p class="empty">No audit events: nothing to reconcile.</p>');
  topics.forEach(([topic, rows], i) => out.push(topicSection(report, topic, rows, i)));

  out.push(`</main>
<script type="application/json" id="audit-data">${scriptJson(chartData)}</script>
<script>${library}</script>
<script>${client}</script>
</body>
</html>
`);
  return out.join('\n');
}

/** HTML-escapes text for element content and quoted attribute values. */
export function esc(text: string): string {
  return escapeHtml(text);
}

/**
 * JSON for the content of a `<script type="application/json">`: `<`, `>`, `&`, U+2028 and
 * U+2029 written as `\uXXXX` escapes, so the text cannot end the element (`</script>`) or open
 * a comment (`<!--`); `JSON.parse` of the element's text gives back the value.
 */
export function scriptJson(value: unknown): string {
  return JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** `2024-05-01T10:00:00Z` (UTC; milliseconds only when not 0). */
export function isoTime(ms: number): string {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? `${ms} ms` : d.toISOString().replace('.000Z', 'Z');
}

// ---------------------------------------------------------------------------------------------

/** What the page's script draws: one entry per topic, in the order of the sections. */
interface ChartData {
  readonly topics: readonly {
    readonly labels: readonly string[];
    readonly windows: readonly string[];
    readonly statuses: readonly WindowStatus[];
    readonly series: readonly {
      readonly tier: string;
      readonly color: string;
      readonly counts: readonly (number | null)[];
      /** Per window: the tier's diff when the window is judged and it is not 0, else null. */
      readonly diffs: readonly (number | null)[];
      /** Per window: true when the tier's count there is known to be partial. */
      readonly partial: readonly boolean[];
    }[];
  }[];
}

/**
 * Series colours, by tier position; none is red, amber, violet or grey, which mark short, over,
 * incomplete and open windows.
 */
const palette = ['#1f6fb4', '#7cc47f', '#263238', '#0f9fb0', '#8a6a4f', '#9aa31c', '#2e7d32', '#0b3d91'];

function groupByTopic(windows: readonly WindowRow[]): [string, WindowRow[]][] {
  const byTopic = new Map<string, WindowRow[]>();
  for (const w of windows) {
    let rows = byTopic.get(w.topic);
    if (!rows) byTopic.set(w.topic, (rows = []));
    rows.push(w);
  }
  return [...byTopic];
}

/** The report's tiers that count `rows`, in flow order. */
function tiersOf(report: AuditReport, rows: readonly WindowRow[]): string[] {
  const present = new Set(rows.flatMap((r) => r.counts.map((c) => c.tier)));
  const ordered = report.tiers.map((t) => t.id).filter((id) => present.has(id));
  for (const id of present) if (!ordered.includes(id)) ordered.push(id);
  return ordered;
}

function colorOf(report: AuditReport, tier: string): string {
  const i = report.tiers.findIndex((t) => t.id === tier);
  return palette[(i < 0 ? report.tiers.length : i) % palette.length]!;
}

/** Whether `entry` covers the count of tier `tier` (`cluster/kind`) for `topic`. */
function covers(report: AuditReport, entry: IncompleteTier, tier: string, topic: string): boolean {
  const t = report.tiers.find((x) => x.id === tier);
  if (t === undefined || entry.cluster !== t.cluster) return false;
  return (entry.tier === undefined || entry.tier === t.kind) && (entry.topic === undefined || entry.topic === topic);
}

/** The tiers among `tiers` whose counts of `topic` are known to be partial. */
function partialTiers(report: AuditReport, topic: string, tiers: readonly string[]): Set<string> {
  return new Set(tiers.filter((t) => report.incomplete.some((i) => covers(report, i, t, topic))));
}

/**
 * Why the windows of `topic` (counted by `tiers`) are not judged: the entries covering one of
 * its tiers, and those naming the topic for a tier it has no count of (events left out whole).
 */
function reasonsFor(report: AuditReport, topic: string, tiers: readonly string[]): IncompleteTier[] {
  return report.incomplete.filter((i) => i.topic === topic || tiers.some((t) => covers(report, i, t, topic)));
}

/** `online / consumer / clicks: reason`, "all tiers" and "all topics" where the entry names none. */
function incompleteText(i: IncompleteTier): string {
  return `${i.cluster} / ${i.tier ?? 'all tiers'} / ${i.topic ?? 'all topics'}: ${i.reason}`;
}

function chartDataOf(report: AuditReport, topics: readonly [string, WindowRow[]][]): ChartData {
  return {
    topics: topics.map(([topic, rows]) => {
      const tiers = tiersOf(report, rows);
      const partial = partialTiers(report, topic, tiers);
      return {
        labels: rows.map((r) => axisLabel(r.windowStart, report.windowMs)),
        windows: rows.map((r) => `${isoTime(r.windowStart)} – ${isoTime(r.windowEnd)}`),
        statuses: rows.map((r) => r.status),
        series: tiers.map((tier) => ({
          tier,
          color: colorOf(report, tier),
          counts: rows.map((r) => r.counts.find((c) => c.tier === tier)?.count ?? null),
          diffs: rows.map((r) => {
            const diff = r.counts.find((c) => c.tier === tier)?.diff;
            return judged(r.status) && diff !== undefined && diff !== 0 ? diff : null;
          }),
          partial: rows.map((r) => partial.has(tier) && r.counts.some((c) => c.tier === tier)),
        })),
      };
    }),
  };
}

/** Whether a window of this status was judged (its diffs are losses or duplicates). */
function judged(status: WindowStatus): boolean {
  return status === 'complete' || status === 'short' || status === 'over';
}

function topicSection(report: AuditReport, topic: string, rows: readonly WindowRow[], index: number): string {
  const tiers = tiersOf(report, rows);
  const partial = partialTiers(report, topic, tiers);
  const reasons = reasonsFor(report, topic, tiers).map(incompleteText).join('\n');
  const counts = { short: 0, over: 0, incomplete: 0, open: 0 };
  for (const r of rows) if (r.status !== 'complete') counts[r.status]++;
  const badges = (['short', 'over', 'incomplete', 'open'] as const)
    .filter((k) => counts[k] > 0)
    .map((k) => `<span class="badge ${k}">${counts[k]} ${k}</span>`)
    .join(' ');
  // Which tiers a cell was compared with, where a discrepancy names them.
  const against = new Map<string, string>();
  for (const d of report.discrepancies) if (d.topic === topic) against.set(`${d.windowStart}\0${d.tier}`, d.against);

  const head = tiers.map((t) => `<th class="num" style="border-top-color:${colorOf(report, t)}">${esc(t)}</th>`).join('');
  const body = rows
    .map((r) => {
      const cells = tiers.map((t) => countCell(r.counts.find((c) => c.tier === t), r, against.get(`${r.windowStart}\0${t}`), partial.has(t))).join('');
      const why = r.status === 'incomplete' && reasons ? ` title="${esc(`not judged, some counts are partial:\n${reasons}`)}"` : '';
      return `<tr class="status-${r.status}" data-status="${r.status}"><td class="time">${esc(isoTime(r.windowStart))}</td><td><span class="badge ${r.status}"${why}>${r.status}</span></td>${cells}</tr>`;
    })
    .join('\n');
  return `<section class="topic" id="topic-${index}">
<h2><span class="label">topic</span> <span class="topic-name">${esc(topic)}</span> ${badges}</h2>
<div class="chart"><canvas id="chart-${index}" data-topic-index="${index}" role="img" aria-label="${esc(`counts per window and tier of topic ${topic}`)}"></canvas></div>
<table class="windows">
<thead><tr><th>window start (UTC)</th><th>status</th>${head}</tr></thead>
<tbody>
${body}
</tbody>
</table>
</section>`;
}

/**
 * One tier's cell: count, then its diff (`pending` styling in windows not judged) or `origin`,
 * then `partial` when the count is known to be partial.
 */
function countCell(c: TierCount | undefined, row: WindowRow, against: string | undefined, partial: boolean): string {
  if (!c) return '<td class="num muted">—</td>';
  const count = `<span class="count">${num(c.count)}</span>`;
  const tag = partial ? ' <span class="diff partial">partial</span>' : '';
  const note = partial ? '; partial: some of its messages were not counted' : '';
  if (c.expected === undefined) return `<td class="num${partial ? ' cell-partial' : ''}" title="${esc(`origin: compared with nothing${note}`)}">${count} <span class="diff origin">origin</span>${tag}</td>`;
  const diff = c.diff ?? 0;
  const kind = diff === 0 ? 'even' : !judged(row.status) ? 'pending' : diff < 0 ? 'short' : 'over';
  const title = `expected ${num(c.expected)}${against ? ` (${against})` : ''}, diff ${signed(diff)}${judged(row.status) ? '' : ' (not judged)'}${note}`;
  return `<td class="num cell-${kind}${partial ? ' cell-partial' : ''}" title="${esc(title)}">${count} <span class="diff ${kind}">${esc(signed(diff))}</span>${tag}</td>`;
}

/**
 * "Not judged / warnings": the counts known to be partial (each linking to its topic where it
 * names one the page has), then the warning lines.
 */
function warningSection(report: AuditReport, warnings: readonly string[], topicIndex: ReadonlyMap<string, number>): string {
  const parts: string[] = [];
  if (report.incomplete.length > 0) {
    const n = report.summary.incomplete;
    const items = report.incomplete
      .map((i) => {
        const index = i.topic === undefined ? undefined : topicIndex.get(i.topic);
        const topic = index === undefined ? esc(i.topic ?? 'all topics') : `<a href="#topic-${index}">${esc(i.topic!)}</a>`;
        return `<li class="incomplete-entry"><span class="where">${esc(i.cluster)} / ${esc(i.tier ?? 'all tiers')} / ${topic}</span>: ${esc(i.reason)}</li>`;
      })
      .join('\n');
    parts.push(`<h3>Counts known to be partial: ${num(n)} closed ${n === 1 ? 'window' : 'windows'} not judged</h3>
<ul class="incomplete-list">
${items}
</ul>`);
  }
  if (warnings.length > 0) {
    parts.push(`<h3>Warnings</h3>
<ul class="warning-list">
${warnings.map((w) => `<li class="warning">${esc(w)}</li>`).join('\n')}
</ul>`);
  }
  return `<section class="warnings" id="warnings" role="note">
<h2>Not judged / warnings <span class="badge incomplete">${num(report.incomplete.length + warnings.length)}</span></h2>
${parts.join('\n')}
</section>`;
}

function discrepancySection(list: readonly Discrepancy[], topicIndex: ReadonlyMap<string, number>, incomplete: number): string {
  if (list.length === 0) {
    const none =
      incomplete === 0
        ? 'None: every closed window matches.'
        : `None among the windows judged; ${num(incomplete)} closed ${incomplete === 1 ? 'window was' : 'windows were'} not judged (see Not judged / warnings).`;
    return `<section class="discrepancies"><h2>Discrepancies</h2><p class="empty">${none}</p></section>`;
  }
  const rows = list
    .map(
      (d) =>
        `<tr class="status-${d.kind}" data-status="${d.kind}"><td><a href="#topic-${topicIndex.get(d.topic) ?? ''}">${esc(d.topic)}</a></td><td class="time">${esc(isoTime(d.windowStart))}</td><td>${esc(d.tier)}</td><td>${esc(d.against)}</td><td class="num">${num(d.expected)}</td><td class="num">${num(d.count)}</td><td class="num"><strong>${num(d.messages)}</strong> ${d.kind === 'short' ? 'missing' : 'extra'}</td></tr>`,
    )
    .join('\n');
  return `<section class="discrepancies">
<h2>Discrepancies <span class="badge">${list.length}</span></h2>
<table class="discrepancy-list">
<thead><tr><th>topic</th><th>window start (UTC)</th><th>tier</th><th>compared with</th><th class="num">expected</th><th class="num">counted</th><th class="num">messages</th></tr></thead>
<tbody>
${rows}
</tbody>
</table>
</section>`;
}

function card(label: string, value: number, kind: string, title?: string): string {
  const t = title ? ` title="${esc(title)}"` : '';
  const detail = title ? `<span class="detail">${esc(title)}</span>` : '';
  return `<li class="card ${kind}"${t}><span class="value">${num(value)}</span><span class="name">${esc(label)}</span>${detail}</li>`;
}

/** 1234567 → `1,234,567`. */
function num(n: number): string {
  return n.toLocaleString('en-US');
}

/** `±0`, `+3`, `−3` (a minus sign, not a hyphen). */
function signed(n: number): string {
  return n === 0 ? '±0' : n > 0 ? `+${num(n)}` : `−${num(-n)}`;
}

/** `10 min (600,000 ms)`, `1 h 30 min (…)`, `0 ms`. */
function duration(ms: number): string {
  if (ms === 0) return '0 ms';
  const parts: string[] = [];
  let rest = ms;
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['min', 60_000],
    ['s', 1000],
  ] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)} ${unit}`);
      rest %= size;
    }
  }
  if (rest > 0) parts.push(`${rest} ms`);
  return parts.length === 1 && rest === ms ? parts[0]! : `${parts.join(' ')} (${num(ms)} ms)`;
}

/** Short x-axis label, UTC: `05-01 10:00`, with seconds when windows are under a minute. */
function axisLabel(ms: number, windowMs: number): string {
  const iso = new Date(ms).toISOString();
  return `${iso.slice(5, 10)} ${iso.slice(11, windowMs % 60_000 === 0 ? 16 : 19)}`;
}

function scriptHash(source: string): string {
  return `'sha256-${createHash('sha256').update(source, 'utf8').digest('base64')}'`;
}

let chartJs: string | undefined;

/** The minified UMD build of Chart.js from node_modules, fit to inline in a `<script>`. */
function chartLibrary(): string {
  if (chartJs !== undefined) return chartJs;
  const require = createRequire(import.meta.url);
  let file: string;
  try {
    // The package's exports expose only its entry points: find the UMD build beside the CommonJS one.
    file = join(dirname(require.resolve('chart.js')), 'chart.umd.min.js');
  } catch (err) {
    throw new Error(`the chart library (npm package chart.js) is not installed: ${(err as Error).message}`, { cause: err });
  }
  const source = readFileSync(file, 'utf8').replace(/\n\/\/# sourceMappingURL=\S*\s*$/, '\n');
  if (/<\/script|<!--/i.test(source)) throw new Error(`${file} contains "</script" or "<!--" and cannot be inlined`);
  chartJs = source;
  return source;
}

const css = `
:root { --short: #c62828; --short-bg: #fde2e1; --over: #b26a00; --over-bg: #fff0c7; --open: #6b7280; --open-bg: #eceff3; --incomplete: #6d28d9; --incomplete-bg: #efe8fd; --incomplete-stripes: repeating-linear-gradient(135deg, #efe8fd 0 6px, #e2d6fb 6px 9px); --line: #d8dde4; }
* { box-sizing: border-box; }
body { margin: 0; padding: 24px 32px 48px; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; color: #1b1f24; background: #fff; }
h1 { font-size: 22px; margin: 0 0 12px; }
h2 { font-size: 17px; margin: 0 0 10px; display: flex; align-items: center; gap: 8px; flex-wrap: wrap; }
h2 .label { color: #6b7280; font-weight: normal; font-size: 13px; }
.topic-name { font-family: "DejaVu Sans Mono", ui-monospace, monospace; overflow-wrap: anywhere; }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0 0 16px; }
.facts dt { color: #6b7280; }
.facts dd { margin: 0; }
.cluster, .tier { font-family: "DejaVu Sans Mono", ui-monospace, monospace; background: #f1f3f6; border-radius: 4px; padding: 0 5px; }
.summary { list-style: none; display: flex; flex-wrap: wrap; gap: 10px; padding: 0; margin: 0 0 10px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; min-width: 104px; display: flex; flex-direction: column; }
.card .value { font-size: 22px; font-weight: 600; font-variant-numeric: tabular-nums; }
.card .name { color: #4b5563; }
.card .detail { color: #6b7280; font-size: 11px; max-width: 260px; }
.card.short { background: var(--short-bg); border-color: var(--short); }
.card.short .value { color: var(--short); }
.card.over { background: var(--over-bg); border-color: var(--over); }
.card.over .value { color: var(--over); }
.card.open { background: var(--open-bg); }
.card.incomplete { background: var(--incomplete-stripes); border-color: var(--incomplete); }
.card.incomplete .value { color: var(--incomplete); }
.card.complete .value { color: #2a7d3b; }
.legend { color: #4b5563; font-size: 13px; margin: 6px 0 0; }
.swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; vertical-align: -1px; margin: 0 4px 0 14px; }
.swatch:first-child { margin-left: 0; }
.swatch.short { background: var(--short-bg); border: 1px solid var(--short); }
.swatch.over { background: var(--over-bg); border: 1px solid var(--over); }
.swatch.open { background: var(--open-bg); border: 1px solid var(--open); }
.swatch.incomplete { background: var(--incomplete-stripes); border: 1px solid var(--incomplete); }
.warnings { border: 2px solid var(--incomplete); border-left-width: 6px; border-radius: 6px; background: var(--incomplete-bg); padding: 12px 16px; }
.warnings h2 { color: var(--incomplete); }
.warnings h3 { font-size: 14px; margin: 10px 0 4px; }
.warnings ul { margin: 0; padding-left: 20px; }
.warnings li { margin: 2px 0; overflow-wrap: anywhere; }
.warnings .where { font-family: "DejaVu Sans Mono", ui-monospace, monospace; font-weight: 600; }
.warning-list li { font-family: "DejaVu Sans Mono", ui-monospace, monospace; font-size: 13px; }
section { margin: 28px 0 0; padding-top: 18px; border-top: 1px solid var(--line); }
.chart { position: relative; height: 300px; margin: 0 0 14px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 4px 10px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: #f6f7f9; font-weight: 600; white-space: nowrap; }
table.windows th.num { border-top: 3px solid transparent; }
.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.time { font-family: "DejaVu Sans Mono", ui-monospace, monospace; white-space: nowrap; }
.count { display: block; }
.diff { display: block; font-size: 11px; color: #6b7280; }
.diff.short { color: var(--short); font-weight: 700; }
.diff.over { color: var(--over); font-weight: 700; }
.diff.origin { font-style: italic; }
tr.status-short td { background: var(--short-bg); }
tr.status-short td:first-child { box-shadow: inset 4px 0 var(--short); }
tr.status-over td { background: var(--over-bg); }
tr.status-over td:first-child { box-shadow: inset 4px 0 var(--over); }
tr.status-open td { background: var(--open-bg); color: #4b5563; }
tr.status-open td:first-child { box-shadow: inset 4px 0 var(--open); }
tr.status-incomplete td { background: var(--incomplete-stripes); }
tr.status-incomplete td:first-child { box-shadow: inset 4px 0 var(--incomplete); }
.diff.partial { color: var(--incomplete); font-weight: 700; }
.badge { display: inline-block; border-radius: 10px; padding: 0 8px; font-size: 12px; font-weight: 600; background: #e5e7eb; color: #374151; }
.badge.short { background: var(--short); color: #fff; }
.badge.over { background: var(--over); color: #fff; }
.badge.open { background: var(--open); color: #fff; }
.badge.incomplete { background: var(--incomplete); color: #fff; }
.badge.complete { background: #d7efdc; color: #1f6b30; }
.muted { color: #9ca3af; }
.empty { color: #4b5563; }
`;

/**
 * The page's own script: draws one Chart.js line chart per topic from #audit-data, then sets
 * `data-charts-ready` on <body>. Plain ES2020, no template literals (it is one itself).
 */
const clientScript = `
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('audit-data').textContent);
  var band = { short: 'rgba(198, 40, 40, 0.13)', over: 'rgba(230, 150, 0, 0.18)', incomplete: 'rgba(109, 40, 217, 0.07)', open: 'rgba(107, 114, 128, 0.12)' };
  var hatch = { incomplete: 'rgba(109, 40, 217, 0.28)' };
  var mark = { short: '#c62828', over: '#e69600', incomplete: '#6d28d9' };
  var drawn = 0;
  function fmt(n) { return n === null || n === undefined ? 'none' : n.toLocaleString('en-US'); }
  function byDataset(a, b) { return a.datasetIndex - b.datasetIndex; }
  function signed(n) { return n === 0 ? '\\u00b10' : n > 0 ? '+' + fmt(n) : '\\u2212' + fmt(-n); }
  // Shades the windows that are short, over, incomplete (hatched) or open behind the lines.
  var bands = {
    id: 'auditBands',
    beforeDatasetsDraw: function (chart) {
      var t = data.topics[chart.options.plugins.auditBands.topic];
      var x = chart.scales.x, area = chart.chartArea, ctx = chart.ctx;
      var step = t.labels.length > 1 ? Math.abs(x.getPixelForValue(1) - x.getPixelForValue(0)) : area.right - area.left;
      ctx.save();
      for (var i = 0; i < t.statuses.length; i++) {
        var fill = band[t.statuses[i]];
        if (!fill) continue;
        var left = Math.max(area.left, x.getPixelForValue(i) - step / 2);
        var right = Math.min(area.right, x.getPixelForValue(i) + step / 2);
        ctx.fillStyle = fill;
        ctx.fillRect(left, area.top, right - left, area.bottom - area.top);
        var lines = hatch[t.statuses[i]];
        if (!lines) continue;
        var height = area.bottom - area.top;
        ctx.save();
        ctx.beginPath();
        ctx.rect(left, area.top, right - left, height);
        ctx.clip();
        ctx.strokeStyle = lines;
        ctx.lineWidth = 1;
        ctx.beginPath();
        for (var s = left - height; s < right; s += 8) { ctx.moveTo(s, area.bottom); ctx.lineTo(s + height, area.top); }
        ctx.stroke();
        ctx.restore();
      }
      ctx.restore();
    }
  };
  var ready = {
    id: 'auditReady',
    afterRender: function (chart) {
      var canvas = chart.canvas;
      if (canvas.dataset.rendered) return;
      canvas.dataset.rendered = 'true';
      drawn++;
      if (drawn === data.topics.length) document.body.dataset.chartsReady = String(drawn);
    }
  };
  if (data.topics.length === 0) { document.body.dataset.chartsReady = '0'; return; }
  data.topics.forEach(function (t, index) {
    var canvas = document.getElementById('chart-' + index);
    var n = t.series.length;
    // Tiers that agree draw on top of one another: earlier tiers get wider lines, drawn below
    // the later ones (a higher order is drawn first), so equal counts show as one striped
    // line and a tier that differs leaves it.
    var datasets = t.series.map(function (s, i) {
      var width = Math.min(14, 2 + 3 * (n - 1 - i));
      return {
        label: s.tier,
        data: s.counts,
        borderColor: s.color,
        backgroundColor: s.color,
        borderWidth: width,
        pointStyle: 'circle',
        pointRadius: width / 2 + 1.5,
        pointHoverRadius: width / 2 + 3,
        pointBorderWidth: 0,
        tension: 0,
        spanGaps: false,
        order: 1 + (n - 1 - i)
      };
    });
    // Discrepancies of judged windows, and counts known to be partial, as markers above every
    // line, one series per kind.
    var labels = { short: 'short: fewer than compared with', over: 'over: more than compared with', incomplete: 'partial count: not judged' };
    var styles = { short: 'triangle', over: 'rectRot', incomplete: 'crossRot' };
    ['short', 'over', 'incomplete'].forEach(function (kind) {
      var points = [];
      t.series.forEach(function (s) {
        s.counts.forEach(function (c, i) {
          var d = s.diffs[i];
          var hit = kind === 'incomplete' ? s.partial[i] && c !== null : d !== null && (d < 0) === (kind === 'short');
          if (hit) points.push({ x: t.labels[i], y: c, tier: s.tier, diff: d });
        });
      });
      if (points.length === 0) return;
      datasets.push({
        label: labels[kind],
        data: points,
        marker: true,
        showLine: false,
        borderColor: kind === 'incomplete' ? mark[kind] : '#ffffff',
        backgroundColor: mark[kind],
        pointStyle: styles[kind],
        pointRadius: 9,
        pointHoverRadius: 11,
        pointBorderWidth: kind === 'incomplete' ? 3 : 1.5,
        order: 0
      });
    });
    new Chart(canvas, {
      type: 'line',
      data: { labels: t.labels, datasets: datasets },
      plugins: [bands, ready],
      options: {
        animation: false,
        responsive: true,
        maintainAspectRatio: false,
        interaction: { mode: 'index', intersect: false },
        scales: {
          x: { offset: true, title: { display: true, text: 'window start (UTC)' }, ticks: { maxRotation: 0, autoSkip: true } },
          y: { beginAtZero: true, title: { display: true, text: 'messages' }, ticks: { precision: 0 } }
        },
        plugins: {
          auditBands: { topic: index },
          legend: { position: 'top', labels: { usePointStyle: true, boxHeight: 8, sort: byDataset } },
          tooltip: {
            filter: function (item) { return !item.dataset.marker; },
            itemSort: byDataset,
            callbacks: {
              title: function (items) { return items.length ? t.windows[items[0].dataIndex] + ' (' + t.statuses[items[0].dataIndex] + ')' : ''; },
              label: function (item) {
                var s = t.series[item.datasetIndex], d = s.diffs[item.dataIndex];
                return s.tier + ': ' + fmt(s.counts[item.dataIndex]) + (d === null || d === undefined ? '' : ' (' + signed(d) + ')') + (s.partial[item.dataIndex] ? ' (partial)' : '');
              }
            }
          }
        }
      }
    });
  });
})();
`;
