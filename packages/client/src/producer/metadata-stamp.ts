/**
 * Metadata stamping (docs/format.md §2a): the header each message carries with stampMetadata,
 * the record's key, its creation time and the producing host, checked before anything of a
 * send call is batched.
 */
import { maxHeaderFieldBytes, type MessageHeader } from '@klog/protocol';
import { type RecordFields, toBuffer } from './types.js';

/** The fields of a record the header is made of. */
export type StampedFields = Pick<RecordFields, 'key' | 'timestamp' | 'host'>;

/**
 * The header of each record with `stamp`, else undefined.
 * @param now the creation time of records without a timestamp, ms since the epoch
 * @param host the host written for records without one
 * @throws RangeError (naming the record's index) without `stamp` for a record with a timestamp
 *   or host; with it, for a key or host over 65535 bytes or a timestamp that is not a safe integer
 */
export function stampHeaders(records: readonly StampedFields[], stamp: boolean, host: string, now: number): MessageHeader[] | undefined {
  if (!stamp) {
    const i = records.findIndex((r) => r.timestamp !== undefined || r.host !== undefined);
    if (i >= 0) throw new RangeError(`record ${i}: a timestamp or host is stored only with stampMetadata`);
    return undefined;
  }
  return records.map((r, i) => {
    const key = r.key === undefined ? undefined : toBuffer(r.key);
    if (key !== undefined && key.length > maxHeaderFieldBytes) throw new RangeError(`record ${i}: key of ${key.length} bytes is over ${maxHeaderFieldBytes}`);
    const timestamp = r.timestamp ?? now;
    if (!Number.isSafeInteger(timestamp)) throw new RangeError(`record ${i}: timestamp ${timestamp} must be an integer (ms since the epoch)`);
    const recordHost = r.host ?? host;
    if (r.host !== undefined && Buffer.byteLength(recordHost, 'utf8') > maxHeaderFieldBytes) throw new RangeError(`record ${i}: host of over ${maxHeaderFieldBytes} bytes`);
    return key === undefined ? { timestamp, host: recordHost } : { key, timestamp, host: recordHost };
  });
}

/** Checks the producer's own host name. @throws RangeError when it is over 65535 bytes of UTF-8 */
export function checkMetadataHost(host: string): void {
  const bytes = Buffer.byteLength(host, 'utf8');
  if (bytes > maxHeaderFieldBytes) throw new RangeError(`metadataHost of ${bytes} bytes is over ${maxHeaderFieldBytes}`);
}
