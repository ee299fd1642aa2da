/**
 * Parsers for command-line values. Each throws commander's InvalidArgumentError, which commander
 * reports as one line naming the option and the value.
 */
import { type Command, InvalidArgumentError, Option } from 'commander';
import { type BrokerAddress, KlogError, parseBrokerAddress, parseBrokerList } from '@klog/client';
import { validateTopic } from '@klog/protocol';

/**
 * Options given that do not go together, or one that is missing (a usage error: exit code 2, see
 * cli.ts), found once commander has parsed the command line.
 */
export class UsageError extends KlogError {
  override readonly name: string = 'UsageError';
}

/** An integer ≥ `min` (and ≤ `max`); accepts `1k`, `1M`, `1G` suffixes for byte sizes when `sizes` is set. */
export function intParser(min: number, max = Number.MAX_SAFE_INTEGER, sizes = false): (value: string) => number {
  return (value) => {
    const m = (sizes ? /^(\d+)([kKmMgG]i?[bB]?)?$/ : /^(\d+)$/).exec(value.trim());
    if (!m) throw new InvalidArgumentError(`expected an integer${sizes ? ' (suffixes k, M, G allowed)' : ''}.`);
    const unit = (m[2] ?? '').charAt(0).toLowerCase();
    const n = Number(m[1]) * (unit === 'k' ? 1024 : unit === 'm' ? 1024 ** 2 : unit === 'g' ? 1024 ** 3 : 1);
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(`expected an integer in ${min}..${max === Number.MAX_SAFE_INTEGER ? '' : max}.`);
    }
    return n;
  };
}

/** Where a consumer starts: a named end of the partition, a byte offset, or the last N messages. */
export type StartOffset = 'earliest' | 'latest' | number | { readonly last: number };

/** `earliest`, `latest`, a non-negative byte offset, or `-N` (the last N messages). */
export function parseStartOffset(value: string): StartOffset {
  if (value === 'earliest' || value === 'latest') return value;
  if (/^\d+$/.test(value) && Number.isSafeInteger(Number(value))) return Number(value);
  if (/^-\d+$/.test(value) && Number.isSafeInteger(-Number(value))) return { last: -Number(value) };
  throw new InvalidArgumentError('expected earliest, latest, a non-negative byte offset, or -N for the last N messages.');
}

/** `latest` (−1), `earliest` (−2) or ms since the epoch, as an OFFSETS request's time. */
export function parseOffsetsTime(value: string): number {
  if (value === 'latest' || value === '-1') return -1;
  if (value === 'earliest' || value === '-2') return -2;
  if (/^\d+$/.test(value) && Number.isSafeInteger(Number(value))) return Number(value);
  throw new InvalidArgumentError('expected latest (or -1), earliest (or -2) or ms since the epoch.');
}

/** What `--acks` takes: 0, 1, 2, or −1 for `all` (docs/replication.md §11). */
export type AcksValue = 0 | 1 | 2 | -1;

/** `0`, `1`, `2`, or `all` (also `-1`): flushed on every ISR member of a replicated partition, as 2 on a paper topic. */
export function parseAcks(value: string): AcksValue {
  if (value === '0' || value === '1' || value === '2') return Number(value) as 0 | 1 | 2;
  if (value === 'all' || value === '-1') return -1;
  throw new InvalidArgumentError('expected 0 (no acknowledgement), 1 (appended), 2 (flushed) or all (flushed on every in-sync replica).');
}

/** How `--acks` is printed in summaries: `all` for −1. */
export function acksName(acks: AcksValue): string {
  return acks === -1 ? 'all' : String(acks);
}

/** One `host:port`. */
export function parseBroker(value: string): BrokerAddress {
  try {
    return parseBrokerAddress(value);
  } catch (e) {
    throw new InvalidArgumentError(`${(e as KlogError).message}.`);
  }
}

/** `host:port[,host:port...]`, kept as given once checked. */
export function parseBrokerListOption(value: string): string {
  try {
    parseBrokerList(value);
    return value;
  } catch (e) {
    throw new InvalidArgumentError(`${(e as KlogError).message}.`);
  }
}

/** A topic name (1-249 characters of `[A-Za-z0-9._-]`). */
export function parseTopic(value: string): string {
  try {
    validateTopic(value);
    return value;
  } catch (e) {
    throw new InvalidArgumentError(`${(e as Error).message}.`);
  }
}

/** `none` or `gzip`. */
export function parseCompression(value: string): 'none' | 'gzip' {
  if (value === 'none' || value === 'gzip') return value;
  throw new InvalidArgumentError('expected none or gzip.');
}

/** A non-empty string. */
export function parseNonEmpty(value: string): string {
  if (value === '') throw new InvalidArgumentError('must not be empty.');
  return value;
}

/**
 * Both spellings of the broker option, as Kafka's tools taught them: `--broker-list` and
 * `--broker` name the same thing on every command that takes brokers. `alias` is the option the
 * command accepts besides its own `primary` one (hidden from the help, which names it); the
 * `preAction` hook this returns moves the alias's value to the primary option, refuses both at
 * once, and, when `required`, refuses neither — each a usage error (exit code 2).
 */
export function brokerSpellings(primary: 'broker' | 'brokerList', required: boolean): (thisCommand: Command, actionCommand: Command) => void {
  const alias = primary === 'broker' ? 'brokerList' : 'broker';
  const flag = (name: string): string => (name === 'broker' ? '--broker' : '--broker-list');
  return (_thisCommand, command) => {
    const opts = command.opts<Record<string, unknown>>();
    if (opts[alias] !== undefined) {
      if (opts[primary] !== undefined) command.error(`error: give one of ${flag(primary)} and ${flag(alias)} (they are the same option)`, { exitCode: 2 });
      command.setOptionValueWithSource(primary, opts[alias], 'cli');
      command.setOptionValueWithSource(alias, undefined, 'default');
    } else if (required && opts[primary] === undefined) {
      command.error(`error: required option '${flag(primary)}' not specified`, { exitCode: 2 });
    }
  };
}

/** The hidden option of the other broker spelling (see {@link brokerSpellings}), parsed as the primary one is. */
export function brokerAliasOption(primary: 'broker' | 'brokerList', parse: (value: string) => unknown): Option {
  return new Option(primary === 'broker' ? '--broker-list <host:port>' : '--broker <host:port,...>').argParser(parse).hideHelp();
}
