/**
 * One data file of a run: the messages of one partition, newline-delimited, optionally gzipped.
 *
 * - `json` (`.jsonl`): one object per message,
 *   `{"topic":"…","brokerId":0,"partition":1,"offset":1234,"payload":"<base64>"}` (`brokerId` −1
 *   for a replicated topic's partition, docs/replication.md §14). The payload is
 *   base64 so that any bytes survive exactly. A message that carries metadata (docs/format.md) adds
 *   `"key"` (base64), `"timestamp"` (ms since the epoch) and `"host"`, each only when present.
 *   The messages of a gzip wrapper are written one by one, each with the wrapper's offset.
 * - `raw` (`.raw`): each payload followed by `\n`. A payload that holds a `\n` byte cannot be
 *   written unambiguously: the run fails, naming the message, rather than write a file that
 *   reads back as different messages. Use `json` for such topics.
 *
 * `close` ends the file and fsyncs it.
 */
import { once } from 'node:events';
import { createWriteStream, type WriteStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { finished } from 'node:stream/promises';
import type { Writable } from 'node:stream';
import { createGzip } from 'node:zlib';
import { KlogError } from '@klog/client';
import { fsyncPath } from './layout.js';

export type LoadFormat = 'json' | 'raw';

/**
 * The file name of a partition's data, `<name>.jsonl[.gz]` or `<name>.raw[.gz]`, where `name` is
 * the partition's name: `<brokerId>-<partition>`, or `<partition>` for a replicated topic's
 * (docs/replication.md §14).
 */
export function dataFileName(name: string, format: LoadFormat, gzip: boolean): string {
  return `${name}.${format === 'json' ? 'jsonl' : 'raw'}${gzip ? '.gz' : ''}`;
}

/** One message as the loader writes it. */
export interface LoadedMessage {
  readonly offset: number;
  readonly payload: Buffer;
  readonly key?: Buffer;
  readonly timestamp?: number;
  readonly host?: string;
}

const newline = 0x0a;

/** Writes the messages of one partition to one file. */
export class PartitionFile {
  private readonly file: WriteStream;
  /** Settles when the file stream ends or fails; made once, so that waits for drain do not add a listener each. */
  private fileEnded: Promise<void> | undefined;
  private readonly sink: Writable;
  /** Bytes handed to the file (before gzip). */
  bytes = 0;
  /** Size of the file on disk once closed (after gzip). */
  fileBytes = 0;

  constructor(
    readonly path: string,
    /** The partition: `brokerId` −1 for a replicated topic's (docs/replication.md §14). */
    private readonly where: { readonly topic: string; readonly brokerId: number; readonly partition: number },
    private readonly format: LoadFormat,
    gzip: boolean,
  ) {
    this.file = createWriteStream(path, { flags: 'wx' });
    if (gzip) {
      const gz = createGzip();
      gz.pipe(this.file);
      gz.on('error', (e) => this.file.destroy(e));
      this.sink = gz;
    } else {
      this.sink = this.file;
    }
  }

  /**
   * Appends a batch of messages (one write per batch), waiting when the file is behind.
   * @throws KlogError in raw format for a payload that holds a newline
   */
  async write(messages: readonly LoadedMessage[]): Promise<void> {
    const chunk = this.format === 'json' ? this.jsonLines(messages) : this.rawLines(messages);
    this.bytes += chunk.length;
    if (!this.sink.write(chunk)) {
      this.fileEnded ??= finished(this.file);
      this.fileEnded.catch(() => {}); // its failure is the file's: close() reports it
      await Promise.race([once(this.sink, 'drain'), this.fileEnded]);
    }
  }

  private jsonLines(messages: readonly LoadedMessage[]): Buffer {
    const { topic, brokerId, partition } = this.where;
    let text = '';
    for (const m of messages) {
      const line: Record<string, unknown> = { topic, brokerId, partition, offset: m.offset, payload: m.payload.toString('base64') };
      if (m.key !== undefined) line['key'] = m.key.toString('base64');
      if (m.timestamp !== undefined) line['timestamp'] = m.timestamp;
      if (m.host !== undefined) line['host'] = m.host;
      text += `${JSON.stringify(line)}\n`;
    }
    return Buffer.from(text);
  }

  private rawLines(messages: readonly LoadedMessage[]): Buffer {
    const parts: Buffer[] = [];
    const nl = Buffer.from('\n');
    for (const m of messages) {
      if (m.payload.includes(newline)) {
        const { topic, brokerId, partition } = this.where;
        const name = brokerId < 0 ? String(partition) : `${brokerId}-${partition}`;
        throw new KlogError(
          `--format raw: the message at offset ${m.offset} of topic ${topic} partition ${name} holds a newline byte, ` +
            'which raw output cannot represent; use --format json',
        );
      }
      parts.push(m.payload, nl);
    }
    return Buffer.concat(parts);
  }

  /** Ends the file and fsyncs it. */
  async close(): Promise<void> {
    this.sink.end();
    await finished(this.file);
    await fsyncPath(this.path);
    this.fileBytes = (await stat(this.path)).size;
  }

  /** Stops writing (after a failure elsewhere); the file is left as it is. */
  async abort(): Promise<void> {
    this.sink.destroy();
    this.file.destroy();
    await finished(this.file).catch(() => {});
  }
}
