/**
 * The `klog` command as users run it: real child processes (`node dist/main.js ...`) against a
 * real broker on 127.0.0.1 (docs/design.md §6).
 */
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBroker, type Broker } from '@klog/broker';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runKlog } from './cli-run.js';

interface Run {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

/** Runs `klog args...` with `input` on stdin; stdout as bytes. */
async function klog(args: string[], input?: string | Buffer, timeoutMs = 30_000): Promise<Run> {
  const r = await runKlog(args, input ?? '', timeoutMs);
  return { code: r.code, stdout: r.stdoutBytes, stderr: r.stderr };
}

const sha256 = (b: Buffer | string): string => createHash('sha256').update(b).digest('hex');

/** A failure as users should see it: non-zero exit, exactly one line on stderr, no stack trace. */
function expectOneLineError(r: Run, pattern: RegExp): void {
  expect(r.code).not.toBe(0);
  expect(r.code).not.toBeNull();
  const lines = r.stderr.trimEnd().split('\n');
  expect(lines, r.stderr).toHaveLength(1);
  expect(r.stderr).toMatch(pattern);
  expect(r.stderr).not.toMatch(/^\s+at /m);
}

describe('klog', () => {
  let work: string;
  let broker: Broker;
  let address: string;
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'klog-cli-test-'));
    broker = await startBroker({ logDir: join(work, 'logs'), host: '127.0.0.1', port: 0, numPartitions: 2 }, pino({ level: 'silent' }));
    address = `127.0.0.1:${broker.port}`;
  });
  afterAll(async () => {
    await broker.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('produce a file, consume it back: same line count and checksum', async () => {
    const lines = Array.from({ length: 5000 }, (_, i) => `${new Date(1_700_000_000_000 + i * 1000).toISOString()} status=${i % 7} line ${i} ünïcode ✓ ${'x'.repeat(i % 120)}`);
    const text = `${lines.join('\n')}\n`;
    const file = join(work, 'input.log');
    writeFileSync(file, text);
    const p = await klog(['produce', '--broker-list', address, '--topic', 'roundtrip', '--partition', '1', '--file', file, '--batch-size', '50']);
    expect(p.code, p.stderr).toBe(0);
    expect(p.stderr).toMatch(/^produced 5000 messages \(\d+ bytes\) to topic roundtrip in [\d.]+ s/);
    const c = await klog(['consume', '--broker', address, '--topic', 'roundtrip', '--partition', '1', '--offset', 'earliest', '--max-messages', '5000', '--idle-timeout-ms', '10000']);
    expect(c.code, c.stderr).toBe(0);
    expect(c.stdout.toString().split('\n').length - 1).toBe(5000);
    expect(sha256(c.stdout)).toBe(sha256(text));
  }, 60_000);

  it('produce from stdin with keys and acks; consume with --print-offsets', async () => {
    const p = await klog(['produce', '--broker-list', address, '--topic', 'keyed', '--key-separator', '|', '--acks', '1'], 'k1|first\nk1|second\nk1|third|with bar\n');
    expect(p.code, p.stderr).toBe(0);
    expect(p.stderr).toMatch(/produced 3 messages/);
    const counts = await Promise.all(
      [0, 1].map((partition) =>
        klog(['consume', '--broker', address, '--topic', 'keyed', '--partition', String(partition), '--print-offsets', '--idle-timeout-ms', '1500']),
      ),
    );
    const out = counts.map((r) => r.stdout.toString()).join('');
    // One key: one partition, in order, keys stripped, offsets = byte positions.
    expect(out).toBe('0\tfirst\n15\tsecond\n31\tthird|with bar\n');
  }, 30_000);

  it('consume waits for data, then exits 0 after the idle timeout', async () => {
    // The topic exists (created as a produce would create it; METADATA never creates) and is empty;
    // a missing one is an error (consume-io.test.ts).
    await broker.logs.getOrCreateLog('empty', 0);
    const started = Date.now();
    const c = await klog(['consume', '--broker', address, '--topic', 'empty', '--offset', 'latest', '--idle-timeout-ms', '800']);
    expect(c.code, c.stderr).toBe(0);
    expect(c.stdout.length).toBe(0);
    expect(Date.now() - started).toBeGreaterThanOrEqual(800);
  });

  it('consume from a byte offset, stopping at --max-messages', async () => {
    await klog(['produce', '--broker-list', address, '--topic', 'some', '--partition', '0', '--acks', '2'], 'a\nbb\nccc\ndddd\n');
    // 'a' is 11 bytes, 'bb' 12: the third message is at 23.
    const c = await klog(['consume', '--broker', address, '--topic', 'some', '--offset', '23', '--max-messages', '1']);
    expect(c.code, c.stderr).toBe(0);
    expect(c.stdout.toString()).toBe('ccc\n');
  });

  it('offsets prints the earliest and latest offsets', async () => {
    await klog(['produce', '--broker-list', address, '--topic', 'offs', '--partition', '0', '--acks', '2'], 'one\ntwo\n');
    const latest = await klog(['offsets', '--broker', address, '--topic', 'offs', '--time', 'latest']);
    expect(latest.code, latest.stderr).toBe(0);
    expect(latest.stdout.toString()).toBe('26\n');
    const earliest = await klog(['offsets', '--broker', address, '--topic', 'offs', '--time', 'earliest']);
    expect(earliest.stdout.toString()).toBe('0\n');
  });

  it('dump-log: a good segment exits 0; a corrupt or truncated one exits non-zero, saying where', async () => {
    await klog(['produce', '--broker-list', address, '--topic', 'dump', '--partition', '0', '--acks', '2'], 'hello\nworld\nthird message\n');
    const dir = join(broker.config.logDir, 'dump-0');
    const segment = readdirSync(dir).find((n) => n.endsWith('.kafka'))!;
    expect(segment).toBe('00000000000000000000.kafka');

    const good = await klog(['dump-log', dir]);
    expect(good.code, good.stderr).toBe(0);
    const lines = good.stdout.toString().trim().split('\n').filter((l) => l.startsWith('offset:'));
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^offset: 0 size: 15 payloadsize: 5 magic: 1 codec: none crc: \d+ valid: true$/);
    expect(lines[1]).toMatch(/^offset: 15 /);
    const summary = await klog(['dump-log', '--summary', join(dir, segment)]);
    expect(summary.stdout.toString()).toMatch(/3 messages, 53 of 53 bytes read, next offset 53, ok/);

    // A flipped payload byte: the CRC check fails at offset 15.
    const bad = join(work, 'bad');
    mkdirSync(bad);
    copyFileSync(join(dir, segment), join(bad, segment));
    const bytes = readFileSync(join(bad, segment));
    bytes[15 + 10] = bytes[15 + 10]! ^ 0xff;
    writeFileSync(join(bad, segment), bytes);
    const corrupt = await klog(['dump-log', join(bad, segment)]);
    expect(corrupt.code).not.toBe(0);
    expect(corrupt.stdout.toString()).toMatch(/^offset: 15 .* valid: false/m);
    expect(corrupt.stderr).toMatch(/CRC mismatch .* at offset 15/);

    // Cut inside the last message: a trailing partial message.
    const cut = join(work, 'cut');
    mkdirSync(cut);
    copyFileSync(join(dir, segment), join(cut, segment));
    truncateSync(join(cut, segment), 40);
    const partial = await klog(['dump-log', '--summary', join(cut, segment)]);
    expect(partial.code).not.toBe(0);
    expect(partial.stderr).toMatch(/trailing partial message: 10 bytes of a 23-byte message at offset 30/);

    // A length field of 0x7FFFFFFF.
    const huge = join(work, 'huge');
    mkdirSync(huge);
    const b2 = readFileSync(join(dir, segment));
    b2.writeInt32BE(0x7fffffff, 15);
    writeFileSync(join(huge, segment), b2);
    const hugeRun = await klog(['dump-log', join(huge, segment)]);
    expect(hugeRun.code).not.toBe(0);
    expect(hugeRun.stderr).toMatch(/at offset 15/);
  });

  it('bad input: one line on stderr, non-zero exit, no stack trace', async () => {
    expectOneLineError(await klog(['consume', '--broker', address, '--topic', 't', '--no-such-flag']), /unknown option '--no-such-flag'/);
    expectOneLineError(await klog(['consume', '--broker', address, '--topic', 't', '--offset', 'yesterday']), /--offset.*'yesterday' is invalid/);
    expectOneLineError(await klog(['produce', '--broker-list', address, '--topic', 't', '--acks', '3']), /--acks/);
    // A negative partition is not "not an integer": the message says what is expected.
    expectOneLineError(await klog(['produce', '--broker-list', address, '--topic', 't', '--partition', '-1']), /--partition.*'-1' is invalid\. expected a whole number\./);
    expectOneLineError(await klog(['produce', '--broker-list', address, '--topic', 't', '--batch-size', '0']), /--batch-size.*expected a whole number of at least 1\./);
    // By default the broker's answer is awaited, so a rejected message is an error, not a silent loss.
    // A rejected line is reported by its number, with the summary and the failing lines (produce-stream.test.ts covers the rest).
    const tooBig = await klog(['produce', '--broker-list', address, '--topic', 'too-big'], `small\n${'x'.repeat(1_500_000)}\n`);
    expect(tooBig.code).toBe(1);
    expect(tooBig.stderr).toMatch(/^klog produce: line 2: MessageSizeTooLarge .*1500000 bytes is over the broker's limit of 1000000 bytes/m);
    expect(tooBig.stderr.trimEnd().split('\n').at(-1)).toBe('klog produce: error: 1 of 2 lines failed: lines 2');
    expectOneLineError(await klog(['produce', '--broker-list', 'localhost', '--topic', 't']), /broker-list.*host:port/);
    expectOneLineError(await klog(['consume', '--topic', 't']), /give --broker \(simple mode\) or --zookeeper and --group/);
    expectOneLineError(await klog(['consume', '--broker', address, '--topic', 'bad/topic']), /invalid topic name/);
    expectOneLineError(await klog(['produce', '--broker-list', address, '--topic', 't', '--file', join(work, 'missing.txt')]), /^klog produce: error: .*ENOENT/);
    expectOneLineError(await klog(['consume', '--broker', '127.0.0.1:1', '--topic', 't']), /^klog consume: error: .*cannot connect/);
    expectOneLineError(await klog(['consume', '--broker', address, '--topic', 'offs', '--offset', '999999']), /OffsetOutOfRange.*\[0, 26\]/);
    expectOneLineError(await klog(['dump-log', join(work, 'nothing-here')]), /ENOENT/);
    expectOneLineError(await klog(['frobnicate']), /unknown command 'frobnicate'/);
  }, 60_000);

  it('every subcommand has --help', async () => {
    for (const cmd of [['produce'], ['consume'], ['offsets'], ['dump-log'], ['perf', 'produce'], ['perf', 'consume']]) {
      const r = await klog([...cmd, '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout.toString()).toMatch(new RegExp(`Usage: klog ${cmd.join(' ')}`));
    }
  }, 30_000);

  it('perf produce and perf consume print one JSON object with their figures', async () => {
    const p = await klog(['perf', 'produce', '--broker-list', address, '--topic', 'perf', '--messages', '20000', '--size', '200', '--batch-size', '50', '--partitions', '1', '--json']);
    expect(p.code, p.stderr).toBe(0);
    const produced = JSON.parse(p.stdout.toString()) as Record<string, number>;
    expect(produced).toMatchObject({ messages: 20000, bytes: 4_000_000 });
    for (const k of ['seconds', 'msgsPerSec', 'mbPerSec']) expect(produced[k]).toBeGreaterThan(0);
    const c = await klog(['perf', 'consume', '--broker', address, '--topic', 'perf', '--partition', '0', '--messages', '20000', '--json']);
    expect(c.code, c.stderr).toBe(0);
    const consumed = JSON.parse(c.stdout.toString()) as Record<string, number>;
    expect(consumed).toMatchObject({ messages: 20000, bytes: 4_000_000 });
    expect(consumed.msgsPerSec).toBeGreaterThan(0);
    const line = await klog(['perf', 'produce', '--broker-list', address, '--topic', 'perf', '--messages', '1000']);
    expect(line.code, line.stderr).toBe(0);
    expect(line.stderr).toMatch(/^perf produce: 1000 messages, 200000 bytes in [\d.]+ s: \d+ msg\/s, [\d.]+ MB\/s/);
  }, 60_000);
});
