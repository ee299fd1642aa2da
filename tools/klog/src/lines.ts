/** Splits a byte stream into lines (on `\n`, which is dropped; anything else, `\r` included, is kept). */
import type { Readable } from 'node:stream';

/**
 * Yields the lines of `stream` as buffers, in groups (one group per chunk read), without
 * decoding them. A last line without a trailing `\n` is yielded too; an empty stream yields nothing.
 */
export async function* readLineGroups(stream: Readable): AsyncGenerator<Buffer[], void, undefined> {
  let carry: Buffer | undefined;
  for await (const chunk of stream as AsyncIterable<Buffer | string>) {
    const buf: Buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    const lines: Buffer[] = [];
    let start = 0;
    let nl = buf.indexOf(10, start);
    while (nl !== -1) {
      const piece = buf.subarray(start, nl);
      lines.push(carry ? Buffer.concat([carry, piece]) : piece);
      carry = undefined;
      start = nl + 1;
      nl = buf.indexOf(10, start);
    }
    if (start < buf.length) carry = carry ? Buffer.concat([carry, buf.subarray(start)]) : buf.subarray(start);
    if (lines.length > 0) yield lines;
  }
  if (carry && carry.length > 0) yield [carry];
}
