/**
 * @klog/retry: the one retry and backoff helper of klog (docs/architecture.md, "Retries"),
 * after kafkajs's `src/retry`: exponential delays with jitter, and a `retriable` flag on errors
 * that says whether trying again can help.
 *
 * - {@link backoffDelayMs}: the delay before attempt `n`, as a pure function.
 * - {@link Backoff}: the same delays for a loop that keeps its own state (a fetch loop, a
 *   reconnect loop): {@link Backoff.next} after a failure, {@link Backoff.reset} after a success.
 * - {@link retry}: runs an async function again after each retriable failure, until it
 *   succeeds, a failure is not retriable, the attempts or the time run out, or a signal aborts.
 * - {@link sleep}: the abortable wait they use.
 * - {@link waitFor}: polls a condition until it holds or a deadline passes (what tests wait with).
 */

/** How delays grow; all durations in ms. */
export interface BackoffOptions {
  /** Delay before the first retry, ms (≥ 0). */
  readonly initialMs: number;
  /** Largest delay, ms (≥ initialMs). */
  readonly maxMs: number;
  /** Growth per attempt. Default 2. */
  readonly factor?: number;
  /**
   * Fraction of each delay drawn at random, 0 to 1: a delay `d` becomes uniform in
   * `[d × (1 − jitter), d]`, so that clients that failed together do not retry together.
   * Default 0.5; 0 gives the exact exponential delays.
   */
  readonly jitter?: number;
}

/** An error that says whether trying the same thing again can succeed (kafkajs's `retriable`). */
export interface RetriableFlag {
  readonly retriable: boolean;
}

/** True when `error` carries `retriable: true` (see {@link RetriableFlag}). */
export function isRetriable(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as Partial<RetriableFlag>).retriable === true;
}

function checkOptions(o: BackoffOptions): void {
  const factor = o.factor ?? 2;
  const jitter = o.jitter ?? 0.5;
  if (!(o.initialMs >= 0) || !(o.maxMs >= o.initialMs)) throw new RangeError(`backoff initialMs ${o.initialMs} and maxMs ${o.maxMs} must satisfy 0 ≤ initialMs ≤ maxMs`);
  if (!(factor >= 1)) throw new RangeError(`backoff factor ${factor} must be ≥ 1`);
  if (!(jitter >= 0 && jitter <= 1)) throw new RangeError(`backoff jitter ${jitter} must be within [0, 1]`);
}

/**
 * The delay before retry number `attempt` (0 for the first), ms:
 * `min(initialMs × factor^attempt, maxMs)`, jittered as {@link BackoffOptions.jitter} says.
 * @param random a source of numbers in [0, 1) (tests pass a fixed one)
 * @throws RangeError for options out of range
 */
export function backoffDelayMs(attempt: number, options: BackoffOptions, random: () => number = Math.random): number {
  checkOptions(options);
  const exact = Math.min(options.initialMs * (options.factor ?? 2) ** Math.min(Math.max(attempt, 0), 64), options.maxMs);
  const jitter = options.jitter ?? 0.5;
  return Math.round(exact * (1 - jitter * random()));
}

/** The delays of {@link backoffDelayMs} for a loop that keeps its own state. */
export class Backoff {
  private failures = 0;

  /** @throws RangeError for options out of range */
  constructor(private readonly options: BackoffOptions) {
    checkOptions(options);
  }

  /** Failures since the last {@link reset}. */
  get attempts(): number {
    return this.failures;
  }

  /** The delay to wait after one more failure, ms; grows with each call until {@link reset}. */
  next(): number {
    return backoffDelayMs(this.failures++, this.options);
  }

  /** After a success: the next failure waits `initialMs` again. */
  reset(): void {
    this.failures = 0;
  }
}

/** Options of {@link retry}; durations in ms. */
export interface RetryOptions extends BackoffOptions {
  /** Most retries after the first attempt. Default unbounded (then give `deadlineMs` or `signal`). */
  readonly retries?: number;
  /** Stop retrying once this much time has passed since the first attempt, ms. Default none. */
  readonly deadlineMs?: number;
  /** Stops the waits: the last error is thrown at once. */
  readonly signal?: AbortSignal;
  /** Which errors are worth another attempt. Default {@link isRetriable}. */
  readonly retriable?: (error: unknown) => boolean;
  /** Called before each wait, e.g. to log the failure. */
  readonly onRetry?: (info: { readonly error: unknown; readonly attempt: number; readonly delayMs: number }) => void;
}

/**
 * Runs `fn` (given the attempt number, 0 first) until it resolves. A failure is retried after
 * a {@link backoffDelayMs} wait when `retriable(error)` holds and neither `retries`, nor
 * `deadlineMs` (a wait is cut to what is left of it), nor `signal` ends it; otherwise the
 * error is thrown as it is.
 */
export async function retry<T>(fn: (attempt: number) => Promise<T>, options: RetryOptions): Promise<T> {
  const backoff = new Backoff(options);
  const retriable = options.retriable ?? isRetriable;
  const deadline = options.deadlineMs === undefined ? Infinity : Date.now() + options.deadlineMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (error) {
      const left = deadline - Date.now();
      if (!retriable(error) || attempt >= (options.retries ?? Infinity) || left <= 0 || options.signal?.aborted) throw error;
      const delayMs = Math.min(backoff.next(), left);
      options.onRetry?.({ error, attempt, delayMs });
      if (!(await sleep(delayMs, options.signal))) throw error;
    }
  }
}

/** Waits `ms`; resolves false early (and true otherwise) when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      resolve(false);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Polls `check` every `intervalMs` ms until it returns true (a throw from it passes through).
 * @param what the condition, named in the error
 * @param timeoutMs how long to poll, ms; default 30 000
 * @throws Error `timed out after <timeoutMs> ms waiting for <what>` when it is still false then
 */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 30_000, intervalMs = 50): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(intervalMs);
  }
}
