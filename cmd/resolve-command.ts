// `spoke-agent resolve NAME`: ask a running DNS server and explain its answer.
import dgram from 'node:dgram';
import { randomInt } from 'node:crypto';
import { isIPv6, Socket } from 'node:net';
import dns2 from 'dns2';
import { joinHostPort } from '../agent/address.js';
import { agentFlags } from '../agent/options.js';
import { describeRecords, type Explanation, explanationReason, flagsOf } from '../dns/explain.js';
import { dnsFlags } from '../dns/options.js';
import { encodeQuery, rcodeName, TYPE, typeCode } from '../dns/wire.js';
import { bool, duration, FlagError, parseFlags, str, usage } from '../flags/flags.js';

const { Packet } = dns2;

const resolveFlags = {
  type: str('type', 'A', 'Query type (A, AAAA, CNAME, TXT, HTTPS, TYPE65, ...).'),
  server: str('server', '127.0.0.1', 'Address of the DNS server to ask.'),
  dnsPort: dnsFlags.dnsPort,
  tcp: bool('tcp', false, 'Ask over TCP (UDP answers that are truncated are retried over TCP anyway).'),
  timeout: duration('timeout', 2000, 'How long to wait for the answer.'),
  healthServerHost: str('health-server-host', '127.0.0.1', 'Where the agent serves /debug/resolve, for the explanation.'),
  healthServerPort: agentFlags.healthServerPort,
  help: bool('help', false, 'Show this help.'),
};

/** Sends `query` and returns the response with the same ID. */
function ask(query: Buffer, server: string, port: number, tcp: boolean, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const fail = (err: Error) => (cleanup(), reject(err));
    const timer = setTimeout(() => fail(new Error(`no answer from ${server}:${port} within ${timeoutMs}ms`)), timeoutMs);
    let cleanup = () => clearTimeout(timer);
    if (tcp) {
      const socket = new Socket();
      let buffered = Buffer.alloc(0);
      cleanup = () => (clearTimeout(timer), socket.destroy());
      socket.on('error', fail);
      socket.on('data', (chunk) => {
        buffered = Buffer.concat([buffered, chunk]);
        if (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) cleanup(), resolve(buffered.subarray(2, 2 + buffered.readUInt16BE(0)));
      });
      socket.connect(port, server, () => {
        const len = Buffer.alloc(2);
        len.writeUInt16BE(query.length);
        socket.write(Buffer.concat([len, query]));
      });
    } else {
      const socket = dgram.createSocket(isIPv6(server) ? 'udp6' : 'udp4');
      cleanup = () => (clearTimeout(timer), socket.close());
      socket.on('error', fail);
      socket.on('message', (msg) => {
        if (msg.length >= 12 && msg.readUInt16BE(0) === query.readUInt16BE(0)) cleanup(), resolve(msg);
      });
      socket.send(query, port, server);
    }
  });
}

export async function runResolveCommand(argv: string[], out: NodeJS.WritableStream = process.stdout): Promise<number> {
  let parsed;
  try {
    parsed = parseFlags(resolveFlags, argv, process.env);
  } catch (err) {
    if (!(err instanceof FlagError)) throw err;
    process.stderr.write(`spoke-agent resolve: ${err.message}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help || positionals.length !== 1) {
    (values.help ? out : process.stderr).write(`Usage: spoke-agent resolve NAME [flags]\n\nAsks a running DNS server and explains the answer.\n\nFlags:\n${usage(resolveFlags)}\n`);
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
  const packet = Packet.parse(response);
  out.write(`;; ${name} ${values.type.toUpperCase()} from ${values.server}:${values.dnsPort} (${transport}): ${rcodeName(packet.header.rcode)} in ${ms}ms, flags ${flagsOf(packet.header).join(' ')}\n`);
  for (const r of describeRecords(packet.answers)) out.write(`${r.name}.\t${r.ttl}\t${r.type}\t${r.data}\n`);
  for (const r of describeRecords(packet.authorities)) out.write(`;; authority: ${r.name}.\t${r.ttl}\t${r.type}\t${r.data}\n`);
  const chain = packet.answers.filter((r) => r.type === TYPE.CNAME).map((r) => `${r.name} -> ${(r as unknown as { domain: string }).domain}`);
  if (chain.length) out.write(`;; CNAME chain: ${chain.join(', ')}\n`);
  const addresses = packet.answers.filter((r) => r.type === TYPE.A || r.type === TYPE.AAAA).map((r) => (r as unknown as { address: string }).address);
  if (addresses.length) out.write(`;; addresses: ${addresses.join(' ')}\n`);

  const url = `http://${joinHostPort(values.healthServerHost, values.healthServerPort)}/debug/resolve?name=${encodeURIComponent(name)}&type=${encodeURIComponent(values.type)}`;
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(values.timeout) });
    if (res.ok) {
      out.write(`;; explanation from ${url}: ${explanationReason((await res.json()) as Explanation)}\n`);
    } else {
      const why = ((await res.json().catch(() => ({}))) as { error?: string }).error;
      out.write(`;; no explanation: ${url} answered ${res.status}${why ? `: ${why}` : ''}\n`);
    }
  } catch {
    out.write(`;; no explanation: ${url} unreachable\n`);
  }
  return packet.header.rcode === 0 ? 0 : 1;
}
