// `spoke-agent queries [--watch] [--field-selector=...]`: the DNS query log of a running agent (its
// /debug/queries), one query a line, as cmd/live-tail.ts tails a live log.
import type { ShownQuery } from '../dns/queries-handler.js';
import { aligned, liveTailFlags, runLiveTail } from './live-tail.js';

export const queriesFlags = liveTailFlags(
  'queries',
  'rcode=NXDOMAIN,client=10.0.3.7',
  'name, type, client, transport, rcode, source, rule',
);

// The leading columns have a fixed width (time of day, client address and port, transport, type,
// rcode), so the name, the rule and the latency follow at the same place on every line.
const line = aligned([13, 21, 5, 5, 8]);

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

export const runQueriesCommand = (argv: string[], out?: NodeJS.WritableStream, signal?: AbortSignal) =>
  runLiveTail(
    {
      resource: 'queries',
      flags: queriesFlags,
      what: 'The DNS query log of a running agent',
      header: queryHeader,
      line: queryLine,
    },
    argv,
    out,
    signal,
  );
