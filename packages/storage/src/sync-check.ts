/**
 * The check behind "every visible message was fdatasynced first" (docs/design.md §10): compares a
 * log's visible end with what the flusher recorded as synced for each segment file.
 */
import * as path from 'node:path';
import { syncedFileBytes } from './flusher.js';
import type { Log } from './log.js';
import { segmentFileName } from './segment.js';

/**
 * Bytes of `[earliestOffset, visibleEnd)` of `log` that no completed fdatasync through the
 * flusher covers: 0 when everything a consumer can read was on disk first. Segments the log
 * listed in `opened` count as synced. Needs the native flusher (`flusherKind === 'native'`); on
 * the libuv fallback every byte counts as unsynced.
 * @param opened segment start offsets present when the log was opened, taken as synced
 */
export function visibleUnsyncedBytes(log: Log, opened: ReadonlySet<number> = new Set()): number {
  const starts = log.segmentStarts();
  const end = log.visibleEnd;
  let unsynced = 0;
  for (let i = 0; i < starts.length && starts[i]! < end; i++) {
    const start = starts[i]!;
    const need = Math.min(end, starts[i + 1] ?? end) - start;
    if (need <= 0 || opened.has(start)) continue;
    let synced: number;
    try {
      synced = syncedFileBytes(path.join(log.dir, segmentFileName(start)));
    } catch {
      continue; // deleted by retention meanwhile: nothing of it is readable any more
    }
    if (synced < need) unsynced += need - Math.max(synced, 0);
  }
  return unsynced;
}
