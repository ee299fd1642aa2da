/**
 * Progress of a `klog load` run on stderr, drawn with the shared display of ../progress.ts. On a
 * terminal: one status line redrawn in place (a bar of the log bytes read out of the bytes to
 * read, partitions done, bytes per second over the last second), with a line above it for each
 * partition as it finishes. Elsewhere: only the per-partition lines, plain. Sizes are log bytes
 * (the partition's offsets), which the run knows up front from the offsets.
 */
import { createProgress, formatBytes, type Progress as Display, type ProgressStream, RecentRate } from '../progress.js';

export { formatBytes } from '../progress.js';

/** The progress of one load run: log bytes read and partitions done. */
export class Progress {
  private readBytes = 0;
  private done = 0;
  private readonly display: Display;

  /**
   * @param totalBytes log bytes the run will read, over every partition (≥ 0)
   * @param partitions partitions in the run
   * @param stream where to draw (default stderr); a bar only when it is a terminal
   */
  constructor(totalBytes: number, partitions: number, stream: ProgressStream = process.stderr) {
    const recent = new RecentRate();
    this.display = createProgress({
      total: totalBytes,
      stream,
      status: () => {
        const perSec = recent.sample(0, this.readBytes).mbPerSec * 2 ** 20;
        return `${formatBytes(this.readBytes)}/${formatBytes(totalBytes)}  ${this.done}/${partitions} partitions  ${formatBytes(Math.round(perSec))}/s`;
      },
    });
  }

  /** `bytes` more log bytes were read. */
  advance(bytes: number): void {
    this.readBytes += bytes;
    this.display.update(this.readBytes);
  }

  /** A partition is done: prints its line (above the bar on a terminal). */
  partitionDone(line: string): void {
    this.done++;
    this.display.log(line);
  }

  /** Clears the status line (before the summary or an error). Idempotent. */
  finish(): void {
    this.display.stop();
  }
}
