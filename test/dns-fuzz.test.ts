// "Malformed queries get FORMERR or are dropped, never crash the process": thousands of random and
// mutated packets, in process and over UDP and TCP, then a normal query is still answered. Our answers
// are read by decoders other than our own (wire.ts): dns2's, and kdig's over the wire; what they read
// is checked against the rewrite the rules call for, written out by hand below.
import { execFile } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';
import { promisify } from 'node:util';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeMessage, type DnsRecord, type Message } from '../dns/dns2.js';
import { type DnsStack, startDns } from '../dns/setup.js';
import { encodeQuery, inspectResponse } from '../dns/wire.js';
import { createLogger } from '../observability/log.js';
import { RuleHolder } from '../rules/holder.js';
import { parseRules } from '../rules/rule-set.js';
import { startTestUpstream, type TestUpstream } from './support/dns-upstream.js';
import { hasCommand } from './support/commands.js';
import { testDnsValues } from './support/dns-values.js';
import { seededRandom } from './support/seeded-random.js';
import { skipNote } from './support/skips.js';

const run = promisify(execFile);
let upstream: TestUpstream;
let dns: DnsStack;

// Deterministic, so a failure can be replayed.
const random = seededRandom(0x5eed);
const rand = (n: number) => Math.floor(random() * n);

const seeds = [
  encodeQuery('web.prod.cluster1', 1),
  encodeQuery('cluster1', 28),
  encodeQuery('nope.prod.cluster1', 16),
  encodeQuery('ext.example.test', 65),
  encodeQuery('pair.cluster1', 255),
  encodeQuery('pair.cluster1', 1),
  encodeQuery('web.prod.cluster1', 28),
  encodeQuery('nope.prod.cluster1', 1),
];

function packet(): Buffer {
  if (rand(4) === 0) return Buffer.from(Array.from({ length: rand(80) }, () => rand(256)));
  const p = Buffer.from(seeds[rand(seeds.length)]!);
  for (let i = rand(4) + 1; i > 0; i--) p[rand(p.length)] = rand(256);
  if (rand(3) === 0) p[2]! &= 0x7f; // keep it a query more often than not
  const cut = rand(5) === 0 ? rand(p.length) : p.length;
  return rand(6) === 0
    ? Buffer.concat([p.subarray(0, cut), Buffer.from([rand(256), rand(256), rand(256)])])
    : p.subarray(0, cut);
}

/**
 * What the rules below and the upstream (web.prod.svc.cluster.test A 127.0.0.11, nothing else) make of
 * an A or AAAA question, as `owner TYPE data` lines and the rcode; undefined for names outside them.
 */
function expectedRewrite(name: string, type: 'A' | 'AAAA'): { rcode: number; answers: string[] } | undefined {
  const n = name.toLowerCase().replace(/\.$/, '');
  if (n === 'pair.cluster1')
    return { rcode: 0, answers: [type === 'A' ? 'pair.cluster1 A 127.0.0.2' : 'pair.cluster1 AAAA ::1'] };
  if (n === 'cluster1') return { rcode: 3, answers: ['cluster1 CNAME kubernetes.default.svc.cluster.test'] };
  const service = /^(.+)\.prod\.cluster1$/.exec(n)?.[1];
  if (service === undefined) return undefined;
  // A Service's name is a DNS-1035 label: no rule matches anything else, and the zone has no such name.
  if (!/^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/.test(service)) return { rcode: 3, answers: [] };
  const target = `${service}.prod.svc.cluster.test`;
  const known = service === 'web';
  return {
    rcode: known ? 0 : 3,
    answers: [`${n} CNAME ${target}`, ...(known && type === 'A' ? [`${target} A 127.0.0.11`] : [])],
  };
}

const typeNames: Record<number, 'A' | 'AAAA' | undefined> = { 1: 'A', 28: 'AAAA' };

/** dns2's reading of a record, as an `owner TYPE data` line. */
function line(r: DnsRecord): string {
  const data = 'address' in r ? r.address : 'domain' in r ? r.domain : '?';
  return `${r.name.toLowerCase()} ${{ 1: 'A', 5: 'CNAME', 28: 'AAAA' }[r.type] ?? r.type} ${String(data).toLowerCase()}`;
}

/** dig or kdig asking our server (the timeout bounds a failure only): what it prints. */
async function ask(tool: 'dig' | 'kdig', ...args: string[]): Promise<string> {
  return (await run(tool, ['@127.0.0.1', '-p', String(dns.listening.port), '+retry=0', '+timeout=20', ...args])).stdout;
}

beforeAll(async () => {
  upstream = await startTestUpstream({ 'web.prod.svc.cluster.test': [{ type: 1, address: '127.0.0.11' }] });
  const rules = parseRules({
    naming: { cluster: 'cluster1', agentNamespace: '', clusterDomain: 'cluster.test' },
    expose: ['prod/*'],
    file: { origin: 'f', content: 'static: [{name: pair.cluster1, target: [127.0.0.2, "::1"]}]' },
  });
  if (!rules.ok) throw new Error(rules.errors.join());
  const values = testDnsValues(`127.0.0.1:${upstream.port}`, { dnsForward: true, dnsTtl: 5000 });
  dns = await startDns(values, new RuleHolder(rules.value), new Registry(), createLogger('silent'));
});
afterAll(async () => {
  await dns?.close();
  await upstream?.close();
});

it('answers every mutated message in process with a well-formed response or drops it', async () => {
  const replies: Promise<Buffer | undefined>[] = [];
  const queries: Buffer[] = [];
  for (let i = 0; i < 20_000; i++) {
    const msg = packet();
    queries.push(Buffer.from(msg));
    replies.push(
      new Promise((resolve) =>
        dns.resolver.handle(msg, i % 2 ? 'udp' : 'tcp', resolve) ? undefined : resolve(undefined),
      ),
    );
  }
  let compared = 0;
  for (const [i, reply] of (await Promise.all(replies)).entries()) {
    if (!reply) continue;
    const hex = reply.toString('hex');
    expect(inspectResponse(reply), hex).toBeDefined();
    // dns2 leaves out what it cannot decode: every record counted must be there, and the ID echoed.
    const m: Message = decodeMessage(reply);
    expect(m.header.qr, hex).toBe(1);
    expect(m.header.id, hex).toBe(queries[i]!.readUInt16BE(0));
    expect([m.questions.length, m.answers.length, m.authorities.length, m.additionals.length], hex).toEqual([
      m.header.qdcount,
      m.header.ancount,
      m.header.nscount,
      m.header.arcount,
    ]);
    // A question the rules answer, whatever else the mutations did to the message: the rewrite.
    const q = m.questions[0];
    const type = q && q.class === 1 ? typeNames[q.type] : undefined;
    const want = type && (m.header.rcode === 0 || m.header.rcode === 3) ? expectedRewrite(q!.name, type) : undefined;
    if (!want) continue;
    compared++;
    expect({ rcode: m.header.rcode, answers: m.answers.map(line) }, hex).toEqual(want);
  }
  // 235 questions survive the mutations with this seed (the same every run)
  expect(compared).toBeGreaterThan(200);
});

it('survives random and mutated packets over UDP and TCP, then still answers', async () => {
  const udp = dgram.createSocket('udp4');
  for (let i = 0; i < 5000; i++) {
    udp.send(packet(), dns.listening.port, '127.0.0.1');
    if (i % 200 === 0) await new Promise((r) => setImmediate(r));
  }
  for (let c = 0; c < 50; c++) {
    const socket = net.connect(dns.listening.port, '127.0.0.1');
    socket.on('error', () => undefined);
    await new Promise((r) => socket.once('connect', r));
    for (let i = 0; i < 40; i++) {
      const p = packet();
      const len = Buffer.alloc(2);
      len.writeUInt16BE(rand(10) === 0 ? rand(0x10000) : p.length); // sometimes a lying length prefix
      socket.write(Buffer.concat([len, p]));
    }
    if (c % 2) socket.end();
    else socket.destroy();
  }
  // The queries below come after the flood on the server's UDP socket; the junk TCP connections may
  // still be read meanwhile, which is the point: the server answers while it copes with them.
  udp.close();
  expect(await ask('dig', '+short', 'web.prod.cluster1', 'A')).toBe('web.prod.svc.cluster.test.\n127.0.0.11\n');
  expect(await ask('dig', '+tcp', '+short', 'pair.cluster1', 'AAAA')).toBe('::1\n');
});

const kdigFound = hasCommand('kdig');
if (!kdigFound) skipNote('dns-fuzz', 'kdig (Debian knot-dnsutils) not on PATH: the kdig reading is skipped');

/** kdig's JSON (RFC 8427) of an answer, the parts compared. */
interface KdigJson {
  RCODE: number;
  answerRRs?: Array<{ NAME: string; TYPEname: string; rdataA?: string; rdataAAAA?: string; rdataCNAME?: string }>;
}

describe.skipIf(!kdigFound)('read by kdig', () => {
  it('answers questions in mixed case, over UDP and TCP, with and without EDNS, with the rewrite', async () => {
    const names = ['pair.cluster1', 'web.prod.cluster1', 'nope.prod.cluster1', 'cluster1'];
    for (let i = 0; i < 32; i++) {
      const name = [...names[rand(names.length)]!].map((c) => (rand(2) ? c.toUpperCase() : c)).join('');
      const type = rand(2) ? 'A' : 'AAAA';
      const args = [...(rand(2) ? ['+tcp'] : []), ...(rand(2) ? ['+noedns'] : []), name, type];
      const reply = JSON.parse(await ask('kdig', '+json', ...args)) as KdigJson;
      const answers = (reply.answerRRs ?? []).map((r) =>
        [r.NAME, r.TYPEname, r.rdataA ?? r.rdataAAAA ?? r.rdataCNAME ?? '?']
          .map((f) => f.replace(/\.$/, '').toLowerCase())
          .join(' ')
          .replace(/ a{1,4} /, (t) => t.toUpperCase())
          .replace(/ cname /, ' CNAME '),
      );
      expect({ rcode: reply.RCODE, answers }, `kdig ${args.join(' ')}`).toEqual(expectedRewrite(name, type));
    }
  });
});
