import { describe, expect, it } from 'vitest';
import { LeaderState } from '../src/replication/leader-state.js';

const lag = 10_000;
function state(over: Partial<ConstructorParameters<typeof LeaderState>[0]> = {}): LeaderState {
  const base = { leaderId: 1, replicas: [1, 2, 3], isr: [1, 2, 3], epochStartOffset: 0, highWatermark: 0, leaderFlushedEnd: 0 };
  return new LeaderState({ ...base, replicaLagTimeMaxMs: lag, nowMs: 1000, ...over });
}

describe('LeaderState: high watermark (docs/replication.md §9.5)', () => {
  it('is the smallest flushed end over the ISR, the leader included', () => {
    const s = state();
    expect(s.recordFetch(2, 100, 100, 300, 300, 1001)).toBe(false); // 3 unknown: holds
    expect(s.highWatermark).toBe(0);
    expect(s.recordFetch(3, 200, 150, 300, 300, 1002)).toBe(true);
    expect(s.highWatermark).toBe(100);
    s.recordFetch(2, 300, 300, 300, 300, 1003);
    expect(s.highWatermark).toBe(150);
  });

  it('counts flushedOffset, never above fetchOffset', () => {
    const s = state({ isr: [1, 2], replicas: [1, 2] });
    s.recordFetch(2, 50, 400, 300, 300, 1001);
    expect(s.highWatermark).toBe(50);
    expect(s.follower(2)!.flushedEnd).toBe(50);
  });

  it('never moves backwards', () => {
    const s = state({ replicas: [1, 2], isr: [1, 2] });
    s.recordFetch(2, 200, 200, 300, 300, 1001);
    expect(s.highWatermark).toBe(200);
    expect(s.recordFetch(2, 120, 120, 300, 300, 1002)).toBe(false);
    expect(s.highWatermark).toBe(200);
  });

  it('is never above the leader’s flushed end', () => {
    const s = state({ replicas: [1, 2], isr: [1, 2], highWatermark: 500, leaderFlushedEnd: 80 });
    expect(s.highWatermark).toBe(80); // the learnt value is capped
    s.recordFetch(2, 300, 300, 300, 100, 1001);
    expect(s.highWatermark).toBe(100);
    expect(s.leaderFlushed(250)).toBe(true);
    expect(s.highWatermark).toBe(250);
    expect(s.leaderFlushed(400)).toBe(true);
    expect(s.highWatermark).toBe(300);
  });

  it('with the leader alone in the ISR follows the leader’s flushed end', () => {
    const s = state({ isr: [1] });
    expect(s.leaderFlushed(40)).toBe(true);
    expect(s.highWatermark).toBe(40);
    s.recordFetch(2, 0, 0, 40, 40, 1001); // a follower outside the ISR does not hold it
    expect(s.leaderFlushed(90)).toBe(true);
    expect(s.highWatermark).toBe(90);
  });

  it('waits for the union of the written and the pending ISR while a shrink is written', () => {
    const s = state();
    s.recordFetch(2, 100, 100, 500, 500, 1001);
    s.recordFetch(3, 40, 40, 500, 500, 1001);
    expect(s.highWatermark).toBe(40);
    const p = s.proposeIsrChange(1001 + lag + 1)!; // both lag; say 3 is removed alone
    expect(p.removed).toEqual([2, 3]);
    s.beginIsrChange([1, 2]);
    expect(s.hwIsr).toEqual([1, 2, 3]);
    s.recordFetch(2, 500, 500, 500, 500, 1001 + lag + 2);
    expect(s.highWatermark).toBe(40); // 3 still counts until the write is done
    expect(s.finishIsrChange([1, 2])).toBe(true);
    expect(s.isr).toEqual([1, 2]);
    expect(s.highWatermark).toBe(500);
  });

  it('waits for a joining follower while its expand is written', () => {
    const s = state({ isr: [1, 2] });
    s.recordFetch(2, 100, 100, 100, 100, 1001);
    expect(s.highWatermark).toBe(100);
    s.recordFetch(3, 100, 100, 100, 100, 1002);
    const p = s.proposeIsrChange(1003)!;
    expect(p).toEqual({ isr: [1, 2, 3], added: [3], removed: [] });
    s.beginIsrChange(p.isr);
    s.recordFetch(2, 200, 200, 200, 200, 1004);
    expect(s.highWatermark).toBe(100); // 3 counts already, has 100
    s.abandonIsrChange();
    expect(s.isr).toEqual([1, 2]);
    expect(s.leaderFlushed(200)).toBe(true);
    expect(s.highWatermark).toBe(200);
  });
});

describe('LeaderState: ISR shrink (docs/replication.md §9.4)', () => {
  it('removes a follower not caught up for more than replica.lag.time.max.ms, never before', () => {
    const s = state({ replicas: [1, 2], isr: [1, 2] });
    expect(s.proposeIsrChange(1000 + lag)).toBeUndefined();
    expect(s.proposeIsrChange(1000 + lag + 1)).toEqual({ isr: [1], added: [], removed: [2] });
  });

  it('keeps a follower that keeps flushing everything the leader had', () => {
    const s = state({ replicas: [1, 2], isr: [1, 2] });
    let now = 1000;
    for (let end = 100; end <= 2000; end += 100) {
      now += 3000;
      s.recordFetch(2, end, end, end, end, now); // caught up at each fetch
    }
    expect(s.proposeIsrChange(now + lag)).toBeUndefined();
  });

  it('counts the previous answer’s time when the follower flushed all it gave, though the leader moved on', () => {
    const s = state({ replicas: [1, 2], isr: [1, 2] });
    s.recordFetch(2, 0, 0, 100, 0, 2000); // answered at 2000 with the log end 100
    s.recordFetch(2, 100, 100, 200, 100, 9000); // flushed what that answer gave: caught up as of 2000
    expect(s.follower(2)!.lastCaughtUpMs).toBe(2000);
    expect(s.proposeIsrChange(2000 + lag)).toBeUndefined();
    expect(s.proposeIsrChange(2000 + lag + 1)?.removed).toEqual([2]);
  });

  it('removes a follower whose fetched but unflushed bytes do not count (a stopped disk)', () => {
    const s = state({ replicas: [1, 2], isr: [1, 2] });
    s.recordFetch(2, 100, 0, 100, 100, 2000); // fetched everything, flushed nothing
    s.recordFetch(2, 100, 0, 100, 100, 5000);
    expect(s.follower(2)!.lastCaughtUpMs).toBe(1000);
    expect(s.proposeIsrChange(1000 + lag + 1)?.removed).toEqual([2]);
  });

  it('removes at once an ISR follower that reports a flushed end below the high watermark', () => {
    const s = state({ replicas: [1, 2, 3], isr: [1, 2, 3] });
    s.recordFetch(2, 100, 100, 100, 100, 1001);
    s.recordFetch(3, 100, 100, 100, 100, 1001);
    expect(s.highWatermark).toBe(100);
    s.recordFetch(3, 0, 0, 100, 100, 1002); // its log was lost
    expect(s.proposeIsrChange(1003)).toEqual({ isr: [1, 2], added: [], removed: [3] });
  });

  it('never removes the leader', () => {
    const s = state({ replicas: [1], isr: [1] });
    expect(s.proposeIsrChange(1_000_000)).toBeUndefined();
    expect(s.isr).toEqual([1]);
  });

  it('proposes nothing while a write is pending', () => {
    const s = state({ replicas: [1, 2], isr: [1, 2] });
    s.beginIsrChange([1]);
    expect(s.proposeIsrChange(1_000_000)).toBeUndefined();
  });
});

describe('LeaderState: ISR expand (docs/replication.md §9.4)', () => {
  it('adds a follower once its flushed end reaches the high watermark and it fetched past the epoch start', () => {
    const s = state({ replicas: [1, 2, 3], isr: [1, 2], epochStartOffset: 50 });
    s.recordFetch(2, 300, 300, 300, 300, 1001);
    expect(s.highWatermark).toBe(300);
    s.recordFetch(3, 200, 200, 300, 300, 1002);
    expect(s.proposeIsrChange(1003)).toBeUndefined(); // below the HW
    s.recordFetch(3, 300, 290, 300, 300, 1004);
    expect(s.proposeIsrChange(1005)).toBeUndefined(); // fetched, not flushed
    s.recordFetch(3, 300, 300, 300, 300, 1006);
    expect(s.proposeIsrChange(1007)).toEqual({ isr: [1, 2, 3], added: [3], removed: [] });
  });

  it('waits for a follower to fetch past the start of the leader’s epoch (it has truncated)', () => {
    const s = state({ replicas: [1, 2], isr: [1], epochStartOffset: 500, highWatermark: 100, leaderFlushedEnd: 600 });
    expect(s.highWatermark).toBe(100);
    s.recordFetch(2, 400, 400, 600, 600, 1001);
    expect(s.highWatermark).toBe(600); // the leader alone in the ISR
    s.recordFetch(2, 600, 600, 600, 600, 1002);
    expect(s.proposeIsrChange(1003)?.added).toEqual([2]);
  });

  it('a follower that stopped fetching is not added back on its last positions once removed (no shrink-expand loop)', () => {
    // An idle partition: the high watermark stays at the follower's last flushed end.
    const s = state({ replicas: [1, 2], isr: [1, 2] });
    s.recordFetch(2, 0, 0, 0, 0, 1001);
    const shrink = s.proposeIsrChange(1001 + lag + 1)!;
    expect(shrink.removed).toEqual([2]);
    s.beginIsrChange(shrink.isr);
    s.finishIsrChange(shrink.isr);
    expect(s.proposeIsrChange(1001 + lag + 2)).toBeUndefined();
    expect(s.proposeIsrChange(1001 + 10 * lag)).toBeUndefined();
    s.recordFetch(2, 0, 0, 0, 0, 1001 + 10 * lag); // it fetches again, caught up
    expect(s.proposeIsrChange(1001 + 10 * lag + 1)?.added).toEqual([2]);
  });

  it('a follower not caught up within replica.lag.time.max.ms is not added, however far it got', () => {
    const s = state({ replicas: [1, 2], isr: [1], leaderFlushedEnd: 300 });
    s.recordFetch(2, 0, 0, 300, 300, 1001); // answered with the log end 300
    s.recordFetch(2, 300, 300, 600, 300, 1000 + lag + 500); // flushed all the first answer gave: caught up as of 1001
    expect(s.highWatermark).toBe(300);
    expect(s.proposeIsrChange(1000 + lag + 501)).toBeUndefined();
    s.recordFetch(2, 600, 600, 600, 600, 1000 + lag + 600);
    expect(s.proposeIsrChange(1000 + lag + 601)?.added).toEqual([2]);
  });

  it('does not add back a follower removed for lagging whose last positions still meet the high watermark (a dead follower of an idle partition)', () => {
    const s = state({ replicas: [1, 2, 3], isr: [1, 2, 3] });
    s.recordFetch(2, 0, 0, 0, 0, 1001);
    s.recordFetch(3, 0, 0, 0, 0, 1001);
    s.recordFetch(2, 0, 0, 0, 0, 1001 + lag); // 3 stopped fetching
    const shrink = s.proposeIsrChange(1002 + lag);
    expect(shrink).toEqual({ isr: [1, 2], added: [], removed: [3] });
    s.beginIsrChange(shrink!.isr);
    s.finishIsrChange(shrink!.isr);
    expect(s.proposeIsrChange(1003 + lag)).toBeUndefined();
    s.recordFetch(3, 0, 0, 0, 0, 1004 + lag); // it fetches again, caught up
    expect(s.proposeIsrChange(1005 + lag)).toEqual({ isr: [1, 2, 3], added: [3], removed: [] });
  });

  it('a follower that never fetched in this epoch is not added', () => {
    const s = state({ isr: [1] });
    expect(s.proposeIsrChange(1001)).toBeUndefined();
  });

  it('keeps replica-list order and combines a shrink and an expand', () => {
    const s = state({ replicas: [3, 1, 2], isr: [1, 3] });
    s.recordFetch(2, 0, 0, 0, 0, 1001);
    const p = s.proposeIsrChange(1000 + lag + 1)!;
    expect(p.isr).toEqual([1, 2]);
    expect(p.added).toEqual([2]);
    expect(p.removed).toEqual([3]);
  });

  it('refuses fetches from a broker that is not a replica', () => {
    expect(() => state().recordFetch(9, 0, 0, 0, 0, 1001)).toThrow(RangeError);
  });
});
