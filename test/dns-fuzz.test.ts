// "Malformed queries get FORMERR or are dropped, never crash the process": thousands of random and
// mutated packets, in process and over UDP and TCP, then a normal query is still answered.
import { execFile } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';
import { promisify } from 'node:util';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type DnsStack, startDns } from '../dns/setup.js';
import { encodeQuery, inspectResponse } from '../dns/wire.js';
import { createLogger } from '../observability/log.js';
import { RuleHolder } from '../rules/holder.js';
import { parseRules } from '../rules/rule-set.js';
import { startTestUpstream, type TestUpstream } from './support/dns-upstream.js';
import { testDnsValues } from './support/dns-values.js';

const run = promisify(execFile);
let upstream: TestUpstream;
let dns: DnsStack;

// A deterministic generator, so a failure can be replayed.
let seed = 0x5eed;
const rand = (n: number) => {
  seed = (seed * 1103515245 + 12345) & 0x7fffffff;
  return seed % n;
};

const seeds = [
  encodeQuery('web.prod.cluster1', 1),
  encodeQuery('cluster1', 28),
  encodeQuery('nope.prod.cluster1', 16),
  encodeQuery('ext.example.test', 65),
  encodeQuery('pair.cluster1', 255),
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
  for (let i = 0; i < 20_000; i++) {
    const msg = packet();
    replies.push(
      new Promise((resolve) =>
        dns.resolver.handle(msg, i % 2 ? 'udp' : 'tcp', resolve) ? undefined : resolve(undefined),
      ),
    );
  }
  for (const reply of await Promise.all(replies))
    if (reply) expect(inspectResponse(reply), reply.toString('hex')).toBeDefined();
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
  await new Promise((r) => setTimeout(r, 300));
  udp.close();
  const { stdout } = await run('dig', [
    '@127.0.0.1',
    '-p',
    String(dns.listening.port),
    '+tries=1',
    '+time=3',
    '+short',
    'web.prod.cluster1',
    'A',
  ]);
  expect(stdout).toBe('web.prod.svc.cluster.test.\n127.0.0.11\n');
  const tcp = await run('dig', [
    '@127.0.0.1',
    '-p',
    String(dns.listening.port),
    '+tcp',
    '+tries=1',
    '+time=3',
    '+short',
    'pair.cluster1',
    'AAAA',
  ]);
  expect(tcp.stdout).toBe('::1\n');
});
