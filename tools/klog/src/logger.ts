/** The CLI's pino logger: JSON lines on stderr, so that stdout carries only data. */
import { pino, type Logger } from 'pino';

/** Level from `KLOG_LOG_LEVEL`, default `warn`. */
export function createLogger(name: string): Logger {
  return pino({ name, level: process.env.KLOG_LOG_LEVEL ?? 'warn' }, pino.destination({ dest: 2, sync: true }));
}
