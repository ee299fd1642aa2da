/**
 * Progress of a `klog load` run on stderr. On a terminal: one status line redrawn in place (a bar
 * of the log bytes read out of the bytes to read, partitions done, bytes per second), with a line
 * above it for each partition as it finishes. Elsewhere: only the per-partition lines, plain.
 * Sizes are log bytes (the partition's offsets), which the run knows up front from the offsets.
 */
import type { Writable } from 'node:stream';

/** Columns of the bar itself. */
const barColumns = 30;
/** Least ms between two redraws of the status line. */
const redrawIntervalMs = 100;

/** `1.5 MiB`, `820 B`. */
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

export class Progress {
  private readBytes = 0;
  private done = 0;
  private lastDraw = 0;
  private readonly started = Date.now();
  private readonly tty: boolean;

  constructor(
    /** Log bytes the run will read, over every partition. */
    private readonly totalBytes: number,
    /** Partitions in the run. */
    private readonly partitions: number,
    private readonly stream: Writable & { isTTY?: boolean; columns?: number } = process.stderr,
  ) {
    this.tty = stream.isTTY === true;
  }

  /** `bytes` more log bytes were read. */
  advance(bytes: number): void {
    this.readBytes += bytes;
    if (this.tty && Date.now() - this.lastDraw >= redrawIntervalMs) this.draw();
  }

  /** A partition is done: prints its line. */
  partitionDone(line: string): void {
    this.done++;
    if (this.tty) this.stream.write('\r\x1b[K');
    this.stream.write(`${line}\n`);
    if (this.tty) this.draw();
  }

  /** Clears the status line (before the summary or an error). */
  finish(): void {
    if (this.tty) this.stream.write('\r\x1b[K');
  }

  private draw(): void {
    this.lastDraw = Date.now();
    const fraction = this.totalBytes === 0 ? 1 : Math.min(1, this.readBytes / this.totalBytes);
    const filled = Math.round(fraction * barColumns);
    const seconds = (Date.now() - this.started) / 1000;
    const perSec = seconds > 0 ? this.readBytes / seconds : 0;
    let line =
      `[${'#'.repeat(filled)}${'-'.repeat(barColumns - filled)}] ${(fraction * 100).toFixed(0).padStart(3)}%  ` +
      `${formatBytes(this.readBytes)}/${formatBytes(this.totalBytes)}  ${this.done}/${this.partitions} partitions  ${formatBytes(perSec)}/s`;
    const columns = this.stream.columns ?? 80;
    if (line.length >= columns) line = line.slice(0, columns - 1);
    this.stream.write(`\r\x1b[K${line}`);
  }
}
