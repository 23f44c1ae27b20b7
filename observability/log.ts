// One pino logger for the process. JSON to stdout; the level comes from --log-level.
import { pino, type Logger } from 'pino';

export type { Logger };

export const logLevels = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;

export function createLogger(level: string, name = 'spoke-agent'): Logger {
  return pino({ name, level, base: { pid: process.pid } });
}
