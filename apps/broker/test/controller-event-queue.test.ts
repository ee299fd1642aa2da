/** The controller's event queue (docs/replication.md §5.2): one event at a time, in order. */
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { EventQueue } from '../src/controller/event-queue.js';

describe('EventQueue', () => {
  it('runs events one at a time in the order put, and goes on after one that throws', async () => {
    const q = new EventQueue(pino({ level: 'silent' }));
    const log: string[] = [];
    let running = 0;
    const event = (name: string, ms: number, fail = false) => ({
      name,
      async run() {
        running++;
        expect(running).toBe(1);
        log.push(`start ${name}`);
        await new Promise((r) => setTimeout(r, ms));
        log.push(`end ${name}`);
        running--;
        if (fail) throw new Error('boom');
      },
    });
    q.put(event('a', 20));
    q.put(event('b', 1, true));
    q.put(event('c', 5));
    await q.idle();
    expect(log).toEqual(['start a', 'end a', 'start b', 'end b', 'start c', 'end c']);
  });
  it('clear drops the events not started yet', async () => {
    const q = new EventQueue(pino({ level: 'silent' }));
    const log: string[] = [];
    q.put({ name: 'a', run: async () => { await new Promise((r) => setTimeout(r, 5)); log.push('a'); q.clear(); } });
    q.put({ name: 'b', run: async () => void log.push('b') });
    await q.idle();
    expect(log).toEqual(['a']);
  });
});
