/**
 * `klog dump-log`: decodes segment files straight from disk (docs/design.md §1, §2), as Kafka's
 * DumpLogSegments: checks every message's length, magic byte and CRC, decodes its metadata
 * header (key, creation time, host; docs/format.md §2a), and prints one line per message (or a
 * summary per file). With `--deep` it also opens each gzip set (docs/format.md §2b) and prints
 * the messages inside, as `--deep-iteration` does. Exits non-zero when any message is corrupt or
 * a file ends in a partial message, saying where. The bytes are read by the protocol's message-set
 * iterator, a chunk of the file at a time.
 */
import { open, readdir, stat, type FileHandle } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Command } from 'commander';
import { MessageSetIterator } from '@klog/protocol';
import { intParser } from '../options.js';
import { OutputWriter, printLine } from '../output.js';

interface DumpLogOptions {
  summary?: boolean;
  printPayloads?: boolean;
  deep?: boolean;
  maxDecompressedBytes: number;
}

/** Segment file names: the 20-digit byte offset of their first message, then `.kafka`. */
const segmentNamePattern = /^(\d{20})\.kafka$/;
/** Bytes read from a segment file at a time (grown for a larger message). */
const readChunkBytes = 1024 * 1024;
const codecNames = ['none', 'gzip', 'snappy', 'unknown(3)'];
/** Default most bytes one compressed set may decompress to with `--deep`. */
const defaultMaxDecompressedBytes = 256 * 1024 * 1024;

/** Adds `klog dump-log` to `program`. */
export function registerDumpLog(program: Command): void {
  program
    .command('dump-log')
    .description('decode segment files (or every segment of partition directories), check every CRC, print each message with its key, time and host')
    .argument('<paths...>', 'segment files (<20-digit offset>.kafka) or partition directories')
    .option('--summary', 'print one line per file instead of one per message')
    .option('--print-payloads', 'print each value (as UTF-8, metadata header split off) after its message line')
    .option('--deep', 'also decompress each gzip set and print the messages inside it (as DumpLogSegments --deep-iteration)')
    .option(
      '--max-decompressed-bytes <bytes>',
      'with --deep, most bytes one compressed set may decompress to; a larger one is reported, not opened',
      intParser(1, Number.MAX_SAFE_INTEGER, true),
      defaultMaxDecompressedBytes,
    )
    .addHelpText(
      'after',
      `
Exits 1 when a message is corrupt or a file ends in a partial message.

Examples:
  klog dump-log /tmp/klog-logs/greetings-0
  klog dump-log --print-payloads /tmp/klog-logs/greetings-0/00000000000000000000.kafka
  klog dump-log --summary /tmp/klog-logs/*-0
  klog dump-log --deep /tmp/klog-logs/compressed-0`,
    )
    .action(async (paths: string[], opts: DumpLogOptions) => {
      const files: string[] = [];
      for (const p of paths) files.push(...(await segmentFiles(p)));
      const out = new OutputWriter();
      let problems = 0;
      for (const file of files) problems += await dumpSegment(file, opts, out);
      await out.flush();
      if (problems > 0) {
        process.exitCode = 1;
        printLine(`klog dump-log: ${problems} problem${problems === 1 ? '' : 's'} found`);
      }
    });
}

/** The segment files named by `path`: the file itself, or a directory's segment files in offset order. */
async function segmentFiles(path: string): Promise<string[]> {
  const s = await stat(path);
  if (!s.isDirectory()) return [path];
  const names = (await readdir(path)).filter((n) => segmentNamePattern.test(n)).sort();
  if (names.length === 0) throw new Error(`${path}: no segment files (<20-digit offset>.kafka) in this directory`);
  return names.map((n) => join(path, n));
}

/** Counts of one segment's dump. */
interface DumpCounts {
  messages: number;
  inner: number;
  problems: number;
}

/** Dumps one segment; returns the number of problems found. */
async function dumpSegment(file: string, opts: DumpLogOptions, out: OutputWriter): Promise<number> {
  const m = segmentNamePattern.exec(basename(file));
  if (!m) {
    printLine(`klog dump-log: ${file}: not a segment file name (<20-digit offset>.kafka), so its base offset is unknown`);
    return 1;
  }
  const baseOffset = Number(m[1]);
  const fh = await open(file, 'r');
  try {
    const size = (await fh.stat()).size;
    const counts: DumpCounts = { messages: 0, inner: 0, problems: 0 };
    const report = (what: string, pos: number): void => {
      counts.problems++;
      printLine(`klog dump-log: ${file}: ${what} at offset ${baseOffset + pos} (file position ${pos})`);
    };
    if (!opts.summary) await out.write(Buffer.from(`dumping ${file} (base offset ${baseOffset}, ${size} bytes)\n`));
    let pos = 0;
    let buf = Buffer.allocUnsafe(Math.min(readChunkBytes, Math.max(size, 1)));
    while (pos < size) {
      const n = await readAt(fh, buf, pos, Math.min(buf.length, size - pos));
      const it = new MessageSetIterator(buf, { baseOffset: baseOffset + pos, end: n, badCrc: 'yield' });
      while (it.advance()) {
        await dumpMessage(it, opts, out, counts, (what) => report(what, it.offset - baseOffset));
        counts.messages++;
      }
      pos += it.validBytes;
      const stop = it.stop;
      if (stop === undefined) continue;
      if (stop.kind === 'partial') {
        const needed = stop.size ?? 4;
        // The message runs past this chunk but not past the file: read again from it, with room for it.
        if (pos + needed <= size) {
          if (needed > buf.length) buf = Buffer.allocUnsafe(needed);
          continue;
        }
        report(`trailing partial message: ${stop.reason}`, pos);
      } else {
        report(`corrupt message: ${stop.reason}`, pos);
      }
      break;
    }
    if (opts.summary) {
      const inner = opts.deep ? ` (${counts.inner} inside compressed sets)` : '';
      await out.write(
        Buffer.from(
          `${file}: base offset ${baseOffset}, ${counts.messages} messages${inner}, ${pos} of ${size} bytes read, ` +
            `next offset ${baseOffset + pos}, ${counts.problems === 0 ? 'ok' : `${counts.problems} problem${counts.problems === 1 ? '' : 's'}`}\n`,
        ),
      );
    }
    return counts.problems;
  } finally {
    await fh.close();
  }
}

/** Reads `n` bytes of the file at `pos` into `buf`. @throws Error on a short read */
async function readAt(fh: FileHandle, buf: Buffer, pos: number, n: number): Promise<number> {
  const { bytesRead } = await fh.read(buf, 0, n, pos);
  if (bytesRead < n) throw new Error(`short read at position ${pos}: ${bytesRead} of ${n} bytes`);
  return n;
}

/** Prints the current message of `it` (and, with --deep, the messages of a compressed set). */
async function dumpMessage(it: MessageSetIterator, opts: DumpLogOptions, out: OutputWriter, counts: DumpCounts, report: (what: string) => void): Promise<void> {
  const valid = it.crcValid;
  // A bad CRC with a sane length and magic: report it and go on, the next message is where the length says.
  if (!valid) report(`corrupt message: CRC mismatch (stored ${it.crc}, computed ${it.computedCrc()})`);
  const compressed = it.codec !== 0;
  const line = messageLine(it, valid, '', report);
  if (!opts.summary) {
    await out.write(Buffer.from(`${line.text}\n`));
    if (opts.printPayloads && line.value !== undefined) {
      if (compressed) await out.write(Buffer.from(`payload: (${line.value.length} compressed bytes; --deep prints the messages inside)\n`));
      else await out.write(Buffer.concat([Buffer.from('payload: '), line.value, Buffer.from('\n')]));
    }
  }
  if (!opts.deep || !compressed || !valid) return;
  let inner: MessageSetIterator | undefined;
  try {
    inner = await it.openWrapper(opts.maxDecompressedBytes);
  } catch (e) {
    report(`corrupt compressed set: ${(e as Error).message}`);
    return;
  }
  if (inner === undefined) {
    report(`compressed set decompresses to more than ${opts.maxDecompressedBytes} bytes (--max-decompressed-bytes), not opened`);
    return;
  }
  while (inner.advance()) {
    counts.inner++;
    const l = messageLine(inner, true, '| ', report);
    if (opts.summary) continue;
    await out.write(Buffer.from(`${l.text}\n`));
    if (opts.printPayloads && l.value !== undefined) await out.write(Buffer.concat([Buffer.from('| payload: '), l.value, Buffer.from('\n')]));
  }
  if (inner.stop !== undefined) report(`corrupt compressed set: ${inner.stop.reason}`);
}

/**
 * One message's line: `offset: … size: … payloadsize: … magic: … codec: … crc: … valid: …`, then
 * for a message with a metadata header `keysize`, `key`, `timestamp` (ISO 8601, UTC) and `host`,
 * each when present; an inner message's line starts with `| ` and names its position in the set.
 * @returns the line and the value (undefined for a header that does not decode, which is reported)
 */
function messageLine(it: MessageSetIterator, valid: boolean, prefix: string, report: (what: string) => void): { text: string; value: Buffer | undefined } {
  const where = prefix === '' ? `offset: ${it.offset}` : `${prefix}offset: ${it.offset} position: ${it.position}`;
  let text =
    `${where} size: ${it.size} payloadsize: ${it.payload().length} magic: ${it.magic} ` +
    `codec: ${codecNames[it.codec]} crc: ${it.crc} valid: ${valid}` +
    (valid ? '' : ` (computed crc ${it.computedCrc()})`);
  if (!it.hasHeader) return { text, value: it.payload() };
  try {
    const { header, value } = it.header();
    if (header?.key !== undefined) text += ` keysize: ${header.key.length} key: ${printable(header.key)}`;
    if (header?.timestamp !== undefined) text += ` timestamp: ${isoTime(header.timestamp)}`;
    if (header?.host !== undefined) text += ` host: ${header.host}`;
    return { text: `${text} valuesize: ${value.length}`, value };
  } catch (e) {
    report(`corrupt metadata header: ${(e as Error).message}`);
    return { text: `${text} header: invalid`, value: undefined };
  }
}

/** A key as text: its UTF-8 when it is printable text, else `0x` and its bytes in hex. */
function printable(key: Buffer): string {
  const text = key.toString('utf8');
  // eslint-disable-next-line no-control-regex
  return Buffer.from(text, 'utf8').equals(key) && !/[\u0000-\u001f\u007f\s]/.test(text) ? text : `0x${key.toString('hex')}`;
}

/** A creation time as ISO 8601 (UTC), or the raw number when it is out of Date's range. */
function isoTime(ms: number): string {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? String(ms) : d.toISOString();
}
