/**
 * The sorted segments of one partition (docs/design.md §2), as a copy-on-write array like Kafka 0.7's
 * `SegmentList`: a roll or a retention delete builds a new array and swaps the reference, so a
 * reader that took `view` once keeps a consistent list for the whole of its read.
 */
import type { Segment } from './segment.js';

/** Copy-on-write list of segments sorted by start offset; never empty once a log is open. */
export class SegmentList {
  #view: readonly Segment[];

  constructor(segments: readonly Segment[]) {
    this.#view = Object.freeze([...segments]);
  }

  /** The current immutable array; take it once per operation. */
  get view(): readonly Segment[] {
    return this.#view;
  }

  /** Adds `segment` at the end (a roll). */
  append(segment: Segment): void {
    this.#view = Object.freeze([...this.#view, segment]);
  }

  /**
   * Removes the first `count` segments (retention) and returns them.
   * @throws RangeError when `count` would leave no segment.
   */
  dropFront(count: number): Segment[] {
    if (count >= this.#view.length) throw new RangeError(`cannot drop ${count} of ${this.#view.length} segments: a log keeps one`);
    const dropped = this.#view.slice(0, count);
    this.#view = Object.freeze(this.#view.slice(count));
    return dropped;
  }

  /**
   * Removes every segment after the first `keep` (a follower's truncation, docs/replication.md
   * §8.3) and returns them, oldest first.
   * @throws RangeError when `keep` would leave no segment
   */
  dropBack(keep: number): Segment[] {
    if (keep < 1) throw new RangeError(`cannot keep ${keep} segments: a log keeps one`);
    const dropped = this.#view.slice(keep);
    this.#view = Object.freeze(this.#view.slice(0, keep));
    return dropped;
  }

  /** Replaces every segment by `segment` (a follower starting over, `truncateFullyAndStartAt`) and returns the old ones. */
  replaceAll(segment: Segment): Segment[] {
    const dropped = [...this.#view];
    this.#view = Object.freeze([segment]);
    return dropped;
  }
}

/**
 * Binary search: the index of the last segment of `view` whose `start <= offset`, or −1 when
 * `offset` is before the first segment. With empty segments sharing a start, the last wins.
 */
export function findSegmentIndex(view: readonly Pick<Segment, 'start'>[], offset: number): number {
  let lo = 0;
  let hi = view.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    if (view[mid]!.start <= offset) {
      found = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return found;
}
