// Field selectors over the query log, in the API server's syntax (`kubectl get --field-selector`):
// terms separated by commas, each `field=value`, `field==value` or `field!=value`, all of which must
// hold; `\,`, `\=` and `\\` escape those characters in a value, and an unescaped `,` or `=` in a
// value is an error, as upstream. Fields are the object's paths (spec.name, status.rcode, ...) or
// their last part (name, rcode, ...). Names compare as DNS does (case-insensitive, a trailing dot
// ignored), types and rcodes case-insensitively, the rest exactly. Pure.
import type { QueryEntry, QueryLog } from './query-log.js';

type Field = {
  aliases: string[];
  value: (e: QueryEntry, objectName: string) => string;
  normalize: (v: string) => string;
};

const exact = (v: string) => v;
const dnsName = (v: string) => v.toLowerCase().replace(/\.$/, '');
const upper = (v: string) => v.toUpperCase();
const lower = (v: string) => v.toLowerCase();

const fields: Record<string, Field> = {
  'metadata.name': { aliases: [], value: (_e, objectName) => objectName, normalize: exact },
  'spec.name': { aliases: ['name'], value: (e) => e.name, normalize: dnsName },
  'spec.type': { aliases: ['type'], value: (e) => e.type, normalize: upper },
  'spec.client': { aliases: ['client'], value: (e) => e.client, normalize: exact },
  'spec.transport': { aliases: ['transport'], value: (e) => e.transport, normalize: lower },
  'status.rcode': { aliases: ['rcode'], value: (e) => e.rcode, normalize: upper },
  'status.source': { aliases: ['source'], value: (e) => e.source, normalize: lower },
  'status.rule': { aliases: ['rule'], value: (e) => e.rule ?? '', normalize: exact },
};

/** Every field a selector may name, paths first. */
export const selectableFields = [...Object.keys(fields), ...Object.values(fields).flatMap((f) => f.aliases)];

export type QuerySelector = (e: QueryEntry, objectName: string) => boolean;

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

/** A selector, or what is wrong with the text. Empty text selects everything. */
export function parseQuerySelector(text: string): QuerySelector | { error: string } {
  const tests: QuerySelector[] = [];
  for (const term of splitUnescaped(text, ',')) {
    if (term.trim() === '') continue;
    const m = /^([^!=]*?)(!=|==|=)(.*)$/s.exec(term);
    if (!m) return { error: `"${term}": want FIELD=VALUE, FIELD==VALUE or FIELD!=VALUE` };
    const [, rawKey, op, rawValue] = m as unknown as [string, string, string, string];
    const key = rawKey.trim();
    const path = key in fields ? key : Object.keys(fields).find((p) => fields[p]!.aliases.includes(key));
    if (path === undefined)
      return { error: `field label not supported: ${key} (supported: ${selectableFields.join(', ')})` };
    const value = unescapeValue(rawValue.trim());
    if (typeof value !== 'string') return { error: `"${term}": ${value.error}` };
    const field = fields[path]!;
    const wanted = field.normalize(value);
    const equal = (e: QueryEntry, objectName: string) => field.normalize(field.value(e, objectName)) === wanted;
    tests.push(op === '!=' ? (e, n) => !equal(e, n) : equal);
  }
  return (e, objectName) => tests.every((t) => t(e, objectName));
}

/** The entries of `log` that `text` selects (each named by its version there), or what is wrong with the text. */
export function entryFilter(
  text: string,
  log: Pick<QueryLog, 'version'>,
): ((e: QueryEntry) => boolean) | { error: string } {
  const selector = parseQuerySelector(text);
  return typeof selector === 'function' ? (e) => selector(e, log.version(e.seq)) : selector;
}
