/**
 * The controller's one event queue (docs/replication.md §5.2): events are handled one at a
 * time, in the order they were put, so the controller's view never changes under a decision it
 * is making. {@link EventQueue.clear} drops every event not started yet (a controller that
 * resigns drops its queued work, §5.1).
 */
import type { Logger } from 'pino';

/** One unit of controller work: a name for the logs, and the work. */
export interface ControllerEvent {
  readonly name: string;
  run(): Promise<void>;
}

/** A FIFO of {@link ControllerEvent}s run one at a time. An event that throws is logged; the next runs. */
export class EventQueue {
  readonly #queue: ControllerEvent[] = [];
  #running = false;
  #idle: (() => void)[] = [];

  constructor(private readonly logger: Logger) {}

  /** Events waiting (the running one not counted). */
  get size(): number {
    return this.#queue.length;
  }

  /** Queues `event`; it runs after every event put before it. */
  put(event: ControllerEvent): void {
    this.#queue.push(event);
    if (!this.#running) void this.#drain();
  }

  /** Drops every event not started yet. */
  clear(): void {
    this.#queue.length = 0;
  }

  /** Resolves once the queue is empty and no event runs. */
  idle(): Promise<void> {
    if (!this.#running && this.#queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  async #drain(): Promise<void> {
    this.#running = true;
    try {
      for (let event = this.#queue.shift(); event !== undefined; event = this.#queue.shift()) {
        try {
          await event.run();
        } catch (err) {
          this.logger.error({ err, event: event.name }, 'controller event failed');
        }
      }
    } finally {
      this.#running = false;
      const waiting = this.#idle;
      this.#idle = [];
      for (const resolve of waiting) resolve();
    }
  }
}
