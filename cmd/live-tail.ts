// What `spoke-agent queries` and `spoke-agent dials` share: a live log of a running agent (its
// /debug/<resource>), one entry a line; with --watch it keeps following, as `tail -f` does, resuming
// after the last line when the agent ends a watch. For clusters without the aggregation layer, or
// one node's agent (kubectl through the Service reaches whichever pod it picks).
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { agentFlags } from '../agent/options.js';
import { bool, FlagError, parseFlags, str, usage, type Values } from '../flags/flags.js';
import { joinHostPort } from '../net/address.js';
import { localSocketPath, socketName } from '../observability/local-socket.js';
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
  healthServerHost: str(
    'health-server-host',
    '127.0.0.1',
    `Where the agent serves /debug/${resource} (on Linux, an agent on this machine or in this pod is first asked over its local socket, --debug-socket, where no token is needed).`,
  ),
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

/** Where to ask: the agent's local socket (its pod, no token needed) or its health port over TCP. */
type Target = { socketPath: string; name: string } | { host: string; port: number; name: string };

async function text(res: http.IncomingMessage): Promise<string> {
  let body = '';
  for await (const chunk of res) body += (chunk as Buffer).toString();
  return body;
}

function request(
  target: Target,
  path: string,
  token: string | undefined,
  signal?: AbortSignal,
): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const { name, ...where } = target;
    const req = http.get(
      { ...where, path, headers: token ? { authorization: `Bearer ${token}` } : {}, signal },
      (res) => {
        if (res.statusCode === 200) return resolve(res);
        text(res).then(
          (body) => reject(new Refused(`${name}${path} answered ${res.statusCode}: ${refusalReason(body) ?? ''}`)),
          reject,
        );
      },
    );
    req.on('error', reject);
  });
}

const isLoopback = (host: string) => host === 'localhost' || /^127\./.test(host) || host === '::1';

/**
 * The agent's local socket when it is there (in the agent's pod, `kubectl exec`, as `resolve` asks:
 * /debug there needs no token), else its health port, where a cluster's agent wants a bearer token.
 */
async function targetFor(host: string, port: number, token: string | undefined, path: string): Promise<Target> {
  const tcp = { host, port, name: `http://${joinHostPort(host, port)}` };
  if (process.platform !== 'linux' || token || !isLoopback(host)) return tcp;
  const local = { socketPath: localSocketPath(port), name: `the agent's socket ${socketName(localSocketPath(port))} ` };
  const reached = await request(local, path, undefined).then(
    (res) => {
      res.resume();
      return true;
    },
    (err: unknown) => err instanceof Refused,
  );
  return reached ? local : tcp;
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
  const base = `/debug/${tail.resource}`;
  const selector = values.fieldSelector ? `fieldSelector=${encodeURIComponent(values.fieldSelector)}` : '';
  const show = (e: T) => out.write(`${values.output === 'json' ? JSON.stringify(e) : tail.line(e)}\n`);
  let target: Target = {
    host: values.healthServerHost,
    port: values.healthServerPort,
    name: `http://${joinHostPort(values.healthServerHost, values.healthServerPort)}`,
  };
  try {
    target = await targetFor(values.healthServerHost, values.healthServerPort, token, base);
    const list = JSON.parse(
      await text(await request(target, `${base}${selector ? `?${selector}` : ''}`, token, signal)),
    ) as {
      resourceVersion: string;
    } & Record<string, T[]>;
    if (values.output === 'text') out.write(`${tail.header}\n`);
    list[tail.resource]!.forEach(show);
    if (!values.watch) return 0;
    // The agent ends a watch after an hour: watch again from the last entry seen.
    for (let version = list.resourceVersion; ; ) {
      const res = await request(
        target,
        `${base}?watch=true&resourceVersion=${encodeURIComponent(version)}${selector ? `&${selector}` : ''}`,
        token,
        signal,
      );
      let pending = '';
      for await (const chunk of res as AsyncIterable<Buffer>) {
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
      `${name}: ${err instanceof Refused ? err.message : `${target.name}${base} unreachable: ${(err as Error).message}`}\n`,
    );
    return 1;
  }
}
