/** The progress display of `klog load`: a bar redrawn in place on a terminal, plain lines elsewhere. */
import { describe, expect, it } from 'vitest';
import { sink as ttySink, type TtySink } from './tty-sink.js';
import { formatBytes, Progress } from '../src/load/progress.js';

const sink = (tty: boolean): TtySink => ttySink(tty, 120);

/** What a terminal would show: the text with cursor movements and line clears taken out. */
const frames = (text: string): string[] =>
  text
    .split(/\x1b\[1G|\r/)
    .map((f) => f.replace(/\x1b\[[0-9;]*[A-Za-z]/g, ''))
    .filter((f) => f !== '');

describe('load progress', () => {
  it('draws a bar of bytes read on a terminal, with the partition lines above it, and clears it at the end', () => {
    const s = sink(true);
    const p = new Progress(4096, 2, s);
    p.advance(1024);
    p.partitionDone('events 0-0: 10 messages');
    const shown = frames(s.text);
    expect(shown[0]).toMatch(/^\[-{25}\]   0%  0 B\/4\.0 KiB  0\/2 partitions  0 B\/s$/);
    expect(shown).toContain('events 0-0: 10 messages\n');
    // Redrawn under the line, with the bytes read and the partition counted.
    expect(shown.at(-1)).toMatch(/^\[#{6}-{19}\]  25%  1\.0 KiB\/4\.0 KiB  1\/2 partitions  [\d.]+ (B|KiB|MiB)\/s$/);
    p.finish();
    expect(s.text.endsWith('\x1b[0J')).toBe(true);
    const length = s.text.length;
    p.finish();
    p.advance(10);
    expect(s.text.length).toBe(length);
  });

  it('writes only the partition lines when not on a terminal', () => {
    const s = sink(false);
    const p = new Progress(4096, 2, s);
    p.advance(4096);
    p.partitionDone('events 0-0: 10 messages');
    p.partitionDone('events 0-1: 0 messages');
    p.finish();
    expect(s.text).toBe('events 0-0: 10 messages\nevents 0-1: 0 messages\n');
  });

  it('formats sizes in binary units', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1023)).toBe('1023 B');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(3 * 1024 ** 3)).toBe('3.0 GiB');
  });
});
