/**
 * How clients ride through a leader change on a replicated topic (docs/replication.md §13.2):
 * which failures mean "the leader moved or is moving" (refresh the leader, then try again), the
 * bounds of those retries, and the one loop that runs them through @klog/retry.
 *
 * Retried: `NotLeaderForPartition` (20), `LeaderNotAvailable` (21), `NotEnoughReplicas` (22),
 * `NotEnoughReplicasAfterAppend` (23), `UnknownLeaderEpoch` (25), and a lost connection
 * ({@link KlogConnectionError}). Back-off: exponential from 100 ms to 1,000 ms, each delay drawn
 * in its last 20 % (jitter 0.2), for at most `retryTimeoutMs` (default 30,000) and `maxRetries`
 * (default 30); then the last error reaches the application, naming the topic, the partition,
 * the last leader tried and the last code. `NotEnoughReplicas` and `NotEnoughReplicasAfterAppend`
 * (the leader is there and answers; its ISR is below `min.insync.replicas`) are retried for at
 * most `notEnoughReplicasTimeoutMs` (default 10,000) from the first of an unbroken run of them.
 * Retries are counted by the code they followed ({@link RetryTally}).
 */
import { ErrorCode, errorCodeName } from '@klog/protocol';
import { type BackoffOptions, retry } from '@klog/retry';
import { KlogBrokerError, KlogConnectionError, KlogError } from './errors.js';

/** The wire codes that mean the partition's leader must be looked up again (docs/replication.md §13.2). */
export const leaderChangeCodes: ReadonlySet<number> = new Set<number>([
  ErrorCode.NotLeaderForPartition,
  ErrorCode.LeaderNotAvailable,
  ErrorCode.NotEnoughReplicas,
  ErrorCode.NotEnoughReplicasAfterAppend,
  ErrorCode.UnknownLeaderEpoch,
]);

/** The codes of a leader whose ISR is below `min.insync.replicas` (docs/replication.md §11): retried within `notEnoughReplicasTimeoutMs`. */
export const shortIsrCodes: ReadonlySet<number> = new Set<number>([ErrorCode.NotEnoughReplicas, ErrorCode.NotEnoughReplicasAfterAppend]);

/** True for a refusal with a code of {@link shortIsrCodes}. */
export function isShortIsr(error: unknown): boolean {
  return error instanceof KlogBrokerError && shortIsrCodes.has(error.code);
}

/** True for a failure a leader refresh and a retry may cure: a code of {@link leaderChangeCodes}, or a lost connection. */
export function isLeaderChange(error: unknown): boolean {
  if (error instanceof KlogConnectionError) return true;
  return error instanceof KlogBrokerError && leaderChangeCodes.has(error.code);
}

/** Default most ms a client retries one request across leader changes (docs/replication.md §13.2). */
export const defaultRetryTimeoutMs = 30_000;
/** Default most retries of one request across leader changes. */
export const defaultMaxRetries = 30;
/**
 * Default most ms a client retries one request while its leader answers `NotEnoughReplicas`
 * (docs/replication.md §13.2): `replica.lag.time.max.ms`'s default. A live follower rejoins the
 * ISR as soon as it has caught up (§9.4); one not back by then is down or stuck, which a retry
 * does not cure.
 */
export const defaultNotEnoughReplicasTimeoutMs = 10_000;
/** The back-off between those retries: 100 ms doubling to 1,000 ms, jitter 0.2. */
export const leaderRetryBackoff: BackoffOptions = { initialMs: 100, maxMs: 1000, factor: 2, jitter: 0.2 };

/** The bounds of the retries across leader changes; both are client options. */
export interface LeaderRetryOptions {
  /** Most ms to go on retrying one request, from its first failure. Default 30,000. */
  readonly retryTimeoutMs?: number;
  /** Most retries of one request. Default 30. */
  readonly maxRetries?: number;
  /**
   * Most ms to go on retrying one request while it is refused with `NotEnoughReplicas` or
   * `NotEnoughReplicasAfterAppend`, from the first of an unbroken run of them (never beyond
   * `retryTimeoutMs`). Default 10,000.
   */
  readonly notEnoughReplicasTimeoutMs?: number;
}

/** Checks {@link LeaderRetryOptions}. @throws RangeError for a negative or non-integer bound */
export function checkLeaderRetryOptions(o: LeaderRetryOptions): void {
  if (o.retryTimeoutMs !== undefined && !(Number.isFinite(o.retryTimeoutMs) && o.retryTimeoutMs >= 0)) {
    throw new RangeError(`retryTimeoutMs ${o.retryTimeoutMs} must be ≥ 0`);
  }
  if (o.maxRetries !== undefined && !(Number.isInteger(o.maxRetries) && o.maxRetries >= 0)) {
    throw new RangeError(`maxRetries ${o.maxRetries} must be an integer ≥ 0`);
  }
  if (o.notEnoughReplicasTimeoutMs !== undefined && !(Number.isFinite(o.notEnoughReplicasTimeoutMs) && o.notEnoughReplicasTimeoutMs >= 0)) {
    throw new RangeError(`notEnoughReplicasTimeoutMs ${o.notEnoughReplicasTimeoutMs} must be ≥ 0`);
  }
}

/** The {@link LeaderRetryOptions} of `o` (a client's options), without the fields left undefined. */
export function leaderRetryOptionsOf(o: LeaderRetryOptions): LeaderRetryOptions {
  return {
    ...(o.retryTimeoutMs !== undefined ? { retryTimeoutMs: o.retryTimeoutMs } : {}),
    ...(o.maxRetries !== undefined ? { maxRetries: o.maxRetries } : {}),
    ...(o.notEnoughReplicasTimeoutMs !== undefined ? { notEnoughReplicasTimeoutMs: o.notEnoughReplicasTimeoutMs } : {}),
  };
}

/**
 * How long the failures of one request have been `NotEnoughReplicas` in a row (docs/replication.md
 * §13.2): {@link exhausted} says when to stop retrying them.
 */
export class ShortIsrWindow {
  #since = -1;
  constructor(
    /** `notEnoughReplicasTimeoutMs`. */
    readonly timeoutMs: number = defaultNotEnoughReplicasTimeoutMs,
  ) {}

  /**
   * Takes a failure at `nowMs` (ms) into account.
   * @returns true when it is ISR-short and the unbroken run of ISR-short failures it ends began `timeoutMs` or more ago
   */
  exhausted(error: unknown, nowMs: number): boolean {
    if (!isShortIsr(error)) {
      this.#since = -1;
      return false;
    }
    if (this.#since < 0) this.#since = nowMs;
    return nowMs - this.#since >= this.timeoutMs;
  }

  /** A request went through: the run is over. */
  reset(): void {
    this.#since = -1;
  }
}

/** The retries of a client, counted by the wire code they followed (−1: a lost connection), for its summary (docs/replication.md §13.2). */
export class RetryTally {
  readonly #byCode = new Map<number, number>();
  #total = 0;

  /** Counts one retry after a failure with `code`. */
  record(code: number): void {
    this.#byCode.set(code, (this.#byCode.get(code) ?? 0) + 1);
    this.#total++;
  }

  /** Retries so far. */
  get total(): number {
    return this.#total;
  }

  /** Retries so far by code (−1: a lost connection). */
  get byCode(): ReadonlyMap<number, number> {
    return this.#byCode;
  }
}

/**
 * `byCode` as a summary says it: `3 retries (2 NotLeaderForPartition, 1 connection lost)`, the
 * most frequent code first; '' when there were none.
 */
export function describeRetries(byCode: ReadonlyMap<number, number>): string {
  const entries = [...byCode].filter(([, n]) => n > 0).sort((a, b) => b[1] - a[1] || a[0] - b[0]);
  const total = entries.reduce((sum, [, n]) => sum + n, 0);
  if (total === 0) return '';
  const parts = entries.map(([code, n]) => `${n} ${code < 0 ? 'connection lost' : errorCodeName(code)}`);
  return `${total} retr${total === 1 ? 'y' : 'ies'} (${parts.join(', ')})`;
}

/** One retry ridden through, as a client reports it (one warn line per leader change, docs/replication.md §13.2). */
export interface LeaderRetryEvent {
  readonly topic: string;
  readonly partition: number;
  /** The broker id of the leader the failed attempt went to; −1 when none was known. */
  readonly leader: number;
  /** The wire code of the failure, or −1 for a lost connection. */
  readonly code: number;
  /** Retries of this request so far, this one included (1 for the first). */
  readonly attempt: number;
  readonly delayMs: number;
}

/**
 * The retries across leader changes ran out: the last error, with where it was and how long it
 * was tried. `cause` is the last failure itself.
 */
export class LeaderRetriesExhaustedError extends KlogError {
  override readonly name: string = 'LeaderRetriesExhaustedError';
  constructor(
    readonly topic: string,
    readonly partition: number,
    /** The last leader tried, −1 when none was known. */
    readonly leader: number,
    /** The last wire code, −1 for a lost connection. */
    readonly code: number,
    readonly retries: number,
    cause: unknown,
  ) {
    super(
      `topic ${topic} partition ${partition}: gave up after ${retries} retr${retries === 1 ? 'y' : 'ies'} ` +
        `(last leader ${leader < 0 ? 'none' : leader}, last error ${code < 0 ? 'connection lost' : errorCodeName(code)}): ${(cause as Error).message}`,
      { cause },
    );
  }
}

/** The wire code of a failure for reports: the broker's code, −1 for anything else. */
export function failureCode(error: unknown): number {
  return error instanceof KlogBrokerError ? error.code : -1;
}

/**
 * Runs `attempt` until it resolves, retrying leader changes (see the file comment). Before each
 * retry `refresh` looks the leader up again; `onRetry` hears of every retry.
 * @param attempt given the attempt number (0 first); returns the result, and says which leader it went to through `leader()`
 * @param leader the broker id the last attempt went to (−1 when none), for reports
 * @throws the attempt's error when it is not a leader change; {@link LeaderRetriesExhaustedError} when the bounds run out
 */
export async function withLeaderRetry<T>(
  where: { readonly topic: string; readonly partition: number },
  attempt: (n: number) => Promise<T>,
  options: LeaderRetryOptions & {
    readonly leader: () => number;
    readonly refresh: () => Promise<void>;
    readonly onRetry?: (e: LeaderRetryEvent) => void;
    readonly signal?: AbortSignal;
  },
): Promise<T> {
  let retries = 0;
  const shortIsr = new ShortIsrWindow(options.notEnoughReplicasTimeoutMs);
  try {
    return await retry(
      async (n) => {
        if (n > 0) await options.refresh();
        return attempt(n);
      },
      {
        ...leaderRetryBackoff,
        retries: options.maxRetries ?? defaultMaxRetries,
        deadlineMs: options.retryTimeoutMs ?? defaultRetryTimeoutMs,
        retriable: (error) => isLeaderChange(error) && !shortIsr.exhausted(error, Date.now()),
        ...(options.signal ? { signal: options.signal } : {}),
        onRetry: ({ error, attempt: n, delayMs }) => {
          retries = n + 1;
          options.onRetry?.({ ...where, leader: options.leader(), code: failureCode(error), attempt: n + 1, delayMs });
        },
      },
    );
  } catch (error) {
    if (retries > 0 && isLeaderChange(error)) {
      throw new LeaderRetriesExhaustedError(where.topic, where.partition, options.leader(), failureCode(error), retries, error);
    }
    throw error;
  }
}
