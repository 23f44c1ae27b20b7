// What `spoke-agent queries` and `spoke-agent dials` share: a live log of a running agent (its
// /debug/<resource>), one entry a line; with --watch it keeps following, as `tail -f` does, resuming
// after the last line when the agent ends a watch. For clusters without the aggregation layer, or
// one node's agent (kubectl through the Service reaches whichever pod it picks).
import { readFileSync } from 'node:fs';
import { agentFlags } from '../agent/options.js';
import { bool, FlagError, parseFlags, str, usage, type Values } from '../flags/flags.js';
import { joinHostPort } from '../net/address.js';
import { refusalReason } from './debug-refusal.js';

/** The flags of a live tail of `resource`; `example` is a field selector, `fields` the fields a selector may name. */
export const liveTailFlags = (resource: string, example: string, fields: string) => ({
  watch: bool('watch', false, `After the ${resource} held, follow new ones as they come (-w).`),
  fieldSelector: str('field-selector', '', `Only the ${resource} that match, e.g. ${example} (fields: ${fields}).`),
  output: str(
    'output',
    'text',
    "text: one aligned line an entry; json: the agent's JSON, one object a line (for jq).",
    {
      validate: (v) => (['text', 'json'].includes(v) ? undefined : `must be text or json, got "${v}"`),
    },
  ),
  healthServerHost: str('health-server-host', '127.0.0.1', `Where the agent serves /debug/${resource}.`),
  healthServerPort: agentFlags.healthServerPort,
  tokenFile: str(
    'token-file',
    '',
    `A bearer token for /debug/${resource} when the agent checks one (--debug-auth): allowed to "get" /debug/spoke-agent/${resource}.`,
  ),
  help: bool('help', false, 'Show this help.'),
});

type LiveTailFlags = ReturnType<typeof liveTailFlags>;

export interface LiveTail<T extends { resourceVersion: string }> {
  resource: string;
  flags: LiveTailFlags;
  /** One line of the help: what the log is. */
  what: string;
  header: string;
  line: (entry: T) => string;
}

/** Fixed-width leading columns, so what follows starts at the same place on every line. */
export const aligned = (widths: number[]) => (cells: string[]) =>
  cells.map((c, i) => (i < widths.length ? c.padEnd(widths[i]!) : c)).join(' ');

class Refused extends Error {}

async function request(url: string, token: string | undefined, signal?: AbortSignal): Promise<Response> {
  const res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal });
  if (!res.ok) {
    throw new Refused(`${url} answered ${res.status}: ${refusalReason(await res.text()) ?? ''}`);
  }
  return res;
}

export async function runLiveTail<T extends { resourceVersion: string }>(
  tail: LiveTail<T>,
  argv: string[],
  out: NodeJS.WritableStream = process.stdout,
  signal?: AbortSignal,
): Promise<number> {
  const name = `spoke-agent ${tail.resource}`;
  let values: Values<LiveTailFlags>;
  try {
    const parsed = parseFlags(
      tail.flags,
      argv.map((a) => (a === '-w' ? '--watch' : a)),
      process.env,
    );
    if (parsed.positionals.length) throw new FlagError(`unexpected argument "${parsed.positionals[0]}"`);
    values = parsed.values;
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    process.stderr.write(`${name}: ${err.message}\n`);
    return 2;
  }
  if (values.help) {
    out.write(
      `Usage: ${name} [--watch] [--field-selector=...] [flags]\n\n${tail.what} (/debug/${tail.resource} on its health port).\n\nFlags:\n${usage(tail.flags)}\n`,
    );
    return 0;
  }
  let token: string | undefined;
  try {
    token = values.tokenFile ? readFileSync(values.tokenFile, 'utf8').trim() : undefined;
  } catch (err) {
    process.stderr.write(`${name}: --token-file: ${(err as Error).message}\n`);
    return 2;
  }
  const base = `http://${joinHostPort(values.healthServerHost, values.healthServerPort)}/debug/${tail.resource}`;
  const selector = values.fieldSelector ? `fieldSelector=${encodeURIComponent(values.fieldSelector)}` : '';
  const show = (e: T) => out.write(`${values.output === 'json' ? JSON.stringify(e) : tail.line(e)}\n`);
  try {
    const list = (await (await request(`${base}${selector ? `?${selector}` : ''}`, token, signal)).json()) as {
      resourceVersion: string;
    } & Record<string, T[]>;
    if (values.output === 'text') out.write(`${tail.header}\n`);
    list[tail.resource]!.forEach(show);
    if (!values.watch) return 0;
    // The agent ends a watch after an hour: watch again from the last entry seen.
    for (let version = list.resourceVersion; ; ) {
      const res = await request(
        `${base}?watch=true&resourceVersion=${encodeURIComponent(version)}${selector ? `&${selector}` : ''}`,
        token,
        signal,
      );
      let pending = '';
      for await (const chunk of res.body! as unknown as AsyncIterable<Uint8Array>) {
        pending += Buffer.from(chunk).toString();
        for (let nl = pending.indexOf('\n'); nl !== -1; nl = pending.indexOf('\n')) {
          const e = JSON.parse(pending.slice(0, nl)) as T;
          pending = pending.slice(nl + 1);
          version = e.resourceVersion;
          show(e);
        }
      }
    }
  } catch (err) {
    if (signal?.aborted) return 0;
    process.stderr.write(
      `${name}: ${err instanceof Refused ? err.message : `${base} unreachable: ${(err as Error).message}`}\n`,
    );
    return 1;
  }
}
