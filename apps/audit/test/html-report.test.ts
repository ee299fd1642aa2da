import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { AuditEvent, AuditTier } from '@klog/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { esc, renderHtmlReport, scriptJson } from '../src/html-report.js';
import { formatTime } from '../src/table.js';
import { reconcile } from '../src/reconcile.js';
import type { AuditReport, ClusterEvents, IncompleteTier } from '../src/reconcile.js';
import { openInChromium } from './chromium.js';
import type { PageFindings } from './chromium.js';

const windowMs = 10 * 60_000;
const graceMs = 5 * 60_000;
const t0 = Date.UTC(2025, 2, 14, 9, 0);
const w = (i: number) => t0 + i * windowMs;
/** Window 5 ends at w(6); with 5 min of grace it is still open 2 min later. */
const now = w(6) + 2 * 60_000;
const group = 'audit';
const hostile = `</script><script>document.title='pwned'</script><img src=x onerror="console.error('xss')">&"'`;
/** The screenshot, and the page beside it, to look at after the test (the folder is not committed). */
const screenshot = fileURLToPath(new URL('../test-output/audit-report.png', import.meta.url));
const pageCopy = fileURLToPath(new URL('../test-output/audit-report.html', import.meta.url));
/** The same for the report with counts known to be partial. */
const incompleteScreenshot = fileURLToPath(new URL('../test-output/audit-report-incomplete.png', import.meta.url));
const incompletePageCopy = fileURLToPath(new URL('../test-output/audit-report-incomplete.html', import.meta.url));

/** Counts per window (index = window) of one tier of one topic. */
type Counts = readonly number[];
interface TopicCounts {
  readonly online: { readonly producer: Counts; readonly consumer: Counts };
  readonly analytics?: { readonly mirror: Counts; readonly consumer: Counts };
}

const even = [1000, 1200, 900, 1100, 1000];
const topics: Record<string, TopicCounts> = {
  // Window 2: the mirror maker lost 5 messages between the online and the analytics cluster.
  'page-views': {
    online: { producer: [...even, 400], consumer: [...even, 380] },
    analytics: { mirror: [1000, 1200, 895, 1100, 1000, 350], consumer: [1000, 1200, 895, 1100, 1000, 300] },
  },
  // Window 3: the online cluster's consumer read 3 messages twice.
  clicks: {
    online: { producer: [500, 520, 510, 505, 530, 100], consumer: [500, 520, 510, 508, 530, 100] },
    analytics: { mirror: [500, 520, 510, 508, 530, 90], consumer: [500, 520, 510, 508, 530, 90] },
  },
  // Not mirrored: no analytics tiers.
  'local-only': { online: { producer: [20, 30, 25, 15, 10, 5], consumer: [20, 30, 25, 15, 10, 5] } },
  [hostile]: {
    online: { producer: [7, 8, 9, 10, 11, 2], consumer: [7, 8, 9, 10, 11, 2] },
    analytics: { mirror: [7, 8, 9, 10, 11, 2], consumer: [7, 8, 9, 10, 11, 2] },
  },
};

/**
 * The sample, but a partition of `local-only` in the online cluster was not read by the audit
 * consumer: its consumer tier counted 7 fewer in window 2, which must not be judged a loss.
 */
const partialTopics: Record<string, TopicCounts> = {
  ...topics,
  'local-only': { online: { producer: [20, 30, 25, 15, 10, 5], consumer: [20, 30, 18, 15, 10, 5] } },
};
const partialEntry: IncompleteTier = { cluster: 'online', tier: 'consumer', topic: 'local-only', reason: `partition 1-0 not counted: owned by another klog-audit ${hostile}` };
const warnings = [
  'online: local-only 1-0 not counted: owned by another klog-audit',
  `online: ${hostile} 1-1 offsets [0, 40) were deleted by retention before they were counted`,
  'analytics: 12 messages without a creation time were not counted',
];

/** Audit events as the counters would emit them: each count split over two emitters. */
function eventsOf(cluster: 'online' | 'analytics', counted: Record<string, TopicCounts> = topics): AuditEvent[] {
  const events: AuditEvent[] = [];
  const seq = new Map<string, number>();
  const emit = (instance: string, tier: AuditTier, topic: string, window: number, count: number) => {
    if (count <= 0) return;
    const n = seq.get(instance) ?? 0;
    seq.set(instance, n + 1);
    events.push({ v: 1, tier, host: `${cluster}-host`, instance, seq: n, topic, windowStart: w(window), windowMs, count, ...(tier === 'consumer' ? { group } : {}) });
  };
  for (const [topic, counts] of Object.entries(counted)) {
    const tiers = counts[cluster];
    if (!tiers) continue;
    for (const [tier, perWindow] of Object.entries(tiers) as [AuditTier, Counts][]) {
      perWindow.forEach((count, i) => {
        const first = Math.ceil(count / 2);
        emit(`${cluster}-${tier}-a`, tier, topic, i, first);
        emit(`${cluster}-${tier}-b`, tier, topic, i, count - first);
      });
    }
  }
  return events;
}

function sampleReport(): AuditReport {
  const clusters: ClusterEvents[] = [
    { name: 'online', events: eventsOf('online') },
    { name: 'analytics', events: eventsOf('analytics'), undecodable: 1 },
  ];
  return reconcile(clusters, { windowMs, graceMs, now, group });
}

/** {@link sampleReport} with {@link partialEntry}: the closed windows of `local-only` are incomplete. */
function incompleteReport(): AuditReport {
  const clusters: ClusterEvents[] = [
    { name: 'online', events: eventsOf('online', partialTopics), incomplete: [partialEntry] },
    { name: 'analytics', events: eventsOf('analytics', partialTopics), undecodable: 1 },
  ];
  return reconcile(clusters, { windowMs, graceMs, now, group });
}

/** The chart data the page carries. */
function chartDataOfPage(html: string): { topics: { statuses: string[]; series: { tier: string; diffs: (number | null)[]; partial: boolean[] }[] }[] } {
  return JSON.parse(html.match(/<script type="application\/json" id="audit-data">(.*?)<\/script>/s)![1]!) as ReturnType<typeof chartDataOfPage>;
}

describe('the sample report', () => {
  it('has the windows the page test relies on', () => {
    const r = sampleReport();
    expect(r.clusters).toEqual(['online', 'analytics']);
    expect(r.tiers.map((t) => t.id)).toEqual(['online/producer', 'online/consumer', 'analytics/mirror', 'analytics/consumer']);
    expect(r.summary).toMatchObject({ windows: 24, open: 4, short: 1, over: 1, complete: 18, missing: 5, extra: 3 });
    expect(r.discrepancies.map((d) => [d.topic, d.kind, d.tier, d.against, d.messages])).toEqual([
      ['clicks', 'over', 'online/consumer', 'online/producer', 3],
      ['page-views', 'short', 'analytics/mirror', 'online/consumer', 5],
    ]);
    expect(r.incomplete).toEqual([]);
    expect(r.summary.incomplete).toBe(0);
  });

  it('with a partition not read, has incomplete windows and no loss for them', () => {
    const r = incompleteReport();
    expect(r.summary).toMatchObject({ windows: 24, open: 4, incomplete: 5, short: 1, over: 1, complete: 13, missing: 5, extra: 3 });
    expect(r.incomplete).toEqual([partialEntry]);
    expect(r.windows.filter((x) => x.status === 'incomplete').map((x) => x.topic)).toEqual(Array(5).fill('local-only'));
    expect(r.discrepancies.map((d) => d.topic)).toEqual(['clicks', 'page-views']);
  });
});

describe('incomplete windows and warnings', () => {
  it('shows no warning section when there is nothing to warn about', () => {
    const html = renderHtmlReport(sampleReport());
    expect(html).not.toContain('id="warnings"');
    expect(html).not.toContain('data-status="incomplete"');
  });

  it('marks incomplete windows, lists why and the warnings, all escaped', () => {
    const html = renderHtmlReport(incompleteReport(), warnings);
    expect(html.match(/<tr class="status-incomplete" data-status="incomplete">/g)).toHaveLength(5);
    expect(html).toMatch(/<li class="card incomplete"[^>]*><span class="value">5<\/span><span class="name">incomplete<\/span>/);
    expect(html).toContain(`<span class="swatch incomplete"></span>incomplete: some counts are partial (a partition not read, or a tier's windows do not fit); not judged`);
    // Near the top: before the discrepancies and every topic.
    const at = html.indexOf('<section class="warnings" id="warnings"');
    expect(at).toBeGreaterThan(0);
    expect(at).toBeLessThan(html.indexOf('<section class="discrepancies"'));
    expect(html).toContain(`<span class="where">online / consumer / <a href="#topic-2">local-only</a></span>: ${esc(partialEntry.reason)}</li>`);
    for (const w of warnings) expect(html).toContain(`<li class="warning">${esc(w)}</li>`);
    expect(html).not.toContain(hostile);
    expect(html.match(/<script/gi)).toHaveLength(3);
    // Not judged: the consumer's −7 is neither a discrepancy nor a marker, and its count is partial.
    const local = chartDataOfPage(html).topics[2]!;
    expect(local.statuses).toEqual(['incomplete', 'incomplete', 'incomplete', 'incomplete', 'incomplete', 'open']);
    expect(local.series.map((x) => [x.tier, x.diffs, x.partial])).toEqual([
      ['online/producer', Array(6).fill(null), Array(6).fill(false)],
      ['online/consumer', Array(6).fill(null), Array(6).fill(true)],
    ]);
  });

  it('names the tiers and topics an entry covers as "all tiers" and "all topics" when it names none', () => {
    const base = sampleReport();
    const html = renderHtmlReport({ ...base, incomplete: [{ cluster: 'analytics', reason: 'audit topic partition 1-0: not read' }, { cluster: 'online', topic: 'gone', reason: 'r' }] });
    expect(html).toContain('<span class="where">analytics / all tiers / all topics</span>: audit topic partition 1-0: not read</li>');
    expect(html).toContain('<span class="where">online / all tiers / gone</span>: r</li>');
  });

  it('says the discrepancies are none among the windows judged when some were not', () => {
    const r = incompleteReport();
    const html = renderHtmlReport({ ...r, discrepancies: [] });
    expect(html).toContain('None among the windows judged; 5 closed windows were not judged (see Not judged / warnings).');
  });
});

describe('escaping', () => {
  it("carries every tier's difference per window for the difference chart, even when it is small", () => {
    const data = chartDataOfPage(renderHtmlReport(sampleReport())) as unknown as {
      topics: { series: { tier: string; label: string; delta: (number | null)[] }[] }[];
    };
    const pageViews = data.topics.find((t) => t.series.some((s) => s.delta.includes(-5)))!;
    expect(pageViews.series.map((s) => [s.label, s.delta[2]])).toEqual([
      ['online/producer', null],
      ["online/consumer (klog-audit's count)", 0],
      ['analytics/mirror', -5],
      ["analytics/consumer (klog-audit's count)", 0],
    ]);
  });

  it('escapes text for HTML', () => {
    expect(esc(`<b a="1">'&'</b>`)).toBe('&lt;b a=&quot;1&quot;&gt;&#39;&amp;&#39;&lt;/b&gt;');
  });

  it('writes JSON that cannot leave a <script> element and parses back', () => {
    const value = { topic: hostile, other: '<!-- -->\u2028\u2029' };
    const json = scriptJson(value);
    expect(json).not.toMatch(/[<>&\u2028\u2029]/);
    expect(JSON.parse(json)).toEqual(value);
  });

  it('puts no name from the report into the page as markup', () => {
    const html = renderHtmlReport(sampleReport());
    expect(html).not.toContain(hostile);
    expect(html).not.toContain(`<script>document.title`);
    expect(html).not.toContain('<img');
    expect(html).toContain(esc(hostile));
    // Only the page's own scripts: the data (JSON), Chart.js and the one that draws.
    expect(html.match(/<script/gi)).toHaveLength(3);
    expect(html.match(/<\/script/gi)).toHaveLength(3);
    // The chart data parses back from the page.
    const data = html.match(/<script type="application\/json" id="audit-data">(.*?)<\/script>/s)?.[1];
    expect((JSON.parse(data!) as { topics: unknown[] }).topics).toHaveLength(4);
  });

  it('renders a report with no windows', () => {
    const html = renderHtmlReport(reconcile([], { windowMs, graceMs, now, group }));
    expect(html).toContain('No audit events');
    expect(html).toContain('None: every closed window matches.');
  });
});

describe('the HTML report in Chromium', () => {
  let dir: string;
  let found: PageFindings;
  let report: AuditReport;

  beforeAll(async () => {
    report = sampleReport();
    dir = await mkdtemp(join(tmpdir(), 'klog-audit-html-'));
    const file = join(dir, 'report.html');
    const html = renderHtmlReport(report);
    await writeFile(file, html);
    found = await openInChromium(file, { screenshot, textSelector: '#summary .card:first-child .detail, table.windows th.num, .diff-caption .diff-entry' });
    await writeFile(pageCopy, html);
  }, 120_000);

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('opens without errors and fetches nothing', () => {
    expect(found.consoleErrors).toEqual([]);
    expect(found.pageErrors).toEqual([]);
    expect(found.failedRequests).toEqual([]);
    expect(found.externalRequests).toEqual([]);
  });

  it("draws two charts per topic: the counts, and each tier's difference from what it is compared with", () => {
    expect(found.chartsReady).toBe('8');
    expect(found.canvases).toBe(8);
    expect(found.chartsDrawn).toBe(8);
  });

  it("says how many windows per topic, labels the consumer tiers as the audit's own count, and shows the differences", () => {
    expect(found.texts[0]).toBe('6 windows × 4 topics');
    expect(found.texts).toContain("online/consumer klog-audit's count");
    expect(found.texts).toContain("analytics/consumer klog-audit's count");
    expect(found.texts).toContain('online/producer');
    // page-views: the mirror lost 5 in one judged window; clicks: the online cluster holds 3 more.
    expect(found.texts).toContain('analytics/mirror: −5 in 5 judged windows (1 off)');
    expect(found.texts).toContain("online/consumer (klog-audit's count): +3 in 5 judged windows (1 off)");
  });

  it('highlights the short and the over window and names them', () => {
    const rows = (status: string) => found.highlightedRows.filter((r) => r.status === status).map((r) => r.text);
    // The topic's table: window, status, one cell per tier (count, then diff or "origin").
    const tiers = (...cells: string[]) => cells.join(' | ');
    // One row in the discrepancy list (topic, window, tier, compared with, expected, counted,
    // messages), one in the topic's table.
    expect(rows('short')).toEqual([
      `page-views | ${formatTime(w(2))} | analytics/mirror | online/consumer | 900 | 895 | 5 missing`,
      `${formatTime(w(2))} | short | ${tiers('900 origin', '900 ±0', '895 −5', '895 ±0')}`,
    ]);
    expect(rows('over')).toEqual([
      `clicks | ${formatTime(w(3))} | online/consumer | online/producer | 505 | 508 | 3 extra`,
      `${formatTime(w(3))} | over | ${tiers('505 origin', '508 +3', '508 ±0', '508 ±0')}`,
    ]);
  });

  it('says how to install Chromium when it is missing', async () => {
    await expect(openInChromium(join(dir, 'report.html'), { screenshot: join(dir, 'x.png'), executablePath: join(dir, 'no-chromium') })).rejects.toThrow(
      /no-chromium not found: .*`bash scripts\/chromium\.sh install`/,
    );
  });

  it('shows a hostile topic name as text without running it', () => {
    expect(found.title).not.toContain('pwned');
    expect(found.headings.some((h) => h.includes(hostile))).toBe(true);
  });
});

describe('the HTML report with incomplete windows and warnings in Chromium', () => {
  let dir: string;
  let found: PageFindings;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'klog-audit-html-'));
    const file = join(dir, 'report.html');
    const html = renderHtmlReport(incompleteReport(), warnings);
    await writeFile(file, html);
    found = await openInChromium(file, {
      screenshot: incompleteScreenshot,
      highlightSelector: 'table.windows tr[data-status]',
      textSelector: '#summary .card.incomplete .value, #summary .card.incomplete .name, #warnings h2, #warnings li',
    });
    await writeFile(incompletePageCopy, html);
  }, 120_000);

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('opens without errors, fetches nothing and draws every chart', () => {
    expect(found.consoleErrors).toEqual([]);
    expect(found.pageErrors).toEqual([]);
    expect(found.failedRequests).toEqual([]);
    expect(found.externalRequests).toEqual([]);
    expect(found.chartsReady).toBe('8');
    expect(found.chartsDrawn).toBe(8);
    expect(found.title).not.toContain('pwned');
  });

  it('marks the windows of the partial topic incomplete, not short', () => {
    const rows = (status: string) => found.highlightedRows.filter((r) => r.status === status).map((r) => r.text);
    expect(rows('incomplete')).toEqual([
      `${formatTime(w(0))} | incomplete | 20 origin | 20 ±0 partial`,
      `${formatTime(w(1))} | incomplete | 30 origin | 30 ±0 partial`,
      `${formatTime(w(2))} | incomplete | 25 origin | 18 −7 partial`,
      `${formatTime(w(3))} | incomplete | 15 origin | 15 ±0 partial`,
      `${formatTime(w(4))} | incomplete | 10 origin | 10 ±0 partial`,
    ]);
    expect(rows('short')).toHaveLength(1);
    expect(rows('over')).toHaveLength(1);
    expect(rows('open')).toHaveLength(4);
  });

  it('styles incomplete rows unlike short, over, open and complete ones', () => {
    const background = (status: string) => found.highlightedRows.find((r) => r.status === status)!.background;
    expect(background('incomplete')).toContain('repeating-linear-gradient');
    for (const other of ['short', 'over', 'open', 'complete']) expect(background(other)).not.toBe(background('incomplete'));
  });

  it('shows the incomplete count, the reason and every warning as text', () => {
    expect(found.texts).toEqual([
      '5',
      'incomplete',
      'Not judged / warnings 4',
      `online / consumer / local-only: ${partialEntry.reason}`,
      ...warnings,
    ]);
  });
});
