// One pino logger for the process, to stdout; the level comes from --log-level. --log-format: JSON lines
// for collectors, text lines for people (log-text.ts); auto picks text when stdout is a terminal.
import { destination, pino, type Logger } from 'pino';
import { textDestination } from './log-text.js';

export type { Logger };

export const logLevels = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export const logFormats = ['auto', 'text', 'json'] as const;
export type LogFormat = (typeof logFormats)[number];

export function createLogger(level: string, name = 'spoke-agent', format: LogFormat = 'json'): Logger {
  const text = format === 'text' || (format === 'auto' && process.stdout.isTTY === true);
  if (!text) return pino({ name, level, base: { pid: process.pid } }); // pino's own line, untouched: the cheap path
  // NO_COLOR (no-color.org): any non-empty value turns colours off. No name and pid in text lines (one
  // process, one terminal), so a logged field called `name` (a DNS query's) is not shadowed.
  const colour = process.stdout.isTTY === true && !process.env.NO_COLOR;
  return pino({ level, base: {} }, textDestination(destination({ dest: 1, sync: true }), colour));
}
