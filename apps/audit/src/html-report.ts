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
 *   diamond, a count known to be partial a violet cross); under it a bar chart of each compared
 *   tier's difference from the tier it is compared with per window (so that 20 lost of 2,000
 *   shows), with a caption of each tier's total difference over the judged windows; then a table with a row per window
 *   (short rows red, over rows amber, incomplete rows violet and striped, open rows grey) and a
 *   column per tier, each cell the tier's count and its diff against what it is compared with
 *   (`±0`, `−n`, `+n`, bold and coloured only in judged windows; `origin` for a tier compared
 *   with nothing; `partial` for a count known to be partial; the tiers compared with are named
 *   in the cell's title where a discrepancy names them, as the report does not carry them
 *   otherwise). An incomplete window's status badge has the reasons in its title.
 *
 * A `consumer` tier is labelled as klog-audit's own count; the windows card says how many windows
 * per topic (`5 windows × 2 topics`); every time is written one way (`2026-11-30 08:31:30`, UTC,
 * as the terminal report writes it).
 *
 * Tables and lists are plain HTML (readable with scripts off); the charts are drawn by Chart.js
 * (the package `chart.js`, its UMD build read from node_modules when rendering and inlined). The
 * page's styles and script are real files, `src/report/report.css` and
 * `src/report/report-client.js` (copied into `dist/report/` by the build), inlined when rendering.
 * Every string from the report (topic, cluster and tier names, reasons) and every warning is
 * HTML-escaped where it goes
 * into markup, and the chart data goes in as JSON in a non-executed `<script
 * type="application/json">` with `<`, `>`, `&`, U+2028 and U+2029 written as `\uXXXX`, so no
 * name can close the element or run as code. The two executed scripts are allowed by hash.
 *
 * Hooks for tests and tools: each table row has `data-status`
 * (`open|incomplete|complete|short|over`; a discrepancy row `short|over`),
 * each chart canvas `data-topic-index` (the counts `#chart-<i>`, the differences
 * `#chart-diff-<i>`), each caption entry `data-tier`, and once every chart is drawn `<body>`
 * gets `data-charts-ready="<number of charts>"`.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import escapeHtml from 'escape-html';
import type { AuditReport, Discrepancy, IncompleteTier, TierCount, WindowRow, WindowStatus } from './reconcile.js';
import { formatTime } from './table.js';

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
  const client = reportAsset('report-client.js');
  const css = reportAsset('report.css');
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
<title>klog audit report, ${esc(`${formatTime(report.generatedAt)} UTC`)}</title>
<style>${css}</style>
</head>
<body>
<header>
<h1>klog audit report</h1>
<dl class="facts">
<dt>generated</dt><dd>${esc(`${formatTime(report.generatedAt)} UTC`)}</dd>
<dt>window</dt><dd>${esc(duration(report.windowMs))}</dd>
<dt>grace</dt><dd>${esc(duration(report.graceMs))}</dd>
<dt>clusters</dt><dd>${report.clusters.map((c) => `<span class="cluster">${esc(c)}</span>`).join(' → ') || '<span class="muted">none</span>'}</dd>
<dt>tiers</dt><dd>${tierList || '<span class="muted">none</span>'}</dd>
</dl>
<ul class="summary" id="summary">
${card('windows', s.windows, '', windowsDetail(topics))}
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


// ---------------------------------------------------------------------------------------------

/** What the page's script draws: one entry per topic, in the order of the sections. */
interface ChartData {
  readonly topics: readonly {
    readonly labels: readonly string[];
    readonly windows: readonly string[];
    readonly statuses: readonly WindowStatus[];
    readonly series: readonly {
      readonly tier: string;
      /** The tier as the legend names it (a `consumer` tier is klog-audit's own count). */
      readonly label: string;
      readonly color: string;
      readonly counts: readonly (number | null)[];
      /** Per window: the tier's diff when the window is judged and it is not 0, else null. */
      readonly diffs: readonly (number | null)[];
      /** Per window: true when the tier's count there is known to be partial. */
      readonly partial: readonly boolean[];
      /** Per window: count − what it is compared with (0 included), null where it is compared with nothing or the window is open. */
      readonly delta: readonly (number | null)[];
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
        labels: rows.map((r) => formatTime(r.windowStart)),
        windows: rows.map((r) => `${formatTime(r.windowStart)} – ${formatTime(r.windowEnd)} UTC`),
        statuses: rows.map((r) => r.status),
        series: tiers.map((tier) => ({
          tier,
          label: tierLabel(report, tier),
          color: colorOf(report, tier),
          counts: rows.map((r) => r.counts.find((c) => c.tier === tier)?.count ?? null),
          diffs: rows.map((r) => {
            const diff = r.counts.find((c) => c.tier === tier)?.diff;
            return judged(r.status) && diff !== undefined && diff !== 0 ? diff : null;
          }),
          partial: rows.map((r) => partial.has(tier) && r.counts.some((c) => c.tier === tier)),
          delta: rows.map((r) => {
            const c = r.counts.find((x) => x.tier === tier);
            return c?.expected === undefined || r.status === 'open' ? null : c.count - c.expected;
          }),
        })),
      };
    }),
  };
}

/** A tier's name for people: a `consumer` tier is what klog-audit itself counted in that cluster. */
function tierLabel(report: AuditReport, tier: string): string {
  return report.tiers.find((t) => t.id === tier)?.kind === 'consumer' ? `${tier} (klog-audit's count)` : tier;
}

/**
 * The line under a topic's charts: each compared tier's total difference over the judged
 * windows, e.g. `analytics/mirror: −20 in 5 judged windows (5 short)`.
 */
function differenceCaption(report: AuditReport, rows: readonly WindowRow[], tiers: readonly string[]): string | undefined {
  const parts: string[] = [];
  for (const tier of tiers) {
    let total = 0;
    let judgedWindows = 0;
    let off = 0;
    let compared = false;
    for (const r of rows) {
      const c = r.counts.find((x) => x.tier === tier);
      if (c?.expected === undefined) continue;
      compared = true;
      if (!judged(r.status)) continue;
      judgedWindows++;
      total += c.count - c.expected;
      if (c.count !== c.expected) off++;
    }
    if (compared) parts.push(`<span class="diff-entry" data-tier="${esc(tier)}">${esc(tierLabel(report, tier))}: <strong>${esc(signed(total))}</strong> in ${num(judgedWindows)} judged ${judgedWindows === 1 ? 'window' : 'windows'} (${num(off)} off)</span>`);
  }
  return parts.length === 0 ? undefined : parts.join(' · ');
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

  const head = tiers
    .map((t) => {
      const own = tierLabel(report, t) !== t ? ` <span class="detail">klog-audit's count</span>` : '';
      return `<th class="num" style="border-top-color:${colorOf(report, t)}">${esc(t)}${own}</th>`;
    })
    .join('');
  const caption = differenceCaption(report, rows, tiers);
  const differences =
    caption === undefined
      ? ''
      : `<div class="chart chart-diff"><canvas id="chart-diff-${index}" data-topic-index="${index}" role="img" aria-label="${esc(`difference of each tier from the tier it is compared with, per window, topic ${topic}`)}"></canvas></div>
<p class="diff-caption">difference from the tier compared with, over the judged windows: ${caption}</p>`;
  const body = rows
    .map((r) => {
      const cells = tiers.map((t) => countCell(r.counts.find((c) => c.tier === t), r, against.get(`${r.windowStart}\0${t}`), partial.has(t))).join('');
      const why = r.status === 'incomplete' && reasons ? ` title="${esc(`not judged, some counts are partial:\n${reasons}`)}"` : '';
      return `<tr class="status-${r.status}" data-status="${r.status}"><td class="time">${esc(formatTime(r.windowStart))}</td><td><span class="badge ${r.status}"${why}>${r.status}</span></td>${cells}</tr>`;
    })
    .join('\n');
  return `<section class="topic" id="topic-${index}">
<h2><span class="label">topic</span> <span class="topic-name">${esc(topic)}</span> ${badges}</h2>
<div class="chart"><canvas id="chart-${index}" data-topic-index="${index}" role="img" aria-label="${esc(`counts per window and tier of topic ${topic}`)}"></canvas></div>
${differences}
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
        `<tr class="status-${d.kind}" data-status="${d.kind}"><td><a href="#topic-${topicIndex.get(d.topic) ?? ''}">${esc(d.topic)}</a></td><td class="time">${esc(formatTime(d.windowStart))}</td><td>${esc(d.tier)}</td><td>${esc(d.against)}</td><td class="num">${num(d.expected)}</td><td class="num">${num(d.count)}</td><td class="num"><strong>${num(d.messages)}</strong> ${d.kind === 'short' ? 'missing' : 'extra'}</td></tr>`,
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

/** `5 windows × 2 topics`, or `over 3 topics` when the topics have different numbers of windows. */
function windowsDetail(topics: readonly [string, WindowRow[]][]): string | undefined {
  if (topics.length === 0) return undefined;
  const per = new Set(topics.map(([, rows]) => rows.length));
  const t = `${num(topics.length)} ${topics.length === 1 ? 'topic' : 'topics'}`;
  if (per.size > 1) return `over ${t}`;
  const w = topics[0]![1].length;
  return `${num(w)} ${w === 1 ? 'window' : 'windows'} × ${t}`;
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

function scriptHash(source: string): string {
  return `'sha256-${createHash('sha256').update(source, 'utf8').digest('base64')}'`;
}

/** The page's files (src/report/, copied beside this module into dist/report/ by the build), read once. */
const assets = new Map<string, string>();

/** A file of src/report/ as text, fit to inline in a `<style>` or `<script>`. @throws Error when it is missing or could end its element */
function reportAsset(name: string): string {
  let text = assets.get(name);
  if (text === undefined) {
    text = readFileSync(new URL(`./report/${name}`, import.meta.url), 'utf8');
    if (/<\/(script|style)|<!--/i.test(text)) throw new Error(`report/${name} contains "</script", "</style" or "<!--" and cannot be inlined`);
    assets.set(name, text);
  }
  return text;
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

