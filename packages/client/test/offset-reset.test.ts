import { describe, expect, it } from 'vitest';
import { offsetResetPolicies, parseOffsetReset, resetOffsetWithin } from '../src/index.js';

describe('the reset policy', () => {
  it('names the earliest offset (smallest) or the log end (largest) of the bounds a broker reported', () => {
    expect(resetOffsetWithin('smallest', { earliest: 100, end: 900 })).toBe(100);
    expect(resetOffsetWithin('largest', { earliest: 100, end: 900 })).toBe(900);
    expect(resetOffsetWithin('largest', { earliest: 100 })).toBeUndefined();
  });

  it('accepts smallest and largest only, naming the setting', () => {
    for (const p of offsetResetPolicies) expect(parseOffsetReset(p, 'auto.offset.reset')).toBe(p);
    expect(() => parseOffsetReset('earliest', 'auto.offset.reset')).toThrow('auto.offset.reset "earliest" must be smallest or largest');
    expect(() => parseOffsetReset(undefined, 'autoOffsetReset')).toThrow(RangeError);
  });
});
