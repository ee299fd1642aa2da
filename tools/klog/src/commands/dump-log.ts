/**
 * `klog dump-log`: decodes segment files straight from disk (SPEC §1, §2), checks every
 * message's length, magic byte and CRC, and prints one line per message (or a summary per
 * file). Exits non-zero when any message is corrupt or a file ends in a partial message,
 * saying where.
 */
import { open, readdir, stat } from 'node:fs/promises';
import { basename, join } from 'node:path';
import type { Command } from 'commander';
import { compressionCodecMask, crc32Ieee, currentMagic, lengthFieldBytes, messageHeaderBytes, messageOverheadBytes } from '@klog/protocol';
import { OutputWriter, printLine } from '../output.js';

interface DumpLogOptions {
  summary?: boolean;
  printPayloads?: boolean;
}

/** Segment file names: the 20-digit byte offset of their first message, then `.kafka`. */
const segmentNamePattern = /^(\d{20})\.kafka$/;
/** Bytes read from a segment file at a time (grown for a larger message). */
const readChunkBytes = 1024 * 1024;
const codecNames = ['none', 'gzip', 'snappy', 'unknown(3)'];

/** Adds `klog dump-log` to `program`. */
export function registerDumpLog(program: Command): void {
  program
    .command('dump-log')
    .description('decode segment files (or every segment of partition directories), check every CRC, print each message')
    .argument('<paths...>', 'segment files (<20-digit offset>.kafka) or partition directories')
    .option('--summary', 'print one line per file instead of one per message')
    .option('--print-payloads', 'print each payload (as UTF-8) after its message line')
    .addHelpText(
      'after',
      `
Exits 1 when a message is corrupt or a file ends in a partial message.

Examples:
  klog dump-log /tmp/klog-logs/greetings-0
  klog dump-log --print-payloads /tmp/klog-logs/greetings-0/00000000000000000000.kafka
  klog dump-log --summary /tmp/klog-logs/*-0`,
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

/** A window on a file, read on demand. */
class FileWindow {
  buf = Buffer.allocUnsafe(readChunkBytes);
  /** File position of buf[0]. */
  base = 0;
  /** Bytes of buf holding file data. */
  filled = 0;

  constructor(private readonly fh: import('node:fs/promises').FileHandle) {}

  /** Makes bytes [pos, pos + n) of the file available in buf (the caller knows they exist); returns their index in buf. */
  async load(pos: number, n: number): Promise<number> {
    if (pos >= this.base && pos + n <= this.base + this.filled) return pos - this.base;
    if (this.buf.length < n) this.buf = Buffer.allocUnsafe(Math.max(n, this.buf.length * 2));
    const { bytesRead } = await this.fh.read(this.buf, 0, this.buf.length, pos);
    this.base = pos;
    this.filled = bytesRead;
    if (bytesRead < n) throw new Error(`short read at position ${pos}: ${bytesRead} of ${n} bytes`);
    return 0;
  }
}

/** Dumps one segment; returns the number of problems found (0 or 1: the scan stops at a broken length or magic). */
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
    const w = new FileWindow(fh);
    let pos = 0;
    let count = 0;
    let problems = 0;
    const report = (what: string): void => {
      problems++;
      printLine(`klog dump-log: ${file}: ${what} at offset ${baseOffset + pos} (file position ${pos})`);
    };
    if (!opts.summary) await out.write(Buffer.from(`dumping ${file} (base offset ${baseOffset}, ${size} bytes)\n`));
    while (pos < size) {
      const left = size - pos;
      if (left < lengthFieldBytes) {
        report(`trailing partial message: ${left} bytes, too few for a length field`);
        break;
      }
      let at = await w.load(pos, Math.min(left, messageOverheadBytes));
      const length = w.buf.readInt32BE(at);
      if (length < messageHeaderBytes) {
        report(`corrupt message: length ${length} is below the ${messageHeaderBytes}-byte header`);
        break;
      }
      const total = lengthFieldBytes + length;
      const magic = w.buf[at + lengthFieldBytes];
      if (magic !== currentMagic) {
        report(`corrupt message: magic byte ${magic}, expected ${currentMagic}`);
        break;
      }
      if (total > left) {
        report(`trailing partial message: ${left} bytes of a ${total}-byte message`);
        break;
      }
      at = await w.load(pos, total);
      const attributes = w.buf[at + 5]!;
      const stored = w.buf.readUInt32BE(at + 6);
      const payload = w.buf.subarray(at + messageOverheadBytes, at + total);
      const computed = crc32Ieee(payload);
      const valid = stored === computed;
      if (!opts.summary) {
        const line =
          `offset: ${baseOffset + pos} size: ${total} payloadsize: ${length - messageHeaderBytes} magic: ${magic} ` +
          `codec: ${codecNames[attributes & compressionCodecMask]} crc: ${stored} valid: ${valid}` +
          (valid ? '' : ` (computed crc ${computed})`);
        await out.write(Buffer.from(`${line}\n`));
        if (opts.printPayloads) await out.write(Buffer.concat([Buffer.from('payload: '), payload, Buffer.from('\n')]));
      }
      // A bad CRC with a sane length and magic: report it and go on, the next message is where the length says.
      if (!valid) report(`corrupt message: CRC mismatch (stored ${stored}, computed ${computed})`);
      count++;
      pos += total;
    }
    if (opts.summary) {
      await out.write(
        Buffer.from(
          `${file}: base offset ${baseOffset}, ${count} messages, ${pos} of ${size} bytes read, ` +
            `next offset ${baseOffset + pos}, ${problems === 0 ? 'ok' : `${problems} problem${problems === 1 ? '' : 's'}`}\n`,
        ),
      );
    }
    return problems;
  } finally {
    await fh.close();
  }
}
