// Log lines for people: pino's JSON line rendered as `HH:MM:SS.mmm LEVEL message key=value ...`, with
// ANSI colours when asked (a terminal without NO_COLOR). Only the text format pays for the JSON.parse;
// the JSON format writes pino's line untouched.
import type { DestinationStream } from 'pino';

const levels: Record<number, { label: string; colour: string }> = {
  10: { label: 'TRACE', colour: '90' },
  20: { label: 'DEBUG', colour: '36' },
  30: { label: 'INFO ', colour: '32' },
  40: { label: 'WARN ', colour: '33' },
  50: { label: 'ERROR', colour: '31' },
  60: { label: 'FATAL', colour: '1;31' },
};

/** Fields shown in the prefix. */
const prefixFields = new Set(['level', 'time', 'msg']);

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

/** Control characters escaped: a logged name that came off the network cannot drive the terminal. */
const escapeControls = (text: string) => text.replace(/\p{Cc}/gu, (c) => JSON.stringify(c).slice(1, -1));

/** Bare when unambiguous, else quoted (a string with spaces, quotes, `=` or control characters; objects as JSON). */
function renderValue(value: unknown): string {
  if (typeof value === 'string') return /^[^\s"'=\\\p{Cc}]+$/u.test(value) ? value : JSON.stringify(value);
  return JSON.stringify(value) ?? String(value);
}

/** pino's err serializer output: `{ type, message, stack }`. */
function isSerializedError(value: unknown): value is { message: string; stack?: string } {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { message?: unknown }).message === 'string' &&
    typeof (value as { type?: unknown }).type === 'string'
  );
}

/** One JSON log line to one text line (plus an error's stack, indented, below it). */
export function formatLine(line: string, colour: boolean): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return line.endsWith('\n') ? line : `${line}\n`; // not a pino line: as it came
  }
  const paint = (code: string, text: string) => (colour ? `\x1b[${code}m${text}\x1b[0m` : text);
  const t = new Date(typeof entry.time === 'number' ? entry.time : Date.now());
  const time = `${pad(t.getHours())}:${pad(t.getMinutes())}:${pad(t.getSeconds())}.${pad(t.getMilliseconds(), 3)}`;
  const level = levels[entry.level as number] ?? { label: String(entry.level), colour: '0' };
  let out = `${paint('2', time)} ${paint(level.colour, level.label)}`;
  if (entry.msg !== undefined) out += ` ${escapeControls(String(entry.msg))}`;
  let stacks = '';
  for (const [key, value] of Object.entries(entry)) {
    if (prefixFields.has(key)) continue;
    const shown = isSerializedError(value) ? value.message : value;
    out += ` ${paint('2', `${key}=`)}${renderValue(shown)}`;
    if (isSerializedError(value) && value.stack)
      stacks += value.stack
        .split('\n')
        .map((l) => `${paint('2', `    ${escapeControls(l)}`)}\n`)
        .join('');
  }
  return `${out}\n${stacks}`;
}

/** A pino destination that writes text lines to `out`. */
export function textDestination(out: { write(text: string): unknown }, colour: boolean): DestinationStream {
  return { write: (line: string) => void out.write(formatLine(line, colour)) };
}
