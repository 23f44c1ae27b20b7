// Kubernetes label-selector syntax (apimachinery's labels.Parse), checked at start so a typo in
// --lease-label-selector is a usage error rather than a watch the API server refuses later:
// comma-separated requirements `key`, `!key`, `key=value`, `key==value`, `key!=value`,
// `key in (v1,v2)`, `key notin (v1,v2)`, `key>n`, `key<n`. Pure: no Kubernetes client.

export type LabelOperator = 'exists' | '!' | '=' | '==' | '!=' | 'in' | 'notin' | 'gt' | 'lt';

export interface LabelRequirement {
  key: string;
  operator: LabelOperator;
  values: string[];
}

// apimachinery validation: a qualified name (an optional DNS-subdomain prefix and '/') and values.
const namePart = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$/;
const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function keyProblem(key: string): string | undefined {
  const slash = key.indexOf('/');
  const [prefix, name] = slash < 0 ? [undefined, key] : [key.slice(0, slash), key.slice(slash + 1)];
  if (prefix !== undefined && (prefix.length === 0 || prefix.length > 253 || !dnsSubdomain.test(prefix)))
    return `key "${key}": the prefix must be a DNS subdomain (lower case, at most 253 characters)`;
  if (name.length === 0 || name.length > 63 || !namePart.test(name))
    return `key "${key}": the name must be 1-63 characters, alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric`;
  return undefined;
}

function valueProblem(value: string): string | undefined {
  if (value === '') return undefined;
  if (value.length > 63 || !namePart.test(value))
    return `value "${value}": at most 63 characters, alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric`;
  return undefined;
}

/** Splits on commas outside parentheses; undefined when the parentheses do not pair up. */
function splitRequirements(text: string): string[] | undefined {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    if (depth < 0 || depth > 1) return undefined;
    if (c === ',' && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  if (depth !== 0) return undefined;
  parts.push(text.slice(start));
  return parts;
}

function parseRequirement(raw: string): LabelRequirement | string {
  const text = raw.trim();
  if (text === '') return 'an empty requirement (a stray comma?)';
  const negated = /^!\s*(\S+)$/.exec(text);
  if (negated) {
    const problem = keyProblem(negated[1]!);
    return problem ?? { key: negated[1]!, operator: '!', values: [] };
  }
  const set = /^(\S+)\s+(in|notin)\s*\((.*)\)$/.exec(text);
  if (set) {
    const [, key, op, list] = set;
    const values = list!.split(',').map((v) => v.trim());
    if (list!.trim() === '') return `"${text}": ${op} needs at least one value`;
    const problem = keyProblem(key!) ?? values.map(valueProblem).find(Boolean);
    return problem ?? { key: key!, operator: op as 'in' | 'notin', values };
  }
  const compare = /^([^=!<>\s]+)\s*(==|!=|=|>|<)\s*(.*)$/.exec(text);
  if (compare) {
    const [, key, op, value] = compare;
    const keyError = keyProblem(key!);
    if (keyError) return keyError;
    if (op === '>' || op === '<') {
      if (!/^-?\d+$/.test(value!)) return `"${text}": ${op} needs an integer`;
      return { key: key!, operator: op === '>' ? 'gt' : 'lt', values: [value!] };
    }
    if (/[\s=!(),]/.test(value!)) return `"${text}": a value has no spaces, '=', '!', ',' or parentheses`;
    return valueProblem(value!) ?? { key: key!, operator: op as '=' | '==' | '!=', values: [value!] };
  }
  if (/^\S+$/.test(text)) return keyProblem(text) ?? { key: text, operator: 'exists', values: [] };
  return `"${text}" is not a requirement (key, !key, key=value, key==value, key!=value, key in (a,b), key notin (a,b))`;
}

/** The requirements of a selector ('' selects everything), or what is wrong with it. */
export function parseLabelSelector(text: string): LabelRequirement[] | string {
  if (text.trim() === '') return [];
  const parts = splitRequirements(text);
  if (!parts) return `"${text}": unbalanced parentheses`;
  const out: LabelRequirement[] = [];
  for (const part of parts) {
    const r = parseRequirement(part);
    if (typeof r === 'string') return `invalid label selector "${text}": ${r}`;
    out.push(r);
  }
  return out;
}

/** A flag's validator: what is wrong with a selector, or undefined when it parses. */
export function labelSelectorProblem(s: string): string | undefined {
  const parsed = parseLabelSelector(s);
  return typeof parsed === 'string' ? parsed : undefined;
}
