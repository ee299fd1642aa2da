/**
 * The logger shape the ZooKeeper layer writes to. A pino logger satisfies it; every entry
 * is a structured object plus a message.
 */
export interface ZkLogger {
  debug(obj: object, msg?: string): void;
  info(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

/** A logger that drops everything; the default when none is given. */
export const silentLogger: ZkLogger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
};
