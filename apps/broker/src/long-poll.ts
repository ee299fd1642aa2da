/**
 * The one wait of every long poll of the broker: klog's FETCH (docs/format.md §9), a follower's
 * REPLICA_FETCH (docs/replication.md §6.3) and the Kafka listener's Fetch (docs/kafka-protocol.md).
 *
 * The timer is a plain `setTimeout`, cleared when the wait ends, never `AbortSignal.timeout`: that
 * timer cannot be cleared (every answered poll would leave one behind, firing later and building
 * an abort error), and inside `AbortSignal.any` it is held only weakly, so a garbage collection
 * during the wait drops it unfired (Node 20) and the request, and its connection, wait for ever.
 */

/** Stops one subscription of a {@link longPoll}. */
export type Unsubscribe = () => void;

/**
 * Waits until `subscribe`'s `wake` is called, `ms` have passed, or `closing` aborts, whichever is
 * first; then clears the timer and the abort listener and calls every function `subscribe`
 * returned. `subscribe` is called once, at the start, and may call `wake` at once (the data is
 * already there). Rejects only with what `subscribe` throws.
 * @param closing the broker's or the connection's closing signal
 * @param ms longest wait, ms
 */
export async function longPoll(closing: AbortSignal, ms: number, subscribe: (wake: () => void) => readonly Unsubscribe[]): Promise<void> {
  if (closing.aborted) return;
  let timer: NodeJS.Timeout | undefined;
  let wake = (): void => {};
  let subscriptions: readonly Unsubscribe[] = [];
  try {
    await new Promise<void>((resolve) => {
      wake = resolve;
      timer = setTimeout(resolve, ms);
      closing.addEventListener('abort', wake, { once: true });
      subscriptions = subscribe(wake);
    });
  } finally {
    clearTimeout(timer);
    closing.removeEventListener('abort', wake);
    for (const unsubscribe of subscriptions) unsubscribe();
  }
}
