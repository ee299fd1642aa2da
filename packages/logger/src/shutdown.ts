/**
 * The clean shutdown of klog's long-running commands (`klog-broker`, `klog-mirror-maker`):
 * the first SIGTERM or SIGINT logs why, closes the service and exits 0, or 1 when closing
 * failed (logged); a signal that arrives while it closes is ignored, so a second Ctrl-C does
 * not cut the flush short.
 */
import type { Logger } from './index.js';

/** The signals that ask a long-running command to shut down cleanly. */
export const shutdownSignals = ['SIGTERM', 'SIGINT'] as const;

/**
 * Installs the handlers of {@link shutdownSignals}: on the first, logs `message` (info, with
 * the signal) and calls `close`, then exits the process 0 when it resolves, 1 when it rejects
 * (the error logged as `shutdown failed`). Call it once per process.
 * @param message what the shutdown does, as logged (default `shutting down`)
 */
export function closeOnSignals(logger: Logger, close: () => Promise<void>, message = 'shutting down'): void {
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, message);
    close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  for (const signal of shutdownSignals) process.on(signal, () => stop(signal));
}
