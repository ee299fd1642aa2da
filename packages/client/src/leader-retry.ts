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
 * the last leader tried and the last code.
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

/** True for a failure a leader refresh and a retry may cure: a code of {@link leaderChangeCodes}, or a lost connection. */
export function isLeaderChange(error: unknown): boolean {
  if (error instanceof KlogConnectionError) return true;
  return error instanceof KlogBrokerError && leaderChangeCodes.has(error.code);
}

/** Default most ms a client retries one request across leader changes (docs/replication.md §13.2). */
export const defaultRetryTimeoutMs = 30_000;
/** Default most retries of one request across leader changes. */
export const defaultMaxRetries = 30;
/** The back-off between those retries: 100 ms doubling to 1,000 ms, jitter 0.2. */
export const leaderRetryBackoff: BackoffOptions = { initialMs: 100, maxMs: 1000, factor: 2, jitter: 0.2 };

/** The bounds of the retries across leader changes; both are client options. */
export interface LeaderRetryOptions {
  /** Most ms to go on retrying one request, from its first failure. Default 30,000. */
  readonly retryTimeoutMs?: number;
  /** Most retries of one request. Default 30. */
  readonly maxRetries?: number;
}

/** Checks {@link LeaderRetryOptions}. @throws RangeError for a negative or non-integer bound */
export function checkLeaderRetryOptions(o: LeaderRetryOptions): void {
  if (o.retryTimeoutMs !== undefined && !(Number.isFinite(o.retryTimeoutMs) && o.retryTimeoutMs >= 0)) {
    throw new RangeError(`retryTimeoutMs ${o.retryTimeoutMs} must be ≥ 0`);
  }
  if (o.maxRetries !== undefined && !(Number.isInteger(o.maxRetries) && o.maxRetries >= 0)) {
    throw new RangeError(`maxRetries ${o.maxRetries} must be an integer ≥ 0`);
  }
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
      `topic ${topic} partition ${partition}: gave up after ${retries} retr${retries === 1 ? 'y' : 'ies'} across leader changes ` +
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
        retriable: isLeaderChange,
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
