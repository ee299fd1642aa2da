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

/**
 * {@link readLineGroups} that can be stopped: once `signal` aborts, the input is destroyed and
 * the iteration ends at once, even while the input has nothing new (a terminal, `tail -f`).
 * The lines of chunks already read are yielded first; a last line without its `\n` is dropped
 * then (it was not finished).
 */
export async function* readLineGroupsUntil(stream: Readable, signal: AbortSignal): AsyncGenerator<Buffer[], void, undefined> {
  if (signal.aborted) return;
  const groups = readLineGroups(stream);
  let onAbort!: () => void;
  const aborted = new Promise<'aborted'>((resolve) => {
    onAbort = () => resolve('aborted');
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    for (;;) {
      const next = groups.next();
      const got = await Promise.race([next, aborted]);
      if (got === 'aborted') {
        next.catch(() => {}); // the destroyed input ends or fails it; nothing waits for it now
        return;
      }
      if (got.done) return;
      yield got.value;
      if (signal.aborted) return;
    }
  } finally {
    signal.removeEventListener('abort', onAbort);
    if (signal.aborted) stream.destroy();
  }
}
