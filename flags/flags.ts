// A small pflag-compatible command-line parser. The Go agent's flags are parsed by spf13/pflag, so
// spoke-agent accepts the same spellings: `--name=value`, `--name value`, bare `--name` for booleans
// (`--name=false` to turn one off), Go durations (`1s`, `1h30m`, `500ms`), and a single dash (`-v=2`).
// Each component declares its flags next to its code; a command composes the groups it needs.

export class FlagError extends Error {}

type Kind = 'string' | 'int' | 'bool' | 'duration' | 'list';
type ValueOf<K extends Kind> = K extends 'int' | 'duration'
  ? number
  : K extends 'bool'
    ? boolean
    : K extends 'list'
      ? string[]
      : string;

export interface Flag<K extends Kind = Kind> {
  name: string;
  kind: K;
  default: ValueOf<K>;
  help: string;
  /** Environment variable consulted when the flag is not given (the flag wins). */
  env?: string;
  /** Accepted for compatibility with the Go agent; parsed and validated, but has no effect. */
  ignored?: boolean;
  /** Returns a message when the value is unacceptable. */
  validate?: (value: ValueOf<K>) => string | undefined;
  /** Default as shown in help and the README, when it depends on the environment. */
  defaultText?: string;
}

export type FlagSet = Record<string, Flag>;
export type Values<S extends FlagSet> = { [P in keyof S]: S[P] extends Flag<infer K> ? ValueOf<K> : never };

function make<K extends Kind>(kind: K) {
  return (name: string, def: ValueOf<K>, help: string, extra: Partial<Flag<K>> = {}): Flag<K> => ({
    name,
    kind,
    default: def,
    help,
    ...extra,
  });
}
export const str = make('string');
export const int = make('int');
export const bool = make('bool');
/** Milliseconds, parsed from a Go duration string. */
export const duration = make('duration');
/** Repeatable and comma-separated, like pflag's StringSlice. */
export const list = make('list');

const unitMs: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Parses a Go duration (`300ms`, `1.5h`, `2h45m`, `0`) into milliseconds. */
export function parseDuration(text: string): number {
  if (text === '0') return 0;
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/y;
  let total = 0;
  let pos = 0;
  const sign = text.startsWith('-') ? -1 : 1;
  if (text[0] === '-' || text[0] === '+') pos = 1;
  if (pos >= text.length) throw new Error(`invalid duration "${text}"`);
  while (pos < text.length) {
    re.lastIndex = pos;
    const m = re.exec(text);
    if (!m) throw new Error(`invalid duration "${text}"`);
    total += Number(m[1]) * unitMs[m[2]!]!;
    pos = re.lastIndex;
  }
  return sign * total;
}

function formatDuration(ms: number): string {
  if (ms === 0) return '0s';
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000}h0m0s`;
  if (ms % 60_000 === 0) return `${ms / 60_000}m0s`;
  if (ms % 1000 === 0) return `${ms / 1000}s`;
  return `${ms}ms`;
}

function convert(flag: Flag, raw: string): unknown {
  switch (flag.kind) {
    case 'string':
      return raw;
    case 'int': {
      if (!/^[+-]?\d+$/.test(raw)) throw new Error(`invalid integer "${raw}"`);
      return Number(raw);
    }
    case 'bool': {
      const v = raw.toLowerCase();
      // strconv.ParseBool's spellings
      if (['1', 't', 'true'].includes(v)) return true;
      if (['0', 'f', 'false'].includes(v)) return false;
      throw new Error(`invalid boolean "${raw}"`);
    }
    case 'duration':
      return parseDuration(raw);
    case 'list':
      return raw
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s !== '');
  }
}

export interface Parsed<S extends FlagSet> {
  values: Values<S>;
  /** Names of the flags given on the command line or through their environment variable. */
  given: Set<string>;
  positionals: string[];
}

export function parseFlags<S extends FlagSet>(set: S, argv: readonly string[], env: NodeJS.ProcessEnv = {}): Parsed<S> {
  const byName = new Map<string, [keyof S, Flag]>();
  for (const [key, flag] of Object.entries(set)) byName.set(flag.name, [key, flag]);
  const values: Record<string, unknown> = {};
  const given = new Set<string>();
  const positionals: string[] = [];

  const assign = (key: string, flag: Flag, raw: string, source: string) => {
    let value: unknown;
    try {
      value = convert(flag, raw);
    } catch (err) {
      throw new FlagError(`${source}: ${(err as Error).message}`);
    }
    if (flag.kind === 'list' && given.has(flag.name) && Array.isArray(values[key])) {
      value = [...(values[key] as string[]), ...(value as string[])];
    }
    values[key] = value;
    given.add(flag.name);
  };

  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      positionals.push(arg);
      continue;
    }
    const body = arg.replace(/^--?/, '');
    const eq = body.indexOf('=');
    const name = eq === -1 ? body : body.slice(0, eq);
    const entry = byName.get(name);
    if (!entry) throw new FlagError(`unknown flag: --${name}`);
    const [key, flag] = entry;
    let raw: string;
    if (eq !== -1) raw = body.slice(eq + 1);
    else if (flag.kind === 'bool') raw = 'true';
    else {
      const next = argv[i + 1];
      if (next === undefined) throw new FlagError(`flag needs an argument: --${name}`);
      raw = next;
      i++;
    }
    assign(key as string, flag, raw, `invalid argument "${raw}" for "--${name}" flag`);
  }

  for (const [key, flag] of Object.entries(set)) {
    if (given.has(flag.name)) continue;
    const fromEnv = flag.env ? env[flag.env] : undefined;
    if (fromEnv !== undefined && fromEnv !== '')
      assign(key, flag, fromEnv, `invalid value "${fromEnv}" in $${flag.env} for "--${flag.name}"`);
    else values[key] = Array.isArray(flag.default) ? [...flag.default] : flag.default;
  }

  for (const [key, flag] of Object.entries(set)) {
    const problem = flag.validate?.(values[key] as never);
    if (problem) throw new FlagError(`invalid value for "--${flag.name}": ${problem}`);
  }
  return { values: values as Values<S>, given, positionals };
}

/** The default as `--help` and the README show it. */
export function shownDefault(f: Flag): string {
  return (
    f.defaultText ??
    (f.kind === 'duration'
      ? formatDuration(f.default as number)
      : Array.isArray(f.default)
        ? (f.default as string[]).join(',')
        : String(f.default))
  );
}

/** `--help` text: one flag a line, like pflag's usage. */
export function usage(set: FlagSet): string {
  return Object.values(set)
    .map((f) => {
      const def = shownDefault(f);
      const type = f.kind === 'bool' ? '' : ` ${f.kind}`;
      return `      --${f.name}${type}\n            ${f.help}${def !== '' ? ` (default ${JSON.stringify(def)})` : ''}${f.ignored ? ' [accepted for compatibility; no effect]' : ''}`;
    })
    .join('\n');
}
