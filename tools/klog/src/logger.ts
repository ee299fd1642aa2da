/** The CLI's pino logger: on stderr, so that stdout carries only data (see @klog/logger/pino). */
import { createLogger as createKlogLogger, type LogFormat, logFormats, type LogLevel, logLevels } from '@klog/logger/pino';
import type { Logger } from 'pino';

/**
 * Level from `KLOG_LOG_LEVEL` (default `warn`), format from `KLOG_LOG_FORMAT` (`auto`, the
 * default: pretty on a terminal, JSON otherwise; `json`; `pretty`). Unknown values fall back to
 * the defaults.
 */
export function createLogger(name: string): Logger {
  const level = (logLevels as readonly string[]).includes(process.env.KLOG_LOG_LEVEL ?? '') ? (process.env.KLOG_LOG_LEVEL as LogLevel) : 'warn';
  const format = (logFormats as readonly string[]).includes(process.env.KLOG_LOG_FORMAT ?? '') ? (process.env.KLOG_LOG_FORMAT as LogFormat) : 'auto';
  return createKlogLogger({ name, level, format, fd: 2 });
}
