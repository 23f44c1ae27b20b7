// `spoke-agent resolve NAME`: ask a running DNS server and explain its answer.
import dgram from 'node:dgram';
import { randomInt } from 'node:crypto';
import { isIPv6, Socket } from 'node:net';
import { joinHostPort } from '../net/address.js';
import { systemClock } from '../clock/clock.js';
import { agentFlags } from '../agent/options.js';
import { describeRecords, type Explanation, explanationReason, flagsOf } from '../dns/explain.js';
import { decodeMessage } from '../dns/dns2.js';
import { dnsFlags } from '../dns/options.js';
import { encodeQuery, rcodeName, TYPE, typeCode } from '../dns/wire.js';
import { bool, duration, FlagError, type Parsed, parseFlags, str, usage } from '../flags/flags.js';
import { localSocketPath, socketName } from '../observability/local-socket.js';
import { refusalReason } from './debug-refusal.js';

export const resolveFlags = {
  type: str('type', 'A', 'Query type (A, AAAA, CNAME, TXT, HTTPS, TYPE65, ...).'),
  server: str('server', '127.0.0.1', 'Address of the DNS server to ask.'),
  dnsPort: dnsFlags.dnsPort,
  tcp: bool('tcp', false, 'Ask over TCP (UDP answers that are truncated are retried over TCP anyway).'),
  timeout: duration('timeout', 2000, 'How long to wait for the answer.'),
  healthServerHost: str(
    'health-server-host',
    '127.0.0.1',
    'Where the agent serves /debug/resolve, for the explanation (on Linux, an agent on this machine or in this pod is first asked over its local socket, --debug-socket).',
  ),
  healthServerPort: agentFlags.healthServerPort,
  help: bool('help', false, 'Show this help.'),
};

/** Sends `query` and returns the response with the same ID. */
function ask(query: Buffer, server: string, port: number, tcp: boolean, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const fail = (err: Error) => {
      cleanup();
      reject(err);
    };
    const stopTimer = systemClock.after(timeoutMs, () =>
      fail(new Error(`no answer from ${server}:${port} within ${timeoutMs}ms`)),
    );
    let cleanup = stopTimer;
    if (tcp) {
      const socket = new Socket();
      let buffered = Buffer.alloc(0);
      cleanup = () => {
        stopTimer();
        socket.destroy();
      };
      socket.on('error', fail);
      socket.on('data', (chunk) => {
        buffered = Buffer.concat([buffered, chunk]);
        if (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
          cleanup();
          resolve(buffered.subarray(2, 2 + buffered.readUInt16BE(0)));
        }
      });
      socket.connect(port, server, () => {
        const len = Buffer.alloc(2);
        len.writeUInt16BE(query.length);
        socket.write(Buffer.concat([len, query]));
      });
    } else {
      const socket = dgram.createSocket(isIPv6(server) ? 'udp6' : 'udp4');
      cleanup = () => {
        stopTimer();
        socket.close();
      };
      socket.on('error', fail);
      socket.on('message', (msg) => {
        if (msg.length >= 12 && msg.readUInt16BE(0) === query.readUInt16BE(0)) {
          cleanup();
          resolve(msg);
        }
      });
      socket.send(query, port, server);
    }
  });
}

type ResolveValues = ReturnType<typeof parseFlags<typeof resolveFlags>>['values'];

/** GET `path` over the Unix socket `socketPath`: status and body, or undefined when nothing listens there. */
function getLocal(
  socketPath: string,
  path: string,
  timeoutMs: number,
): Promise<{ status: number; body: string } | undefined> {
  const { request } = process.getBuiltinModule('node:http');
  return new Promise((resolve) => {
    const req = request({ socketPath, path, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', () => resolve(undefined));
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(undefined));
    req.end();
  });
}

/**
 * The agent's /debug/resolve for `name`, as one `;;` line. First over the agent's local socket
 * (--debug-socket: in its pod, `kubectl exec`, no token needed), then over TCP at
 * --health-server-host:--health-server-port, where a cluster's agent wants a bearer token.
 */
async function explanation(values: ResolveValues, name: string): Promise<string> {
  const path = `/debug/resolve?name=${encodeURIComponent(name)}&type=${encodeURIComponent(values.type)}`;
  const say = (from: string, status: number, body: string) => {
    if (status === 200) return `;; explanation from ${from}: ${explanationReason(JSON.parse(body) as Explanation)}`;
    const why = refusalReason(body);
    const hint =
      status === 401 || status === 403
        ? " (run resolve inside the agent's pod, e.g. kubectl exec, where it asks over the local socket without a token)"
        : '';
    return `;; no explanation: ${from} answered ${status}${why ? `: ${why}` : ''}${hint}`;
  };
  const local = localSocketPath(values.healthServerPort);
  if (process.platform === 'linux' && isLoopback(values.healthServerHost)) {
    const answer = await getLocal(local, path, values.timeout);
    if (answer) return say(`the agent's socket ${socketName(local)}`, answer.status, answer.body);
  }
  const url = `http://${joinHostPort(values.healthServerHost, values.healthServerPort)}${path}`;
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(values.timeout) });
    return say(url, res.status, await res.text());
  } catch {
    return `;; no explanation: ${url} unreachable`;
  }
}

const isLoopback = (host: string) => host === 'localhost' || /^127\./.test(host) || host === '::1';

export async function runResolveCommand(argv: string[], out: NodeJS.WritableStream = process.stdout): Promise<number> {
  let parsed: Parsed<typeof resolveFlags>;
  try {
    parsed = parseFlags(resolveFlags, argv, process.env);
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    process.stderr.write(`spoke-agent resolve: ${err.message}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help || positionals.length !== 1) {
    (values.help ? out : process.stderr).write(
      `Usage: spoke-agent resolve NAME [flags]\n\nAsks a running DNS server and explains the answer.\n\nFlags:\n${usage(resolveFlags)}\n`,
    );
    return values.help ? 0 : 2;
  }
  const name = positionals[0]!;
  const qtype = typeCode(values.type);
  if (qtype === undefined) {
    process.stderr.write(`spoke-agent resolve: unknown type "${values.type}"\n`);
    return 2;
  }
  const query = encodeQuery(name, qtype);
  query.writeUInt16BE(randomInt(0x10000), 0);
  const started = performance.now();
  let response: Buffer;
  let transport = values.tcp ? 'tcp' : 'udp';
  try {
    response = await ask(query, values.server, values.dnsPort, values.tcp, values.timeout);
    if (!values.tcp && response[2]! & 2) {
      transport = 'udp, truncated, then tcp';
      response = await ask(query, values.server, values.dnsPort, true, values.timeout);
    }
  } catch (err) {
    out.write(`;; ${name} ${values.type.toUpperCase()}: ${(err as Error).message}\n`);
    return 1;
  }
  const ms = (performance.now() - started).toFixed(1);
  const packet = decodeMessage(response);
  out.write(
    `;; ${name} ${values.type.toUpperCase()} from ${values.server}:${values.dnsPort} (${transport}): ${rcodeName(packet.header.rcode)} in ${ms}ms, flags ${flagsOf(packet.header).join(' ')}\n`,
  );
  for (const r of describeRecords(packet.answers)) out.write(`${r.name}.\t${r.ttl}\t${r.type}\t${r.data}\n`);
  for (const r of describeRecords(packet.authorities))
    out.write(`;; authority: ${r.name}.\t${r.ttl}\t${r.type}\t${r.data}\n`);
  const chain = packet.answers.flatMap((r) =>
    r.type === TYPE.CNAME && 'domain' in r ? [`${r.name} -> ${r.domain}`] : [],
  );
  if (chain.length) out.write(`;; CNAME chain: ${chain.join(', ')}\n`);
  const addresses = packet.answers.flatMap((r) => ('address' in r ? [r.address] : []));
  if (addresses.length) out.write(`;; addresses: ${addresses.join(' ')}\n`);

  out.write(`${await explanation(values, name)}\n`);
  return packet.header.rcode === 0 ? 0 : 1;
}
