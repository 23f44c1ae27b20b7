// `spoke-agent queries [--watch] [--field-selector=...]`: the DNS query log of a running agent (its
// /debug/queries), one query a line; with --watch it keeps following, as `tail -f` does, resuming
// after the last line when the agent ends a watch. For clusters without the aggregation layer, or one
// node's agent (`kubectl get queries.dns.spoke-agent.io` reaches whichever pod the Service picks).
import { readFileSync } from 'node:fs';
import { joinHostPort } from '../net/address.js';
import { agentFlags } from '../agent/options.js';
import type { ShownQuery } from '../dns/queries-handler.js';
import { bool, FlagError, parseFlags, str, usage, type Values } from '../flags/flags.js';
import { refusalReason } from './debug-refusal.js';

export const queriesFlags = {
  watch: bool('watch', false, 'After the queries held, follow new ones as they come (-w).'),
  fieldSelector: str(
    'field-selector',
    '',
    'Only the queries that match, e.g. rcode=NXDOMAIN,client=10.0.3.7 (fields: name, type, client, transport, rcode, source, rule).',
  ),
  output: str('output', 'text', "text: one aligned line a query; json: the agent's JSON, one object a line (for jq).", {
    validate: (v) => (['text', 'json'].includes(v) ? undefined : `must be text or json, got "${v}"`),
  }),
  healthServerHost: str('health-server-host', '127.0.0.1', 'Where the agent serves /debug/queries.'),
  healthServerPort: agentFlags.healthServerPort,
  tokenFile: str(
    'token-file',
    '',
    'A bearer token for /debug/queries when the agent checks one (--debug-auth): allowed to "get" /debug/spoke-agent/queries.',
  ),
  help: bool('help', false, 'Show this help.'),
};

// The leading columns have a fixed width (time of day, client address and port, transport, type,
// rcode), so the name, the rule and the latency follow at the same place on every line.
const widths = [13, 21, 5, 5, 8];
const line = (cells: string[]) => cells.map((c, i) => (i < widths.length ? c.padEnd(widths[i]!) : c)).join(' ');

export const queryHeader = line(['TIME', 'CLIENT', 'PROTO', 'TYPE', 'RCODE', 'QUERY', 'RULE', 'LATENCY']);

/** One query as a line: time (UTC), client, transport, type, rcode, name, the rule, the latency. Pure. */
export function queryLine(q: ShownQuery): string {
  const latency = q.ms !== undefined ? `${q.ms}ms` : q.cached ? 'cached' : '-';
  const client = q.client.includes(':') ? `[${q.client}]:${q.clientPort}` : `${q.client}:${q.clientPort}`;
  return line([
    q.time.slice(11),
    client,
    q.transport,
    q.type || '-',
    q.rcode,
    q.name || '<none>',
    q.rule ?? '-',
    latency,
  ]);
}

class Refused extends Error {}

async function request(url: string, token: string | undefined, signal?: AbortSignal): Promise<Response> {
  const res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal });
  if (!res.ok) {
    throw new Refused(`${url} answered ${res.status}: ${refusalReason(await res.text()) ?? ''}`);
  }
  return res;
}

export async function runQueriesCommand(
  argv: string[],
  out: NodeJS.WritableStream = process.stdout,
  signal?: AbortSignal,
): Promise<number> {
  let values: Values<typeof queriesFlags>;
  try {
    const parsed = parseFlags(
      queriesFlags,
      argv.map((a) => (a === '-w' ? '--watch' : a)),
      process.env,
    );
    if (parsed.positionals.length) throw new FlagError(`unexpected argument "${parsed.positionals[0]}"`);
    values = parsed.values;
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    process.stderr.write(`spoke-agent queries: ${err.message}\n`);
    return 2;
  }
  if (values.help) {
    out.write(
      `Usage: spoke-agent queries [--watch] [--field-selector=...] [flags]\n\nThe DNS query log of a running agent (/debug/queries on its health port).\n\nFlags:\n${usage(queriesFlags)}\n`,
    );
    return 0;
  }
  let token: string | undefined;
  try {
    token = values.tokenFile ? readFileSync(values.tokenFile, 'utf8').trim() : undefined;
  } catch (err) {
    process.stderr.write(`spoke-agent queries: --token-file: ${(err as Error).message}\n`);
    return 2;
  }
  const base = `http://${joinHostPort(values.healthServerHost, values.healthServerPort)}/debug/queries`;
  const selector = values.fieldSelector ? `fieldSelector=${encodeURIComponent(values.fieldSelector)}` : '';
  const show = (q: ShownQuery) => out.write(`${values.output === 'json' ? JSON.stringify(q) : queryLine(q)}\n`);
  try {
    const list = (await (await request(`${base}${selector ? `?${selector}` : ''}`, token, signal)).json()) as {
      resourceVersion: string;
      queries: ShownQuery[];
    };
    if (values.output === 'text') out.write(`${queryHeader}\n`);
    list.queries.forEach(show);
    if (!values.watch) return 0;
    // The agent ends a watch after an hour: watch again from the last query seen.
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
          const q = JSON.parse(pending.slice(0, nl)) as ShownQuery;
          pending = pending.slice(nl + 1);
          version = q.resourceVersion;
          show(q);
        }
      }
    }
  } catch (err) {
    if (signal?.aborted) return 0;
    process.stderr.write(
      `spoke-agent queries: ${err instanceof Refused ? err.message : `${base} unreachable: ${(err as Error).message}`}\n`,
    );
    return 1;
  }
}
