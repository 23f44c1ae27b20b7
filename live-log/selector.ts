// Field selectors over a live log, in the API server's syntax (`kubectl get --field-selector`):
// terms separated by commas, each `field=value`, `field==value` or `field!=value`, all of which must
// hold; `\,`, `\=` and `\\` escape those characters in a value, and an unescaped `,` or `=` in a
// value is an error, as upstream. Each log declares its fields: the object's paths (spec.name,
// status.rcode, ...), their short aliases, and how values compare. Pure.
import type { LiveEntry, LiveLog } from './live-log.js';

export interface Field<E> {
  aliases: string[];
  value: (e: E, objectName: string) => string;
  normalize: (v: string) => string;
}

export type Fields<E> = Record<string, Field<E>>;

export const exact = (v: string) => v;
export const upper = (v: string) => v.toUpperCase();
export const lower = (v: string) => v.toLowerCase();

/** metadata.name, which every log's objects have. */
export const nameField: Field<unknown> = { aliases: [], value: (_e, objectName) => objectName, normalize: exact };

/** Every field a selector may name, paths first. */
export const selectableFields = (fields: Fields<never>) => [
  ...Object.keys(fields),
  ...Object.values(fields).flatMap((f) => f.aliases),
];

export type Selector<E> = (e: E, objectName: string) => boolean;

/** Splits on `sep` where it is not escaped with a backslash. */
function splitUnescaped(text: string, sep: string): string[] {
  const parts: string[] = [];
  let current = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '\\' && i + 1 < text.length) {
      current += c + text[++i]!;
    } else if (c === sep) {
      parts.push(current);
      current = '';
    } else current += c;
  }
  parts.push(current);
  return parts;
}

function unescapeValue(value: string): string | { error: string } {
  let out = '';
  for (let i = 0; i < value.length; i++) {
    const c = value[i]!;
    if (c === '\\') {
      const next = value[++i];
      if (next !== '\\' && next !== ',' && next !== '=')
        return { error: `invalid escape sequence "\\${next ?? ''}" (only \\\\, \\, and \\= are)` };
      out += next;
    } else if (c === ',' || c === '=') return { error: `unescaped "${c}" in the value (write \\${c})` };
    else out += c;
  }
  return out;
}

/** A selector over `fields`, or what is wrong with the text. Empty text selects everything. */
export function parseSelector<E>(fields: Fields<E>, text: string): Selector<E> | { error: string } {
  const tests: Selector<E>[] = [];
  for (const term of splitUnescaped(text, ',')) {
    if (term.trim() === '') continue;
    const m = /^([^!=]*?)(!=|==|=)(.*)$/s.exec(term);
    if (!m) return { error: `"${term}": want FIELD=VALUE, FIELD==VALUE or FIELD!=VALUE` };
    const [, rawKey, op, rawValue] = m as unknown as [string, string, string, string];
    const key = rawKey.trim();
    const path = key in fields ? key : Object.keys(fields).find((p) => fields[p]!.aliases.includes(key));
    if (path === undefined)
      return {
        error: `field label not supported: ${key} (supported: ${selectableFields(fields as Fields<never>).join(', ')})`,
      };
    const value = unescapeValue(rawValue.trim());
    if (typeof value !== 'string') return { error: `"${term}": ${value.error}` };
    const field = fields[path]!;
    const wanted = field.normalize(value);
    const equal = (e: E, objectName: string) => field.normalize(field.value(e, objectName)) === wanted;
    tests.push(op === '!=' ? (e, n) => !equal(e, n) : equal);
  }
  return (e, objectName) => tests.every((t) => t(e, objectName));
}

/** The entries of `liveLog` that `text` selects (each by its name there), or what is wrong with the text. */
export function entryFilter<E extends LiveEntry>(
  fields: Fields<E>,
  text: string,
  liveLog: Pick<LiveLog<E>, 'nameOf'>,
): ((e: E) => boolean) | { error: string } {
  const selector = parseSelector(fields, text);
  return typeof selector === 'function' ? (e) => selector(e, liveLog.nameOf(e)) : selector;
}
