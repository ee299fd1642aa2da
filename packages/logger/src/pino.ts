/**
 * The pino logger of every klog command (`klog`, `klog-broker`, `klog-mirror-maker`,
 * `klog-audit`): JSON lines, one per entry, or, for a person at a terminal, pino-pretty's
 * coloured one-line-per-entry form. `--log-format auto` (the default) is pretty when the
 * destination is a terminal and JSON otherwise, so that a log piped to a file or a collector is
 * always JSON. Writes are synchronous, so nothing logged is lost when a command exits.
 */
import { pino, type Logger as PinoLogger } from 'pino';
import PinoPretty from 'pino-pretty';

/** pino's levels, and `silent`. */
export const logLevels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
/** One of {@link logLevels}. */
export type LogLevel = (typeof logLevels)[number];

/** `json`, `pretty`, or `auto` (pretty on a terminal, else JSON). */
export const logFormats = ['auto', 'json', 'pretty'] as const;
/** One of {@link logFormats}. */
export type LogFormat = (typeof logFormats)[number];

/** Options of {@link createLogger}. */
export interface CreateLoggerOptions {
  /** The `name` field of every entry (the command: `klog-broker`, ...). */
  readonly name: string;
  /** Lowest level written. */
  readonly level: LogLevel;
  /** Default `auto`. */
  readonly format?: LogFormat;
  /** File descriptor written to: 1 (stdout) or 2 (stderr). */
  readonly fd: 1 | 2;
}

/** True when `format` on file descriptor `fd` means pretty output. */
export function isPretty(format: LogFormat, fd: 1 | 2): boolean {
  if (format === 'auto') return (fd === 1 ? process.stdout : process.stderr).isTTY === true;
  return format === 'pretty';
}

/** A pino logger on `fd`, JSON or pretty as `format` says (see the file comment). */
export function createLogger(options: CreateLoggerOptions): PinoLogger {
  const { name, level, fd } = options;
  if (!isPretty(options.format ?? 'auto', fd)) return pino({ name, level }, pino.destination({ dest: fd, sync: true }));
  const tty = (fd === 1 ? process.stdout : process.stderr).isTTY === true;
  return pino({ name, level }, PinoPretty({ destination: fd, sync: true, colorize: tty, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname' }));
}
