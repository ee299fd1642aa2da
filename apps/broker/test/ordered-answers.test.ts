/** Answers written in request order while later requests are handled (ordered-answers.ts). */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { OrderedAnswers, type AnswerWriter } from '../src/ordered-answers.js';

/** A promise with its resolve and reject. */
function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (err: unknown) => void } {
  // Both are replaced at once: a promise's executor runs synchronously.
  let resolve: (v: T) => void = () => {};
  let reject: (err: unknown) => void = () => {};
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets promise callbacks and timers of a few milliseconds run. */
const settle = (): Promise<void> => new Promise((r) => setTimeout(r, 10));

/** A writer that records what it is given. */
function recorder(): AnswerWriter<string> & { written: string[]; failures: unknown[] } {
  const written: string[] = [];
  const failures: unknown[] = [];
  return { written, failures, write: (a) => void written.push(a), failed: (err) => void failures.push(err) };
}

/** Whether `p` has settled by now (after the callbacks already queued have run). */
async function isSettled(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void p.then(() => (settled = true), () => (settled = true));
  await settle();
  return settled;
}

describe('OrderedAnswers', () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (err: unknown): void => void unhandled.push(err);
  beforeEach(() => {
    unhandled.length = 0;
    process.on('unhandledRejection', onUnhandled);
  });
  afterEach(() => {
    process.off('unhandledRejection', onUnhandled);
  });

  it('writes answers in the order added when later ones are ready first', async () => {
    const w = recorder();
    const answers = new OrderedAnswers(10, w);
    const a = deferred<string>();
    const b = deferred<string>();
    answers.add(a.promise);
    answers.add(b.promise);
    answers.add('c');
    b.resolve('b');
    await settle();
    expect(w.written).toEqual([]);
    expect(answers.waiting).toBe(3);
    a.resolve('a');
    await answers.allWritten;
    expect(w.written).toEqual(['a', 'b', 'c']);
    expect(answers.waiting).toBe(0);
  });

  it('writes one answer at a time: the next waits for the write before it', async () => {
    const log: string[] = [];
    const slow = deferred<void>();
    const answers = new OrderedAnswers<string>(10, {
      write: async (a) => {
        log.push(`start ${a}`);
        if (a === 'a') await slow.promise;
        log.push(`end ${a}`);
      },
      failed: () => {},
    });
    answers.add('a');
    answers.add('b');
    await settle();
    expect(log).toEqual(['start a']);
    slow.resolve();
    await answers.allWritten;
    expect(log).toEqual(['start a', 'end a', 'start b', 'end b']);
  });

  it('is full while max answers wait, until they are written', async () => {
    const w = recorder();
    const answers = new OrderedAnswers(2, w);
    const a = deferred<string>();
    const b = deferred<string>();
    answers.add(a.promise);
    expect(answers.full).toBe(false);
    answers.add(b.promise);
    expect(answers.full).toBe(true);
    const room = answers.allWritten; // what a connection waits for while full
    expect(await isSettled(room)).toBe(false);
    a.resolve('a');
    expect(await isSettled(room)).toBe(false);
    b.resolve('b');
    await room;
    expect(answers.full).toBe(false);
    expect(answers.waiting).toBe(0);
    expect(w.written).toEqual(['a', 'b']);
  });

  it('allWritten settles once every answer added before it is written, not those added after', async () => {
    const w = recorder();
    const answers = new OrderedAnswers(10, w);
    expect(await isSettled(answers.allWritten)).toBe(true);
    const a = deferred<string>();
    answers.add(a.promise);
    answers.add('b');
    const both = answers.allWritten;
    answers.add(deferred<string>().promise); // never ready
    expect(await isSettled(both)).toBe(false);
    a.resolve('a');
    await both;
    expect(w.written).toEqual(['a', 'b']);
    expect(answers.waiting).toBe(1);
    expect(await isSettled(answers.allWritten)).toBe(false);
  });

  it('an answer that rejects behind earlier ones is released and failed in its turn, not unhandled, and later answers are written', async () => {
    const w = recorder();
    const answers = new OrderedAnswers(10, w);
    const a = deferred<string>();
    const b = deferred<string>();
    const released: string[] = [];
    answers.add(a.promise);
    answers.add(b.promise, () => void released.push('b'));
    answers.add('c');
    const boom = new Error('flush failed');
    b.reject(boom);
    await settle();
    expect(unhandled).toEqual([]);
    expect(released).toEqual([]); // not before its turn
    expect(w.failures).toEqual([]);
    a.resolve('a');
    await answers.allWritten; // resolves, does not reject
    expect(w.written).toEqual(['a', 'c']);
    expect(released).toEqual(['b']);
    expect(w.failures).toEqual([boom]);
    expect(answers.waiting).toBe(0);
    await settle();
    expect(unhandled).toEqual([]);
  });

  it('a write that throws is reported and the answers after it are still written', async () => {
    const written: string[] = [];
    const failures: unknown[] = [];
    const boom = new Error('write failed');
    const answers = new OrderedAnswers<string>(10, {
      write: async (a) => {
        if (a === 'a') throw boom;
        written.push(a);
      },
      failed: (err) => void failures.push(err),
    });
    answers.add('a');
    answers.add(Promise.resolve('b'));
    await answers.allWritten;
    expect(failures).toEqual([boom]);
    expect(written).toEqual(['b']);
    expect(answers.waiting).toBe(0);
    await settle();
    expect(unhandled).toEqual([]);
  });
});
