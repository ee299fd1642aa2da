/** Buffered writing to stdout that waits for the pipe to drain, so a slow reader slows the command rather than filling memory. */
import { once } from 'node:events';
import type { Writable } from 'node:stream';
import type { ConsumedMessage } from '@klog/client';

/** Bytes collected before they are written. */
const chunkBytes = 64 * 1024;

/** Collects buffers and writes them in chunks of about 64 KiB. */
export class OutputWriter {
  private chunks: Buffer[] = [];
  private bytes = 0;

  constructor(private readonly stream: Writable = process.stdout) {}

  /** Queues `b`; writes (and waits for drain) once 64 KiB are queued. */
  async write(b: Buffer): Promise<void> {
    this.chunks.push(b);
    this.bytes += b.length;
    if (this.bytes >= chunkBytes) await this.flush();
  }

  /** Writes everything queued and waits for the stream to accept more. */
  async flush(): Promise<void> {
    if (this.bytes === 0) return;
    const data = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.bytes);
    this.chunks = [];
    this.bytes = 0;
    if (!this.stream.write(data)) await once(this.stream, 'drain');
  }
}

/** Prints one line on stderr. */
export function printLine(line: string): void {
  process.stderr.write(`${line}\n`);
}

const tabBytes = Buffer.from('\t');

/**
 * What goes before a message's payload on its line, per `--print-metadata` (creation time and
 * host, `-` for none, each with a tab) and `--print-key` (the key, empty for none, and a tab).
 */
export function linePrefix(m: Pick<ConsumedMessage, 'key' | 'timestamp' | 'host'>, opts: { printMetadata?: boolean; printKey?: boolean }): Buffer[] {
  const parts: Buffer[] = [];
  if (opts.printMetadata) {
    const time = m.timestamp === undefined || Number.isNaN(new Date(m.timestamp).getTime()) ? '-' : new Date(m.timestamp).toISOString();
    parts.push(Buffer.from(`${time}\t${m.host ?? '-'}\t`));
  }
  if (opts.printKey) {
    if (m.key) parts.push(m.key);
    parts.push(tabBytes);
  }
  return parts;
}
