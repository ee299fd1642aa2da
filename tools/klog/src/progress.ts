/**
 * Live progress on a terminal: the one way the `klog` commands draw progress (`perf produce`,
 * `perf consume`, `load`), on the cli-progress library.
 *
 * A progress display is one status line redrawn in place (about 10 times a second) on its stream,
 * by default stderr, and only when that stream is a terminal (`isTTY`): piped or redirected
 * output, and commands asked for machine-readable output (`enabled: false`, e.g. `--json`), get
 * no bar and no control characters. Lines logged through the display are printed above the bar
 * on a terminal and as plain lines elsewhere. `stop()` clears the bar, so that whatever the
 * command prints next (its summary, or an error) starts on a clean line.
 */
import cliProgress from 'cli-progress';
import type { Rate } from './rate.js';

/** A stream to draw on: stderr, or a stand-in in tests. */
export type ProgressStream = NodeJS.WritableStream & { isTTY?: boolean; columns?: number };

/** What the status callback sees at each redraw. */
export interface ProgressView {
  /** The current value, in the caller's units (messages, bytes, ...). */
  readonly value: number;
  /** The value at which the bar is full; undefined when the display has no bar. */
  readonly total: number | undefined;
  /** Seconds since the display was created. */
  readonly seconds: number;
}

/** Options of {@link createProgress}. */
export interface ProgressOptions {
  /**
   * The value at which the bar is full, in the caller's units (a non-negative number; 0 draws an
   * empty bar). Undefined: no bar and no percentage, only the status text.
   */
  readonly total?: number;
  /**
   * The text drawn after the bar, built at each redraw: one string, or fields in order of
   * importance. Called only while the bar is drawn; it should be cheap and must not throw. The
   * line is made to fit the terminal's width: the last fields go first, then the bar; a single
   * string too long for the terminal is cut.
   */
  readonly status: (view: ProgressView) => string | readonly string[];
  /** Where to draw and log. Default: process.stderr. */
  readonly stream?: ProgressStream;
  /**
   * False: never draw a bar, whatever the stream (for `--json` and similar); `log` still prints
   * plain lines. Default: true.
   */
  readonly enabled?: boolean;
}

/** A progress display made by {@link createProgress}. Every method is cheap enough to call per batch. */
export interface Progress {
  /** True when a bar is being drawn (the stream is a terminal, the display is enabled and not stopped). */
  readonly drawing: boolean;
  /** Sets the current value (in the units of `total`). */
  update(value: number): void;
  /** Adds `delta` to the current value. */
  increment(delta: number): void;
  /** Changes the value at which the bar is full (e.g. when the end moved). */
  setTotal(total: number): void;
  /** Prints `line` (no trailing newline needed): above the bar while drawing, as a plain line otherwise. */
  log(line: string): void;
  /** Clears the bar and stops redrawing; later calls of update and increment are ignored. Idempotent. */
  stop(): void;
}

/** Columns of the bar itself. */
const barColumns = 25;
/** Redraws per second. */
const fps = 10;

/**
 * A progress display on `options.stream` (default stderr): a live bar when that stream is a
 * terminal and `options.enabled` is not false, otherwise one that draws nothing and only prints
 * logged lines. Always call `stop()` when done (also on failure): a live bar holds a timer that
 * keeps the process alive.
 */
export function createProgress(options: ProgressOptions): Progress {
  const stream = options.stream ?? process.stderr;
  if (options.enabled === false || stream.isTTY !== true) return new PlainProgress(stream);
  return new LiveProgress(stream, options);
}

/** No bar: logged lines are printed as they come. */
class PlainProgress implements Progress {
  readonly drawing = false;
  constructor(private readonly stream: ProgressStream) {}
  update(): void {}
  increment(): void {}
  setTotal(): void {}
  log(line: string): void {
    this.stream.write(`${line}\n`);
  }
  stop(): void {}
}

/** A bar redrawn in place by cli-progress, with logged lines printed above it. */
class LiveProgress implements Progress {
  private readonly multi: cliProgress.MultiBar;
  private readonly bar: cliProgress.SingleBar;
  private readonly stream: ProgressStream;
  private readonly started = performance.now();
  private readonly hasBar: boolean;
  private lastDraw = 0;
  private value = 0;
  private stopped = false;

  constructor(stream: ProgressStream, options: ProgressOptions) {
    this.stream = stream;
    this.hasBar = options.total !== undefined;
    const status = options.status;
    this.multi = new cliProgress.MultiBar({
      stream,
      fps,
      barsize: barColumns,
      barCompleteChar: '#',
      barIncompleteChar: '-',
      // Cut the line to the terminal's width rather than turning the terminal's wrapping off.
      linewrap: true,
      // Redraw even when nothing changed, so that a line logged above the bar never leaves it blank.
      forceRedraw: true,
      clearOnComplete: true,
      emptyOnZero: true,
      hideCursor: false,
      // The commands handle SIGINT and SIGTERM themselves; the library must not install handlers.
      gracefulExit: false,
      format: (opts, params) => {
        const text = status({ value: params.value, total: this.hasBar ? params.total : undefined, seconds: (performance.now() - this.started) / 1000 });
        const bar = this.hasBar ? `[${cliProgress.Format.BarFormat(params.progress, opts)}] ${`${Math.floor(params.progress * 100)}%`.padStart(4)}  ` : '';
        return fitLine(bar, typeof text === 'string' ? [text] : text, (stream.columns ?? 80) - 1);
      },
    });
    this.bar = this.multi.create(options.total ?? 0, 0);
    // The first frame now, not one tick later: a short run shows its bar too.
    this.redraw();
  }

  get drawing(): boolean {
    return !this.stopped;
  }

  update(value: number): void {
    if (this.stopped) return;
    this.value = value;
    this.bar.update(value);
    this.redrawIfDue();
  }

  increment(delta: number): void {
    this.update(this.value + delta);
  }

  setTotal(total: number): void {
    if (this.stopped) return;
    this.bar.setTotal(total);
  }

  log(line: string): void {
    if (this.stopped) {
      this.stream.write(`${line}\n`);
      return;
    }
    this.multi.log(`${line}\n`);
    this.redraw();
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    // Lines logged are drawn at once (see log), so nothing is left to print before the bar goes.
    this.multi.stop();
  }

  /** Draws now when the event loop is too busy for the library's timer to have done it lately. */
  private redrawIfDue(): void {
    if (performance.now() - this.lastDraw >= 2000 / fps) this.redraw();
  }

  private redraw(): void {
    this.lastDraw = performance.now();
    this.multi.update();
  }
}

/**
 * `bar` then as many of `fields` (joined by two spaces) as fit in `width` characters: the last
 * fields are left out first, then the bar; the first field alone is cut to the width.
 */
export function fitLine(bar: string, fields: readonly string[], width: number): string {
  for (const prefix of bar === '' ? [''] : [bar, '']) {
    for (let n = fields.length; n >= 1; n--) {
      const line = prefix + fields.slice(0, n).join('  ');
      if (line.length <= width) return line;
    }
  }
  return (fields[0] ?? bar).slice(0, Math.max(0, width));
}

/**
 * Throughput over the last `windowMs` (default 1000) ms, for a live display: each call to
 * `sample` records the running totals and returns the rate since the oldest sample still inside
 * the window (since creation until the window has passed once).
 */
export class RecentRate {
  private readonly times: number[];
  private readonly messages: number[];
  private readonly bytes: number[];

  /** @param windowMs length of the window in ms (> 0); @param nowMs the start time (performance.now() clock) */
  constructor(
    private readonly windowMs = 1000,
    nowMs = performance.now(),
  ) {
    this.times = [nowMs];
    this.messages = [0];
    this.bytes = [0];
  }

  /**
   * Records the running totals (messages and bytes since the start) at `nowMs` and returns
   * messages and MB (2^20 bytes) per second over the window; 0 when no time passed.
   */
  sample(messages: number, bytes: number, nowMs = performance.now()): Rate {
    // Keep one sample at or before the start of the window as the base.
    while (this.times.length > 1 && this.times[1]! <= nowMs - this.windowMs) {
      this.times.shift();
      this.messages.shift();
      this.bytes.shift();
    }
    const seconds = (nowMs - this.times[0]!) / 1000;
    const r: Rate =
      seconds > 0
        ? { msgsPerSec: (messages - this.messages[0]!) / seconds, mbPerSec: (bytes - this.bytes[0]!) / 2 ** 20 / seconds }
        : { msgsPerSec: 0, mbPerSec: 0 };
    this.times.push(nowMs);
    this.messages.push(messages);
    this.bytes.push(bytes);
    return r;
  }
}

/** `1.5 MiB`, `820 B`: `n` bytes in binary units, one decimal from KiB up. */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${n} B` : `${v.toFixed(1)} ${units[u]}`;
}

/** `1,234,567`: `n` rounded to an integer, with thousands separators. */
export function formatCount(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}
