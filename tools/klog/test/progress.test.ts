/** The shared progress display (src/progress.ts): drawn only on a terminal, never when disabled, cleared on stop. */
import { describe, expect, it } from 'vitest';
import { sink as ttySink, type TtySink } from './tty-sink.js';
import { createProgress, formatCount, RecentRate } from '../src/progress.js';

const sink = (tty: boolean): TtySink => ttySink(tty, 60);

describe('progress display', () => {
  it('on a terminal: draws the bar and the status at once, logs lines above it, and clears it on stop', () => {
    const s = sink(true);
    const p = createProgress({ total: 200, stream: s, status: (v) => `${v.value} of ${v.total} units` });
    expect(p.drawing).toBe(true);
    expect(s.text).toContain('[-------------------------]   0%  0 of 200 units');
    p.update(100);
    p.log('a line');
    expect(s.text).toContain('a line\n');
    expect(s.text).toContain('[#############------------]  50%  100 of 200 units');
    p.stop();
    expect(p.drawing).toBe(false);
    expect(s.text.endsWith('\x1b[0J')).toBe(true);
    // After stop: nothing is drawn, logged lines are plain.
    const length = s.text.length;
    p.update(150);
    p.stop();
    expect(s.text.length).toBe(length);
    p.log('after');
    expect(s.text.slice(length)).toBe('after\n');
  });

  it('cuts the line to the terminal width', () => {
    const s = sink(true);
    const p = createProgress({ total: 1, stream: s, status: () => 'x'.repeat(200) });
    p.stop();
    const drawn = s.text.split('\x1b[1G').map((f) => f.replace(/\x1b\[[0-9;]*[A-Za-z]/g, ''));
    expect(Math.max(...drawn.map((f) => f.length))).toBeLessThanOrEqual(60);
  });

  it('without a total: only the status, no bar', () => {
    const s = sink(true);
    const p = createProgress({ stream: s, status: () => 'status only' });
    p.stop();
    expect(s.text).toContain('\x1b[1Gstatus only');
    expect(s.text).not.toMatch(/\[[#-]|%/);
  });

  it('not on a terminal: writes nothing but the logged lines, and never calls the status', () => {
    const s = sink(false);
    const p = createProgress({
      total: 10,
      stream: s,
      status: () => {
        throw new Error('not drawn');
      },
    });
    expect(p.drawing).toBe(false);
    p.update(5);
    p.increment(5);
    p.setTotal(20);
    p.log('plain');
    p.stop();
    expect(s.text).toBe('plain\n');
  });

  it('disabled (--json): draws nothing even on a terminal', () => {
    const s = sink(true);
    const p = createProgress({ total: 10, stream: s, enabled: false, status: () => 'never' });
    p.update(5);
    p.stop();
    expect(p.drawing).toBe(false);
    expect(s.text).toBe('');
  });

  it('measures the rate over the last window', () => {
    const r = new RecentRate(1000, 0);
    expect(r.sample(0, 0, 0)).toEqual({ msgsPerSec: 0, mbPerSec: 0 });
    expect(r.sample(500, 2 ** 20, 500)).toEqual({ msgsPerSec: 1000, mbPerSec: 2 });
    r.sample(1000, 2 * 2 ** 20, 1000);
    // At 2000 ms the window starts at 1000 ms: 3000 messages more in 1 s.
    expect(r.sample(4000, 2 * 2 ** 20, 2000)).toEqual({ msgsPerSec: 3000, mbPerSec: 0 });
  });

  it('formats counts with thousands separators', () => {
    expect(formatCount(0)).toBe('0');
    expect(formatCount(1234567.4)).toBe('1,234,567');
  });
});
