/**
 * @klog/logger: the one logger shape klog's libraries write to. A pino logger satisfies it;
 * every entry is a structured object plus a message. The commands build theirs with
 * `createLogger` from `@klog/logger/pino`; libraries take any {@link Logger} and default to
 * {@link silentLogger}.
 */

/** What klog's libraries log through: pino's methods, each a structured object plus a message. */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** A logger that drops everything; the default when none is given. */
export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
};
