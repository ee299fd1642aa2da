/**
 * `klog offsets`: the OFFSETS request (docs/format.md §10): segment start offsets before a time,
 * newest first, one per line. A topic or partition the broker does not have is an error naming
 * those it has.
 */
import { type Command, Option } from 'commander';
import { type BrokerAddress, SimpleConsumer } from '@klog/client';
import { addPartitionOptions, intParser, parseOffsetsTime } from '../options.js';

interface OffsetsOptions {
  broker: BrokerAddress;
  topic: string;
  partition: number;
  time: number;
  maxOffsets: number;
}

/** Adds `klog offsets` to `program`. */
export function registerOffsets(program: Command): void {
  addPartitionOptions(program.command('offsets').description('print offsets of a partition before a time, newest first, one per line'))
    .addOption(
      new Option('--time <latest|earliest|ms>', 'latest (or -1): the log end; earliest (or -2): the oldest offset; else ms since the epoch')
        .argParser(parseOffsetsTime)
        .default(-1, 'latest'),
    )
    .option('--max-offsets <n>', 'most offsets to print', intParser(1, 2 ** 31 - 1), 1)
    .addHelpText(
      'after',
      `
Only flushed messages are visible (docs/design.md §2): right after a produce, latest can still be
the offset before it, until the broker's next flush (by default a group commit, within a few ms;
with flush.policy=interval, up to flush.ms).

Examples:
  klog offsets --broker 127.0.0.1:9092 --topic greetings --time latest
  klog offsets --broker 127.0.0.1:9092 --topic greetings --time earliest
  klog offsets --broker 127.0.0.1:9092 --topic greetings --time 1700000000000 --max-offsets 10`,
    )
    .action(async (opts: OffsetsOptions) => {
      const consumer = new SimpleConsumer(opts.broker);
      try {
        // OFFSETS answers a missing topic as an empty log at 0: ask the broker what it holds first.
        await consumer.checkPartition(opts.topic, opts.partition);
        const offsets = await consumer.offsetsBefore(opts.topic, opts.partition, opts.time, opts.maxOffsets);
        process.stdout.write(offsets.map((o) => `${o}\n`).join(''));
      } finally {
        await consumer.close();
      }
    });
}
