/**
 * How `klog consume` prints a message with `--format` (kcat's `-f`) or `--json` (kcat's `-J`).
 *
 * `--format` tokens: `%t` topic, `%p` partition (`<brokerId>-<partition>` in group mode), `%o`
 * offset, `%k` key (empty when none), `%K` key bytes (−1 when none), `%s` payload, `%S` payload
 * bytes, `%T` creation time in ms since the epoch (−1 when not stored), `%h` the producing host
 * (empty when not stored), `%%` a percent sign; escapes `\n`, `\r`, `\t`, `\\`. Nothing is
 * added: end the format with `\n` for one message per line, as with kcat.
 */
import { InvalidArgumentError } from 'commander';
import { linePrefix } from './output.js';
import { isUtf8 } from 'node:buffer';

/** What the formats print of a message. */
export interface PrintedMessage {
  readonly topic: string;
  /** The partition number (on its broker, in group mode). */
  readonly partition: number;
  /** Group mode: the broker holding the partition (`%p` prints `<brokerId>-<partition>` then). */
  readonly brokerId?: number;
  readonly offset: number;
  readonly payload: Buffer;
  readonly key?: Buffer;
  readonly timestamp?: number;
  readonly host?: string;
}

/** A compiled `--format`: the pieces of a message's output, in order. */
export type MessageFormatter = (m: PrintedMessage) => Buffer[];

const escapes: Record<string, string> = { n: '\n', r: '\r', t: '\t', '\\': '\\' };
const tokens = new Set(['t', 'p', 'o', 'k', 'K', 's', 'S', 'T', 'h', '%']);

/**
 * Compiles a `--format` string (see the file comment).
 * @throws InvalidArgumentError for an unknown `%x` token or escape, or a format that prints nothing of the message
 */
export function parseFormat(format: string): MessageFormatter {
  type Part = string | { token: string };
  const parts: Part[] = [];
  let text = '';
  for (let i = 0; i < format.length; i++) {
    const c = format[i]!;
    if (c === '\\' && i + 1 < format.length && escapes[format[i + 1]!] !== undefined) {
      text += escapes[format[++i]!];
    } else if (c === '%') {
      const t = format[++i];
      if (t === undefined || !tokens.has(t)) throw new InvalidArgumentError(`unknown token %${t ?? ''} (known: %t %p %o %k %K %s %S %T %h %%).`);
      if (t === '%') text += '%';
      else {
        if (text) parts.push(text);
        text = '';
        parts.push({ token: t });
      }
    } else text += c;
  }
  if (text) parts.push(text);
  if (!parts.some((p) => typeof p !== 'string')) throw new InvalidArgumentError('prints nothing of the message: use %s for the payload (see --help).');
  const fixed = parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : p));
  return (m) =>
    fixed.map((p) => {
      if (Buffer.isBuffer(p)) return p;
      switch (p.token) {
        case 's':
          return m.payload;
        case 'k':
          return m.key ?? empty;
        case 't':
          return Buffer.from(m.topic);
        case 'p':
          return Buffer.from(m.brokerId === undefined ? String(m.partition) : `${m.brokerId}-${m.partition}`);
        case 'o':
          return Buffer.from(String(m.offset));
        case 'K':
          return Buffer.from(String(m.key ? m.key.length : -1));
        case 'S':
          return Buffer.from(String(m.payload.length));
        case 'T':
          return Buffer.from(String(m.timestamp ?? -1));
        default: // 'h'
          return m.host === undefined ? empty : Buffer.from(m.host);
      }
    });
}

const empty = Buffer.alloc(0);

/**
 * One JSON line for `--json`: `topic`, `partition`, (group mode) `brokerId`, `offset`, `key`
 * (null when none), `payload`, `timestamp` (ms since the epoch, null when not stored), `host`
 * (null when not stored). Key and payload are strings of their UTF-8 text; bytes that are not
 * valid UTF-8 are given in base64 instead, with `keyEncoding` / `payloadEncoding` `"base64"`
 * beside them, so that no byte is lost.
 */
export function jsonLine(m: PrintedMessage): Buffer {
  return Buffer.from(
    `${JSON.stringify({
      topic: m.topic,
      partition: m.partition,
      ...(m.brokerId !== undefined && { brokerId: m.brokerId }),
      offset: m.offset,
      ...jsonBytes('key', m.key ?? null),
      ...jsonBytes('payload', m.payload),
      timestamp: m.timestamp ?? null,
      host: m.host ?? null,
    })}\n`,
  );
}

/** `{ [name]: text }` for UTF-8 bytes, `{ [name]: base64, [name + 'Encoding']: 'base64' }` for others. */
function jsonBytes(name: 'key' | 'payload', bytes: Buffer | null): Record<string, string | null> {
  if (bytes === null) return { [name]: null };
  if (isUtf8(bytes)) return { [name]: bytes.toString('utf8') };
  return { [name]: bytes.toString('base64'), [`${name}Encoding`]: 'base64' };
}

/** How the command lays out a message: `--format`, `--json`, or the payload after the `--print-*` prefixes and a newline. */
export function messagePrinter(opts: {
  format?: MessageFormatter;
  json?: boolean;
  printOffsets?: boolean;
  printKey?: boolean;
  printMetadata?: boolean;
}): (m: PrintedMessage) => Buffer[] {
  if (opts.format) return opts.format;
  if (opts.json) return (m) => [jsonLine(m)];
  return (m) => {
    const parts: Buffer[] = opts.printOffsets ? [Buffer.from(`${m.offset}\t`)] : [];
    parts.push(...linePrefix(m, opts), m.payload, newline);
    return parts;
  };
}

const newline = Buffer.from('\n');
