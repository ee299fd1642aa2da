/**
 * Parsers for command-line values. Each throws commander's InvalidArgumentError, which commander
 * reports as one line naming the option and the value.
 */
import { type Command, InvalidArgumentError, Option } from 'commander';
import { type BrokerAddress, KlogError, parseBrokerAddress, parseBrokerList } from '@klog/client';
import { validateTopic } from '@klog/protocol';
import { checkGroup } from '@klog/zk-registry';

/**
 * Options given that do not go together, or one that is missing (a usage error: exit code 2, see
 * cli.ts), found once commander has parsed the command line.
 */
export class UsageError extends KlogError {
  override readonly name: string = 'UsageError';
}

/** An integer ≥ `min` (and ≤ `max`); accepts `1k`, `1M`, `1G` suffixes for byte sizes when `sizes` is set. */
export function intParser(min: number, max = Number.MAX_SAFE_INTEGER, sizes = false): (value: string) => number {
  const bounds = max === Number.MAX_SAFE_INTEGER ? (min > 0 ? ` of at least ${min}` : '') : ` in ${min}..${max}`;
  const expected = `expected a whole number${bounds}${sizes ? ' (suffixes k, M, G allowed)' : ''}.`;
  return (value) => {
    const m = (sizes ? /^(\d+)([kKmMgG]i?[bB]?)?$/ : /^(\d+)$/).exec(value.trim());
    if (!m) throw new InvalidArgumentError(expected);
    const unit = (m[2] ?? '').charAt(0).toLowerCase();
    const n = Number(m[1]) * (unit === 'k' ? 1024 : unit === 'm' ? 1024 ** 2 : unit === 'g' ? 1024 ** 3 : 1);
    if (!Number.isSafeInteger(n) || n < min || n > max) throw new InvalidArgumentError(expected);
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

/**
 * A commander parser from a library's parser: what `parse` returns, its error becoming
 * commander's InvalidArgumentError, so a bad value is refused in one line naming the option.
 */
export function optionParser<T>(parse: (value: string) => T): (value: string) => T {
  return (value) => {
    try {
      return parse(value);
    } catch (e) {
      throw new InvalidArgumentError(`${(e as Error).message}.`);
    }
  };
}

/** A commander parser from a library's check (which throws for a bad value): the value as given, as {@link optionParser}. */
export function optionCheck(check: (value: string) => unknown): (value: string) => string {
  return optionParser((value) => {
    check(value);
    return value;
  });
}

/** One `host:port`. */
export const parseBroker: (value: string) => BrokerAddress = optionParser(parseBrokerAddress);

/** `host:port[,host:port...]`, kept as given once checked. */
export const parseBrokerListOption: (value: string) => string = optionCheck(parseBrokerList);

/** A topic name (1-249 characters of `[A-Za-z0-9._-]`). */
export const parseTopic: (value: string) => string = optionCheck(validateTopic);

/** A consumer group id (checkGroup of @klog/zk-registry). */
export const parseGroup: (value: string) => string = optionParser(checkGroup);

/** `none` or `gzip`. */
export function parseCompression(value: string): 'none' | 'gzip' {
  if (value === 'none' || value === 'gzip') return value;
  throw new InvalidArgumentError('expected none or gzip.');
}

/** `--keyless <sticky|random>`: where records with neither partition nor key go (docs/design.md §5). */
export function parseKeylessPartitioning(value: string): 'sticky' | 'random' {
  if (value === 'sticky' || value === 'random') return value;
  throw new InvalidArgumentError('expected sticky or random.');
}

/** A non-empty string. */
export function parseNonEmpty(value: string): string {
  if (value === '') throw new InvalidArgumentError('must not be empty.');
  return value;
}

/**
 * Adds the broker option in both spellings, as Kafka's tools taught them: `--broker-list` and
 * `--broker` name the same thing on every command that takes brokers. `primary` is the command's
 * own option (`--broker <host:port>` parsed by {@link parseBroker}, or `--broker-list
 * <host:port,...>` by {@link parseBrokerListOption}), described by `description`; the other
 * spelling is accepted too (hidden from the help, which names it) and parsed the same way. A
 * `preAction` hook moves the alias's value to the primary option, refuses both at once, and,
 * when `required`, refuses neither — each a usage error (exit code 2).
 */
export function addBrokerOption(command: Command, primary: 'broker' | 'brokerList', description: string, required: boolean): Command {
  const parse: (value: string) => unknown = primary === 'broker' ? parseBroker : parseBrokerListOption;
  const alias = primary === 'broker' ? 'brokerList' : 'broker';
  const flag = (name: string): string => (name === 'broker' ? '--broker' : '--broker-list');
  return command
    .option(primary === 'broker' ? '--broker <host:port>' : '--broker-list <host:port,...>', description, parse)
    .addOption(new Option(primary === 'broker' ? '--broker-list <host:port>' : '--broker <host:port,...>').argParser(parse).hideHelp())
    .hook('preAction', (_thisCommand, actionCommand) => {
      const opts = actionCommand.opts<Record<string, unknown>>();
      if (opts[alias] !== undefined) {
        if (opts[primary] !== undefined) actionCommand.error(`error: give one of ${flag(primary)} and ${flag(alias)} (they are the same option)`, { exitCode: 2 });
        actionCommand.setOptionValueWithSource(primary, opts[alias], 'cli');
        actionCommand.setOptionValueWithSource(alias, undefined, 'default');
      } else if (required && opts[primary] === undefined) {
        actionCommand.error(`error: required option '${flag(primary)}' not specified`, { exitCode: 2 });
      }
    });
}

/**
 * Adds the options of a command on one partition of one broker (`klog offsets`, `klog perf
 * consume`): `--broker` (required, both spellings: {@link addBrokerOption}), `--topic` (required)
 * and `--partition` (default 0).
 */
export function addPartitionOptions(command: Command): Command {
  return addBrokerOption(command, 'broker', 'broker holding the partition (required; --broker-list is the same option)', true)
    .requiredOption('--topic <topic>', 'topic', parseTopic)
    .option('--partition <n>', 'partition', intParser(0), 0);
}
