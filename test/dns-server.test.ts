// The DNS server against real clients (dig, kdig, Node's dns.Resolver) over UDP and TCP, with a test
// upstream on loopback playing the cluster DNS. Expectations quote dns/README.md.
import { execFile, spawnSync } from 'node:child_process';
import dgram from 'node:dgram';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Resolver as NodeResolver } from 'node:dns/promises';
import net from 'node:net';
import { promisify } from 'node:util';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveForDial } from '../dial-policy/resolve.js';
import { explain, explanationReason } from '../dns/explain.js';
import { queriesHandler } from '../dns/queries-handler.js';
import { HealthServer } from '../observability/health-server.js';
import { queryHeader, runQueriesCommand } from '../cmd/queries-command.js';
import { runResolveCommand } from '../cmd/resolve-command.js';
import type { DnsFlagValues } from '../dns/options.js';
import { createResolver, startDns } from '../dns/setup.js';
import { createLogger } from '../observability/log.js';
import { RuleHolder } from '../rules/holder.js';
import { hashedServiceHost } from '../rules/naming.js';
import { parseRules } from '../rules/rule-set.js';
import { encodeQuery } from '../dns/wire.js';
import { startTestUpstream, type TestUpstream } from './support/dns-upstream.js';
import { testDnsValues } from './support/dns-values.js';
import { repoRoot } from './support/processes.js';
import { unusedPort } from './support/targets.js';
import { textOut } from './support/text-out.js';
import { waitUntil } from './support/wait.js';

const run = promisify(execFile);
const naming = { cluster: 'cluster1', agentNamespace: 'agent-ns', clusterDomain: 'cluster.test' };
const rulesFile =
  'static:\n  - {name: echo.cluster1, target: 127.0.0.1}\n  - {name: pair.cluster1, target: [127.0.0.2, "::1"]}\n  - {name: alias.cluster1, target: ext.example.test}\n';

function ruleSet(expose: string[]) {
  const r = parseRules({ naming, expose, file: { origin: 'rules.yaml', content: rulesFile } });
  if (!r.ok) throw new Error(r.errors.join('\n'));
  return r.value;
}

const big = Array.from({ length: 60 }, (_, i) => ({ type: 1, address: `127.0.1.${i + 1}` }));
const zone = {
  'kubernetes.default.svc.cluster.test': [{ type: 1, address: '127.0.0.10' }],
  'web.prod.svc.cluster.test': [
    { type: 1, address: '127.0.0.11' },
    { type: 28, address: '::1' },
  ],
  'big.prod.svc.cluster.test': big,
  'ext.example.test': [
    { type: 1, address: '127.0.0.20' },
    { type: 16, data: 'hello' },
    { type: 65, data: Buffer.from('0001000001000302683200', 'hex') },
  ],
};

async function stack(
  upstream: TestUpstream,
  extra: Partial<DnsFlagValues> = {},
  holder = new RuleHolder(ruleSet(['prod/web', 'prod/big', 'default/*'])),
) {
  const values = testDnsValues(`127.0.0.1:${upstream.port}`, {
    dnsForward: true,
    dnsTtl: 5000,
    dnsCacheSize: 1000,
    dnsUpstreamTimeout: 1000,
    dnsQueryLogSize: 1000,
    ...extra,
  });
  const registry = new Registry();
  return { dns: await startDns(values, holder, registry, createLogger('silent')), holder, registry };
}

let upstream: TestUpstream;
let main: Awaited<ReturnType<typeof stack>>;
let port: number;

const dig = async (...args: string[]) =>
  (await run('dig', [`@127.0.0.1`, '-p', String(port), '+tries=1', '+time=3', ...args])).stdout;
const kdig = async (...args: string[]) =>
  (await run('kdig', [`@127.0.0.1`, '-p', String(port), '+retry=0', '+timeout=3', ...args])).stdout;

beforeAll(async () => {
  upstream = await startTestUpstream(zone);
  main = await stack(upstream);
  port = main.dns.listening.port;
});
afterAll(async () => {
  await main?.dns.close();
  await upstream?.close();
});

describe('rewritten names ("a CNAME to the FQDN, then the FQDN\'s A/AAAA records")', () => {
  it('answers <cluster> over UDP (dig) with AA, the CNAME and the address', async () => {
    const out = await dig('cluster1', 'A');
    expect(out).toMatch(/status: NOERROR/);
    expect(out).toMatch(/flags: qr aa rd ra;/);
    expect(out).toMatch(/^cluster1\.\s+5\s+IN\s+CNAME\s+kubernetes\.default\.svc\.cluster\.test\.$/m);
    expect(out).toMatch(/^kubernetes\.default\.svc\.cluster\.test\.\s+5\s+IN\s+A\s+127\.0\.0\.10$/m);
  });

  it('answers <cluster>.<agent-namespace> and the hashed name over TCP (kdig)', async () => {
    expect(await kdig('+tcp', 'cluster1.agent-ns', 'A')).toMatch(/CNAME\s+kubernetes\.default\.svc\.cluster\.test\./);
    const hashed = hashedServiceHost('cluster1', 'prod', 'web');
    const out = await kdig('+tcp', hashed, 'A');
    expect(out).toMatch(/status: NOERROR/);
    expect(out).toMatch(new RegExp(`^${hashed}\\.\\s+5\\s+IN\\s+CNAME\\s+web\\.prod\\.svc\\.cluster\\.test\\.$`, 'm'));
  });

  it("answers AAAA and keeps the query's case", async () => {
    const out = await dig('WeB.PrOd.CLUSTER1', 'AAAA');
    expect(out).toMatch(/^WeB\.PrOd\.CLUSTER1\.\s+5\s+IN\s+CNAME\s+web\.prod\.svc\.cluster\.test\.$/m);
    expect(out).toMatch(/^web\.prod\.svc\.cluster\.test\.\s+5\s+IN\s+AAAA\s+::1$/m);
  });

  it('matches any Service of a NAMESPACE/* rule, and passes on the upstream NXDOMAIN', async () => {
    const out = await dig('nothere.default.cluster1', 'A');
    expect(out).toMatch(/status: NXDOMAIN/);
    expect(out).toMatch(/CNAME\s+nothere\.default\.svc\.cluster\.test\./);
  });

  it('answers static IP targets directly, NODATA with the SOA for other types', async () => {
    expect(await dig('+short', 'pair.cluster1', 'A')).toBe('127.0.0.2\n');
    expect(await dig('+short', 'pair.cluster1', 'AAAA')).toBe('::1\n');
    const out = await dig('pair.cluster1', 'TXT');
    expect(out).toMatch(/status: NOERROR/);
    expect(out).toMatch(/ANSWER: 0, AUTHORITY: 1/);
    expect(out).toMatch(/^cluster1\.\s+5\s+IN\s+SOA\s+ns\.dns\.cluster1\. hostmaster\.cluster1\./m);
  });

  it('answers a static FQDN target as a CNAME', async () => {
    expect(await dig('+short', 'alias.cluster1', 'A')).toBe('ext.example.test.\n127.0.0.20\n');
  });

  it('gives NXDOMAIN with AA and the SOA for a name in the cluster zone that no rule matches', async () => {
    const out = await dig('nope.prod.cluster1', 'A');
    expect(out).toMatch(/status: NXDOMAIN/);
    expect(out).toMatch(/flags: qr aa rd ra;/);
    expect(out).toMatch(/AUTHORITY: 1/);
  });

  it('truncates over the UDP budget (TC) and gives the full answer over TCP', async () => {
    const udp = await dig('+ignore', '+noedns', 'big.prod.cluster1', 'A');
    expect(udp).toMatch(/flags: qr aa tc rd ra;/);
    expect(udp).toMatch(/ANSWER: 0/);
    const retried = await dig('+noedns', 'big.prod.cluster1', 'A');
    expect(retried).toMatch(/Truncated, retrying in TCP mode/);
    expect(retried).toMatch(/ANSWER: 61/);
    expect(await kdig('+tcp', 'big.prod.cluster1', 'A')).toMatch(/ANSWER: 61/);
  });

  it('echoes EDNS (OPT with our UDP size) and answers BADVERS to EDNS version 1', async () => {
    const out = await dig('+edns=0', '+bufsize=4096', 'web.prod.cluster1', 'A');
    expect(out).toMatch(/OPT PSEUDOSECTION:\n; EDNS: version: 0, flags:; udp: 1232/);
    const bad = await dig('+edns=1', '+noednsnegotiation', 'web.prod.cluster1', 'A');
    expect(bad).toMatch(/status: BADVERS/);
  });

  it("works with Node's dns.Resolver over UDP", async () => {
    const r = new NodeResolver({ timeout: 10_000, tries: 1 });
    r.setServers([`127.0.0.1:${port}`]);
    expect(await r.resolve4('web.prod.cluster1')).toEqual(['127.0.0.11']);
    expect(await r.resolve6('web.prod.cluster1')).toEqual(['::1']);
    expect(await r.resolveCname('cluster1')).toEqual(['kubernetes.default.svc.cluster.test']);
    await expect(r.resolve4('nope.prod.cluster1')).rejects.toMatchObject({ code: 'ENOTFOUND' });
  });

  it('serves UDP in batches where the helper is built (Linux), and a burst gets every answer', async () => {
    const built = existsSync(join(repoRoot, 'build/udp-batch.node'));
    expect(main.dns.server.udpKind).toBe(built ? 'batched' : 'dgram');
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, for sh to expand
    const compiler = spawnSync('sh', ['-c', 'command -v "${CC:-cc}"']).status === 0;
    if (process.platform === 'linux' && compiler)
      expect(built, 'npm install builds build/udp-batch.node where a C compiler is').toBe(true);
    // 500 queries from one socket without waiting: they arrive in batches, each answer to its own ID.
    const socket = dgram.createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    socket.setRecvBufferSize(1 << 20); // the answers may all arrive before this process reads one
    const ids = new Set<number>();
    const all = new Promise<void>((resolve) => {
      socket.on('message', (msg) => {
        expect(msg[2]! & 0x80).toBe(0x80); // a response
        ids.add(msg.readUInt16BE(0));
        if (ids.size === 500) resolve();
      });
    });
    for (let id = 0; id < 500; id++) {
      const query = encodeQuery(id % 2 ? 'cluster1' : 'web.prod.cluster1', 1);
      query.writeUInt16BE(id, 0);
      socket.send(query, port, '127.0.0.1');
    }
    await all;
    socket.close();
    expect([...ids].sort((a, b) => a - b)).toEqual(Array.from({ length: 500 }, (_, i) => i));
  });

  it('drops a datagram too large to be a query and answers the one sent right after it', async () => {
    const socket = dgram.createSocket('udp4');
    const answer = new Promise<Buffer>((resolve) => socket.once('message', resolve));
    const query = encodeQuery('cluster1', 1);
    query.writeUInt16BE(4242, 0);
    socket.send(Buffer.alloc(5000, 7), port, '127.0.0.1');
    socket.send(query, port, '127.0.0.1');
    const msg = await answer;
    socket.close();
    expect(msg.readUInt16BE(0)).toBe(4242);
  });

  it('refuses to start on a port another socket holds, for UDP only or both, batched or on dgram; lets go of what it bound', async () => {
    // A port free for TCP (and below the ephemeral range, where no connection will take it meanwhile).
    const udpPort = await unusedPort();
    const udpOnly = dgram.createSocket('udp4');
    await new Promise<void>((resolve, reject) => udpOnly.once('error', reject).bind(udpPort, '127.0.0.1', resolve));
    try {
      for (const dnsBatchedUdp of [true, false]) {
        await expect(stack(upstream, { dnsPort: port, dnsBatchedUdp })).rejects.toMatchObject({ code: 'EADDRINUSE' });
        await expect(stack(upstream, { dnsPort: udpPort, dnsBatchedUdp })).rejects.toMatchObject({
          code: 'EADDRINUSE',
        });
      }
      // The TCP listener bound before UDP's refusal is closed again: the port takes a listener.
      const tcp = net.createServer();
      await new Promise<void>((resolve, reject) => tcp.once('error', reject).listen(udpPort, '127.0.0.1', resolve));
      await new Promise((resolve) => tcp.close(resolve));
    } finally {
      udpOnly.close();
    }
  });

  it('answers the same on dgram (--dns-batched-udp=false)', async () => {
    const s = await stack(upstream, { dnsBatchedUdp: false });
    try {
      expect(s.dns.server.udpKind).toBe('dgram');
      const out = (
        await run('dig', ['@127.0.0.1', '-p', String(s.dns.listening.port), '+short', 'web.prod.cluster1', 'A'])
      ).stdout;
      expect(out).toBe('web.prod.svc.cluster.test.\n127.0.0.11\n');
    } finally {
      await s.dns.close();
    }
  });

  it('serves on an IPv6 address too (--dns-bind-address=::1), UDP and TCP', async () => {
    const s = await stack(upstream, { dnsBindAddress: '::1' });
    try {
      const ask = async (...args: string[]) =>
        (await run('dig', ['@::1', '-p', String(s.dns.listening.port), '+tries=1', '+time=3', '+short', ...args]))
          .stdout;
      expect(await ask('web.prod.cluster1', 'A')).toBe('web.prod.svc.cluster.test.\n127.0.0.11\n');
      expect(await ask('+tcp', 'echo.cluster1', 'A')).toBe('127.0.0.1\n');
    } finally {
      await s.dns.close();
    }
  });

  it('serves a replaced rule set at once', async () => {
    const holder = new RuleHolder(ruleSet([]));
    const s = await stack(upstream, {}, holder);
    try {
      const ask = async () =>
        (await run('dig', ['@127.0.0.1', '-p', String(s.dns.listening.port), '+short', 'web.prod.cluster1', 'A']))
          .stdout;
      expect(await ask()).toBe('');
      holder.replace(ruleSet(['prod/web']));
      expect(await ask()).toBe('web.prod.svc.cluster.test.\n127.0.0.11\n');
    } finally {
      await s.dns.close();
    }
  });
});

describe('other names ("forwarded byte-for-byte to the upstream")', () => {
  it('forwards A and TXT with RA and without AA, and caches the answer', async () => {
    const out = await dig('ext.example.test', 'A');
    expect(out).toMatch(/flags: qr rd ra;/);
    expect(out).toMatch(/127\.0\.0\.20/);
    const seen = upstream.queries.filter((q) => q === 'ext.example.test A').length;
    await dig('EXT.example.test', 'A');
    expect(upstream.queries.filter((q) => q === 'ext.example.test A').length).toBe(seen);
    expect(await kdig('+tcp', 'ext.example.test', 'TXT')).toMatch(/"hello"/);
  });

  it('forwards a type dns2 has no codec for (HTTPS), over UDP and TCP', async () => {
    for (const out of [await dig('ext.example.test', 'HTTPS'), await kdig('+tcp', 'ext.example.test', 'TYPE65')]) {
      expect(out).toMatch(/status: NOERROR/);
      expect(out).toMatch(/ANSWER: 1/);
    }
  });

  it('refuses them with --dns-forward=false', async () => {
    const s = await stack(upstream, { dnsForward: false });
    try {
      const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(s.dns.listening.port), 'ext.example.test', 'A']);
      expect(stdout).toMatch(/status: REFUSED/);
    } finally {
      await s.dns.close();
    }
  });
});

describe('upstream down ("upstream timeouts answer SERVFAIL within a bounded time")', () => {
  it('answers SERVFAIL for rewritten and forwarded names', async () => {
    const silent = await startTestUpstream(zone);
    silent.silent = true;
    const s = await stack(silent, { dnsUpstreamTimeout: 300 });
    try {
      // dig's +time only bounds a failure: the answer is SERVFAIL, not silence, once --dns-upstream-timeout passed
      for (const name of ['cluster1', 'ext.example.test']) {
        const { stdout } = await run('dig', [
          '@127.0.0.1',
          '-p',
          String(s.dns.listening.port),
          '+tries=1',
          '+time=20',
          name,
          'A',
        ]);
        expect(stdout).toMatch(/status: SERVFAIL/);
      }
      expect(await s.registry.getSingleMetricAsString('spoke_agent_dns_upstream_errors_total')).toMatch(
        /reason="timeout"} 2/,
      );
    } finally {
      await s.dns.close();
      await silent.close();
    }
  });
});

describe("a per-node agent's names (--node-name, --node-ips)", () => {
  it("answers this node's name with its addresses and refuses another node's, saying whose it is", async () => {
    const r = parseRules({ naming: { ...naming, node: { name: 'n1', ips: ['127.0.0.5', '::1'] } } });
    if (!r.ok) throw new Error(r.errors.join());
    const s = await stack(upstream, {}, new RuleHolder(r.value));
    try {
      const ask = async (...args: string[]) =>
        (await run('dig', ['@127.0.0.1', '-p', String(s.dns.listening.port), '+tries=1', '+time=3', ...args])).stdout;
      const own = await ask('N1.node.cluster1', 'A');
      expect(own).toMatch(/status: NOERROR/);
      expect(own).toMatch(/^N1\.node\.cluster1\.\s+5\s+IN\s+A\s+127\.0\.0\.5$/m);
      expect(await ask('n1.node.cluster1', 'AAAA')).toMatch(/IN\s+AAAA\s+::1$/m);
      expect(await ask('n2.node.cluster1', 'A')).toMatch(/status: REFUSED/);
      const other = await explain(s.dns.resolver, 'n2.node.cluster1');
      expect(other).toMatchObject({ action: 'other-node', node: 'n2', rcode: 'REFUSED' });
      expect(explanationReason(other)).toBe('the name of node n2, which only the agent on that node serves: REFUSED');
      expect(await explain(s.dns.resolver, 'n1.node.cluster1')).toMatchObject({
        action: 'rule',
        rule: { source: '--node-name', kind: 'node' },
        target: '127.0.0.5,::1',
      });
    } finally {
      await s.dns.close();
    }
  });
});

describe('no upstream at all ("a bare container: no --dns-upstream, no resolv.conf")', () => {
  it('starts with forwarding off: IP targets answer, name targets SERVFAIL, other names REFUSED, each explained', async () => {
    const values = testDnsValues('', {
      dnsBatchedUdp: false,
      dnsForward: true,
      dnsTtl: 5000,
      dnsCacheSize: 10,
      dnsUpstreamTimeout: 300,
    });
    const resolver = createResolver(
      values,
      new RuleHolder(ruleSet([])),
      new Registry(),
      createLogger('silent'),
      join(repoRoot, 'no-such-dir/resolv.conf'),
    );
    try {
      expect(resolver.forwarding).toBe(false);
      expect(resolver.upstreamDescription).toMatch(
        /^none \(no --dns-upstream and .*resolv\.conf is unreadable: ENOENT/,
      );
      const echo = await explain(resolver, 'echo.cluster1');
      expect(echo).toMatchObject({ action: 'rule', rcode: 'NOERROR' });
      expect(echo.answer.map((r) => `${r.type} ${r.data}`)).toEqual(['A 127.0.0.1']);
      expect(await explain(resolver, 'cluster1')).toMatchObject({ action: 'rule', rcode: 'SERVFAIL' });
      expect(await explain(resolver, 'ext.example.test')).toMatchObject({ action: 'refused', rcode: 'REFUSED' });
    } finally {
      resolver.close();
    }
  });
});

describe('malformed input', () => {
  // The reply to `bytes`, or undefined when it was dropped: a good query sent right after it from the
  // same socket is answered first then (the server takes a socket's datagrams in order), no timer.
  const probe = encodeQuery('cluster1', 1);
  probe.writeUInt16BE(0xbeef, 0);
  const send = (bytes: Buffer) =>
    new Promise<Buffer | undefined>((resolve) => {
      const socket = dgram.createSocket('udp4');
      socket.on('message', (m: Buffer) => {
        socket.close();
        resolve(m.readUInt16BE(0) === 0xbeef ? undefined : m);
      });
      socket.send(bytes, port, '127.0.0.1');
      socket.send(probe, port, '127.0.0.1');
    });

  it('drops what carries no ID or is a response, FORMERRs a bad question, NOTIMPs other opcodes', async () => {
    expect(await send(Buffer.from([1, 2, 3]))).toBeUndefined();
    expect(await send(Buffer.from('abcd800000010000000000000000', 'hex'))).toBeUndefined();
    const twoQuestions = await send(Buffer.from('abcd01000002000000000000', 'hex'));
    expect(twoQuestions!.toString('hex')).toBe('abcd81010000000000000000');
    const notify = await send(Buffer.from('abcd20000001000000000000', 'hex'));
    expect(notify![3]! & 0xf).toBe(4);
  });
});

describe("how the agent resolves a dial's host (resolveForDial)", () => {
  it('resolves rule targets through the upstream and names the rule', async () => {
    expect(await resolveForDial(main.dns.resolver, 'Web.Prod.Cluster1')).toEqual({
      addresses: ['127.0.0.11', '::1'],
      route: { rule: '--expose=prod/web', name: 'web.prod.svc.cluster.test' },
    });
    expect(await resolveForDial(main.dns.resolver, 'pair.cluster1')).toMatchObject({
      addresses: ['127.0.0.2', '::1'],
    });
    await expect(resolveForDial(main.dns.resolver, 'nope.prod.cluster1')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(resolveForDial(main.dns.resolver, 'nothere.default.cluster1')).rejects.toThrow(
      /nothere.default.svc.cluster.test does not exist/,
    );
    expect(
      await resolveForDial(main.dns.resolver, 'elsewhere.test', async () => [{ address: '127.0.0.9', family: 4 }]),
    ).toEqual({ addresses: ['127.0.0.9'] });
  });
});

describe('debugging', () => {
  it('explains a name: rule, target, answer', async () => {
    const e = await explain(main.dns.resolver, 'web.prod.cluster1');
    expect(e).toMatchObject({
      action: 'rule',
      rule: { source: '--expose=prod/web', kind: 'service' },
      target: 'web.prod.svc.cluster.test',
      rcode: 'NOERROR',
    });
    expect(e.answer.map((r) => `${r.type} ${r.data}`)).toEqual(['CNAME web.prod.svc.cluster.test', 'A 127.0.0.11']);
    expect(await explain(main.dns.resolver, 'x.y.cluster1')).toMatchObject({ action: 'nxdomain', rcode: 'NXDOMAIN' });
    expect(await explain(main.dns.resolver, 'ext.example.test')).toMatchObject({ action: 'forward', rcode: 'NOERROR' });
  });

  it('spoke-agent resolve asks the server and prints the chain', async () => {
    const printed = textOut();
    const { out } = printed;
    const code = await runResolveCommand(
      ['web.prod.cluster1', `--dns-port=${port}`, '--health-server-port=1', '--timeout=500ms'],
      out,
    );
    expect(code).toBe(0);
    expect(printed.text()).toMatch(/NOERROR in [\d.]+ms, flags qr aa rd ra/);
    expect(printed.text()).toMatch(/;; CNAME chain: web.prod.cluster1 -> web.prod.svc.cluster.test/);
    expect(printed.text()).toMatch(/;; addresses: 127.0.0.11/);
    expect(printed.text()).toMatch(/no explanation: .* unreachable/);
  });

  it('records what clients asked and got in the query log (batched UDP, dgram, TCP), and not its own explanations', async () => {
    const log = main.dns.resolver.queryLog!;
    const startedAt = Date.now();
    await kdig('+tcp', 'web.prod.cluster1', 'A'); // into the answers cache (the key holds the EDNS flags: the same client)
    const before = log.last;
    await dig('QLog-Probe.cluster1', 'AAAA');
    await kdig('+tcp', 'web.prod.cluster1', 'A');
    await explain(main.dns.resolver, 'web.prod.cluster1');
    const entries = log.entries(before);
    expect(entries).toEqual([
      expect.objectContaining({
        name: 'QLog-Probe.cluster1',
        type: 'AAAA',
        client: '127.0.0.1',
        transport: 'udp',
        rcode: 'NXDOMAIN',
        source: 'zone',
        truncated: false,
      }),
      expect.objectContaining({
        name: 'web.prod.cluster1',
        type: 'A',
        client: '127.0.0.1',
        transport: 'tcp',
        rcode: 'NOERROR',
        source: 'rule',
        rule: '--expose=prod/web',
        target: 'web.prod.svc.cluster.test',
        answer: ['CNAME web.prod.svc.cluster.test', 'A 127.0.0.11'],
      }),
    ]);
    const endedAt = Date.now();
    for (const e of entries) {
      expect(e.clientPort).toBeGreaterThan(0);
      expect(e.time).toBeGreaterThanOrEqual(startedAt); // the wall-clock time of the query
      expect(e.time).toBeLessThanOrEqual(endedAt);
    }
    // The probe was built from the rules (timed); web.prod.cluster1 came from the answers cache (not timed).
    expect(entries[0]).toMatchObject({ cached: false, ms: expect.any(Number) });
    expect(entries[1]).toMatchObject({ cached: true });
    expect(entries[1]!.ms).toBeUndefined();
    const dgramOnly = await stack(upstream, { dnsBatchedUdp: false });
    try {
      const resolver = new NodeResolver({ timeout: 10_000, tries: 1 });
      resolver.setServers([`127.0.0.1:${dgramOnly.dns.listening.port}`]);
      await resolver.resolve4('cluster1');
      expect(dgramOnly.dns.resolver.queryLog!.entries()).toEqual([
        expect.objectContaining({ name: 'cluster1', client: '127.0.0.1', transport: 'udp', rcode: 'NOERROR' }),
      ]);
    } finally {
      await dgramOnly.dns.close();
    }
    const off = await stack(upstream, { dnsQueryLogSize: 0 });
    expect(off.dns.resolver.queryLog).toBeUndefined();
    await off.dns.close();
  });

  it('serves the query log on /debug/queries: a list by field selector, and a watch that shows a dig as it comes', async () => {
    const health = new HealthServer({
      host: '127.0.0.1',
      port: 0,
      registry: new Registry(),
      log: createLogger('silent'),
    });
    health.addRoute('/debug/queries', queriesHandler(main.dns.resolver.queryLog));
    const url = `http://127.0.0.1:${(await health.listen()).port}/debug/queries`;
    const controller = new AbortController();
    try {
      await dig('listed.cluster1', 'A');
      const list = (await (
        await fetch(`${url}?fieldSelector=${encodeURIComponent('name=listed.cluster1,rcode=NXDOMAIN')}`)
      ).json()) as { resourceVersion: string; size: number; queries: Array<Record<string, unknown>> };
      expect(list.size).toBe(1000);
      expect(list.queries).toEqual([
        expect.objectContaining({
          name: 'listed.cluster1',
          type: 'A',
          rcode: 'NXDOMAIN',
          client: '127.0.0.1',
          time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        }),
      ]);
      expect((await fetch(`${url}?fieldSelector=phase%3DRunning`)).status).toBe(400);

      const res = await fetch(`${url}?watch=true&fieldSelector=${encodeURIComponent('rcode=NXDOMAIN')}`, {
        signal: controller.signal,
      });
      expect(res.headers.get('content-type')).toBe('application/x-ndjson');
      const reader = res.body!.getReader();
      await dig('web.prod.cluster1', 'A'); // NOERROR: not selected
      await dig('watched.cluster1', 'A');
      const { value } = await reader.read();
      const lines = Buffer.from(value!)
        .toString()
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(lines).toEqual([expect.objectContaining({ name: 'watched.cluster1', rcode: 'NXDOMAIN' })]);
      // Resuming after a list's version replays what came since.
      const since = await fetch(
        `${url}?watch=true&resourceVersion=${list.resourceVersion}&fieldSelector=${encodeURIComponent('rcode=NXDOMAIN')}`,
        { signal: controller.signal },
      );
      const replayed = Buffer.from((await since.body!.getReader().read()).value!).toString();
      expect(
        replayed
          .trim()
          .split('\n')
          .map((l) => (JSON.parse(l) as { name: string }).name),
      ).toEqual(['watched.cluster1']);

      // spoke-agent queries: the list, then (-w) what comes, until stopped.
      const printed = textOut();
      const { out } = printed;
      const healthPort = new URL(url).port;
      expect(
        await runQueriesCommand([`--health-server-port=${healthPort}`, '--field-selector=name=listed.cluster1'], out),
      ).toBe(0);
      expect(printed.text().split('\n')[0]).toBe(queryHeader);
      expect(printed.text().split('\n')[1]).toMatch(
        /^\d\d:\d\d:\d\d\.\d{3}Z 127\.0\.0\.1:\d+ +udp +A +NXDOMAIN +listed\.cluster1 - [\d.]+ms$/,
      );
      printed.clear();
      const tail = runQueriesCommand(
        [`--health-server-port=${healthPort}`, '-w', '--output=json', '--field-selector=rcode=NXDOMAIN'],
        out,
        controller.signal,
      );
      await waitUntil(() => printed.text().includes('"name":"watched.cluster1"'), 20_000, 'the held queries');
      await dig('tailed.cluster1', 'A');
      await waitUntil(() => printed.text().includes('"name":"tailed.cluster1"'), 20_000, 'the new query in the tail');
      controller.abort();
      expect(await tail).toBe(0);
      expect(await runQueriesCommand(['--health-server-port=1'], out)).toBe(1);
    } finally {
      controller.abort();
      await health.close();
    }
  });

  it('counts requests, responses by rcode and cache hits', async () => {
    const metrics = await main.registry.metrics();
    expect(metrics).toMatch(/spoke_agent_dns_requests_total\{proto="udp",type="A"\} \d+/);
    expect(metrics).toMatch(/spoke_agent_dns_responses_total\{rcode="NXDOMAIN",source="zone"\} \d+/);
    expect(metrics).toMatch(/spoke_agent_dns_cache_hits_total\{cache="upstream"\} [1-9]/);
    expect(metrics).toMatch(/spoke_agent_dns_upstream_duration_seconds_count\{proto="udp"\} [1-9]/);
  });
});
