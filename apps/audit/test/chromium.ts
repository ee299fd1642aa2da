/**
 * Opens an HTML file in Debian's headless Chromium (/usr/bin/chromium, installed by
 * `bash scripts/chromium.sh install`) through playwright-core, as a person would, and tells
 * what happened: console errors, uncaught page errors, failed requests and requests that left
 * the file (a self-contained page makes none), how many chart canvases got drawn (not blank),
 * the text and background of the highlighted rows, and the text of any other elements asked
 * for; it also saves a full-page screenshot.
 *
 * The page is expected to set `data-charts-ready` on <body> once its charts are drawn (the
 * HTML report does, src/html-report.ts).
 */
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

/** The little of the DOM the in-page code uses (this package compiles without the DOM library). */
interface PageElement {
  readonly textContent: string | null;
  readonly width: number;
  readonly height: number;
  getAttribute(name: string): string | null;
  querySelectorAll(selector: string): ArrayLike<PageElement>;
  getContext(kind: '2d'): { getImageData(x: number, y: number, w: number, h: number): { readonly data: ArrayLike<number> } } | null;
}
interface PageGlobals {
  readonly document: PageElement;
  getComputedStyle(this: void, e: PageElement): { readonly backgroundColor: string; readonly backgroundImage: string };
}

export const chromiumPath = '/usr/bin/chromium';

/**
 * Flags for this machine: headless, no sandbox (runs as root), and no background networking,
 * whose connections a closed network refuses (they would show up as errors).
 */
export const chromiumArgs = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface OpenPageOptions {
  /** Where to save the full-page screenshot (PNG); its folder is made. */
  readonly screenshot: string;
  /** Rows that count as highlighted; default `tr[data-status=short], tr[data-status=over]`. */
  readonly highlightSelector?: string;
  /** Elements whose text to return as {@link PageFindings.texts}; default none. */
  readonly textSelector?: string;
  /** How long to wait for `data-charts-ready`, ms; default 20 s. */
  readonly timeoutMs?: number;
  /** Viewport width, px; default 1280. */
  readonly width?: number;
  /** The browser; default {@link chromiumPath}. */
  readonly executablePath?: string;
}

export interface HighlightedRow {
  /** The row's `data-status`. */
  readonly status: string | null;
  /** Its text, cells joined by ` | `. */
  readonly text: string;
  /** Computed background of its first cell: `<background-color> <background-image>`. */
  readonly background: string;
}

export interface PageFindings {
  readonly title: string;
  /** `console.error` messages (and console warnings of the browser's own, e.g. CSP). */
  readonly consoleErrors: readonly string[];
  /** Uncaught exceptions. */
  readonly pageErrors: readonly string[];
  /** Requests that failed or answered ≥ 400: `URL: reason`. */
  readonly failedRequests: readonly string[];
  /** Requests to anything but the file itself and data:/blob: URLs. */
  readonly externalRequests: readonly string[];
  /** The value of `data-charts-ready` on <body>, or null when it never came. */
  readonly chartsReady: string | null;
  /** Canvases on the page. */
  readonly canvases: number;
  /** Canvases with at least one non-transparent pixel. */
  readonly chartsDrawn: number;
  readonly highlightedRows: readonly HighlightedRow[];
  /** The text of every <h2>. */
  readonly headings: readonly string[];
  /** The text of every element matching {@link OpenPageOptions.textSelector}, whitespace collapsed. */
  readonly texts: readonly string[];
}

/**
 * Opens `htmlFile`, waits for its charts, screenshots it and reports what it found.
 * @throws Error naming `bash scripts/chromium.sh install` when /usr/bin/chromium is missing
 */
export async function openInChromium(htmlFile: string, options: OpenPageOptions): Promise<PageFindings> {
  const executablePath = options.executablePath ?? chromiumPath;
  if (!existsSync(executablePath)) {
    throw new Error(`${executablePath} not found: these tests need Debian's Chromium; install it with \`bash scripts/chromium.sh install\` (from the repository root, as root or with sudo)`);
  }
  const fileUrl = pathToFileURL(htmlFile).href;
  const browser = await chromium.launch({ executablePath, args: chromiumArgs });
  try {
    const context = await browser.newContext({ viewport: { width: options.width ?? 1280, height: 900 }, deviceScaleFactor: 1 });
    const page = await context.newPage();
    const consoleErrors: string[] = [];
    const pageErrors: string[] = [];
    const failedRequests: string[] = [];
    const externalRequests: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
    page.on('pageerror', (e) => pageErrors.push(`${e.name}: ${e.message}`));
    page.on('requestfailed', (r) => failedRequests.push(`${r.url()}: ${r.failure()?.errorText ?? 'failed'}`));
    page.on('response', (r) => {
      if (r.status() >= 400) failedRequests.push(`${r.url()}: HTTP ${r.status()}`);
    });
    page.on('request', (r) => {
      const url = r.url();
      if (url !== fileUrl && !url.startsWith('data:') && !url.startsWith('blob:')) externalRequests.push(url);
    });

    await page.goto(fileUrl, { waitUntil: 'load' });
    let chartsReady: string | null = null;
    try {
      await page.waitForSelector('body[data-charts-ready]', { state: 'attached', timeout: options.timeoutMs ?? 20_000 });
      chartsReady = await page.getAttribute('body', 'data-charts-ready');
    } catch {
      // Reported as chartsReady: null; the errors collected say why.
    }

    const found = await page.evaluate(([selector, textSelector]) => {
      const { document, getComputedStyle } = globalThis as unknown as PageGlobals;
      const text = (e: PageElement) => (e.textContent ?? '').replace(/\s+/g, ' ').trim();
      const canvases = Array.from(document.querySelectorAll('canvas'));
      const drawn = canvases.filter((c) => {
        const ctx = c.getContext('2d');
        if (!ctx || c.width === 0 || c.height === 0) return false;
        const pixels = ctx.getImageData(0, 0, c.width, c.height).data;
        for (let i = 3; i < pixels.length; i += 4) if (pixels[i] !== 0) return true;
        return false;
      }).length;
      const rows = Array.from(document.querySelectorAll(selector)).map((tr) => {
        const cells = Array.from(tr.querySelectorAll('td, th'));
        const style = cells[0] ? getComputedStyle(cells[0]) : undefined;
        return {
          status: tr.getAttribute('data-status'),
          text: cells.map(text).join(' | '),
          background: style ? `${style.backgroundColor} ${style.backgroundImage}` : '',
        };
      });
      const headings = Array.from(document.querySelectorAll('h2')).map(text);
      const texts = textSelector ? Array.from(document.querySelectorAll(textSelector)).map(text) : [];
      return { canvases: canvases.length, drawn, rows, headings, texts };
    }, [options.highlightSelector ?? 'tr[data-status=short], tr[data-status=over]', options.textSelector ?? ''] as const);

    await mkdir(dirname(options.screenshot), { recursive: true });
    await page.screenshot({ path: options.screenshot, fullPage: true });
    const title = await page.title();
    await context.close();
    return {
      title,
      consoleErrors,
      pageErrors,
      failedRequests,
      externalRequests,
      chartsReady,
      canvases: found.canvases,
      chartsDrawn: found.drawn,
      highlightedRows: found.rows,
      headings: found.headings,
      texts: found.texts,
    };
  } finally {
    await browser.close();
  }
}
