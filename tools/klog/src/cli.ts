/**
 * The `klog` command (docs/design.md §6): builds the commander program and runs it so that bad
 * input or a failure ends in one line on stderr and a non-zero exit code, never a stack trace.
 * Exit codes, as every klog command uses them (README, "Exit codes"): 0 success, 1 a failure at
 * run time (including a check that found a problem), 2 a usage error (an unknown or missing
 * option, a bad value, options that do not go together).
 */
import { createRequire } from 'node:module';
import { Command, CommanderError } from 'commander';
import { registerConsume } from './commands/consume.js';
import { registerDumpLog } from './commands/dump-log.js';
import { registerGroups } from './commands/groups.js';
import { registerLoad } from './commands/load.js';
import { registerOffsets } from './commands/offsets.js';
import { registerPerf } from './commands/perf.js';
import { registerProduce } from './commands/produce.js';
import { registerTopics } from './commands/topics.js';
import { UsageError } from './options.js';

/** The version of the klog release (every @klog package has the same). */
export const klogVersion = (createRequire(import.meta.url)('../package.json') as { version: string }).version;

/** The `klog` program with every subcommand. */
export function buildProgram(): Command {
  const program = new Command('klog')
    .description(
      'klog command-line tool: produce, consume, offsets, topics, groups, dump-log, perf, load ' +
        '(logs on stderr: KLOG_LOG_LEVEL, default warn; KLOG_LOG_FORMAT auto, json or pretty, default auto: pretty on a terminal)',
    )
    .version(klogVersion, '-V, --version', 'print the klog version')
    .exitOverride()
    .showSuggestionAfterError(true);
  registerProduce(program);
  registerConsume(program);
  registerOffsets(program);
  registerTopics(program);
  registerGroups(program);
  registerDumpLog(program);
  registerPerf(program);
  registerLoad(program);
  program.addHelpText(
    'after',
    `
Examples:
  printf 'hello\\nworld\\n' | klog produce --broker-list 127.0.0.1:9092 --topic greetings
  klog consume --broker 127.0.0.1:9092 --topic greetings --offset earliest --idle-timeout-ms 2000
  klog topics --zookeeper 127.0.0.1:2181/klog --describe greetings
  klog help produce

Exit codes: 0 success, 1 failure, 2 usage error.`,
  );
  return program;
}

/**
 * Runs `klog` with `argv` (as process.argv) and sets process.exitCode: 0 on success (and for
 * `--help` and `--version`), 2 on a usage error, 1 on a failure, each failure reported as one
 * line on stderr.
 */
export async function runCli(argv: readonly string[]): Promise<void> {
  const onFatal = (e: unknown): void => {
    process.stderr.write(`klog: error: ${oneLine(e)}\n`);
    process.exit(1);
  };
  process.on('uncaughtException', onFatal);
  process.on('unhandledRejection', onFatal);
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    // The reader went away (e.g. `klog consume ... | head`): stop quietly.
    if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    onFatal(e);
  });
  try {
    await buildProgram().parseAsync([...argv]);
  } catch (e) {
    if (e instanceof CommanderError) {
      // commander has already printed its one-line message (or the help, or the version).
      process.exitCode = e.exitCode === 0 ? 0 : 2;
      return;
    }
    if (e instanceof UsageError) {
      process.stderr.write(`klog ${commandName(argv)}error: ${oneLine(e)}\n`);
      process.exitCode = 2;
      return;
    }
    // A refusal of the admin (docs/replication.md §15.1) is an answer, not a fault: said as it is.
    const refused = e instanceof Error && e.name === 'TopicRefusedError';
    process.stderr.write(`klog ${commandName(argv)}${refused ? '' : 'error: '}${oneLine(e)}\n`);
    process.exitCode = 1;
  }
}

function commandName(argv: readonly string[]): string {
  const words = argv.slice(2).filter((a) => !a.startsWith('-'));
  const first = words[0];
  if (first === undefined) return '';
  return first === 'perf' && words[1] !== undefined ? `perf ${words[1]}: ` : `${first}: `;
}

function oneLine(e: unknown): string {
  const text = e instanceof Error ? e.message : String(e);
  return text.replace(/\s*\n\s*/g, ' ').trim();
}
