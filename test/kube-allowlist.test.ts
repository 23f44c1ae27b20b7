// The dial allowlist (agent/allowlist.ts): CIDR matching, and decisions against what rules resolve to.
// Only loopback addresses are ever dialled; other addresses appear as data only.
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { cidrContains, DialAllowlist, ipBytes, parseCidr, type Cidr, type DialResolution } from '../agent/allowlist.js';
import { dialTcp } from '../agent/dialer.js';
import { resolveForDial as resolveThroughRules } from '../dns/dial.js';
import { createResolver } from '../dns/setup.js';
import { createLogger } from '../observability/log.js';
import { RuleHolder } from '../rules/holder.js';
import { parseRules } from '../rules/rule-set.js';
import { startEchoServer, type Target } from './support/targets.js';

const cidr = (text: string): Cidr => {
  const c = parseCidr(text);
  if (typeof c === 'string') throw new Error(c);
  return c;
};

describe('CIDR matching', () => {
  it('parses IPv4 and IPv6, with embedded and mapped IPv4', () => {
    expect([...ipBytes('10.1.2.3')!]).toEqual([10, 1, 2, 3]);
    expect([...ipBytes('::ffff:10.1.2.3')!]).toEqual([10, 1, 2, 3]);
    expect([...ipBytes('::ffff:a01:203')!]).toEqual([10, 1, 2, 3]);
    expect([...ipBytes('fd00::1')!]).toEqual([0xfd, 0, ...new Array(13).fill(0), 1]);
    expect([...ipBytes('64:ff9b::192.0.2.33')!].slice(12)).toEqual([192, 0, 2, 33]);
    expect(ipBytes('fe80::1%eth0')).toHaveLength(16);
    expect(ipBytes('nope')).toBeUndefined();
  });

  it('matches prefixes on and off byte boundaries', () => {
    expect(cidrContains(cidr('10.0.0.0/8'), '10.255.0.1')).toBe(true);
    expect(cidrContains(cidr('10.0.0.0/8'), '11.0.0.1')).toBe(false);
    expect(cidrContains(cidr('172.16.0.0/12'), '172.31.255.255')).toBe(true);
    expect(cidrContains(cidr('172.16.0.0/12'), '172.32.0.0')).toBe(false);
    expect(cidrContains(cidr('0.0.0.0/0'), '169.254.169.254')).toBe(true);
    expect(cidrContains(cidr('10.0.0.5'), '10.0.0.5')).toBe(true);
    expect(cidrContains(cidr('10.0.0.5'), '10.0.0.6')).toBe(false);
    expect(cidrContains(cidr('fd00::/8'), 'fdab::1')).toBe(true);
    expect(cidrContains(cidr('fd00::/8'), 'fe80::1')).toBe(false);
    expect(cidrContains(cidr('2001:db8::/33'), '2001:db8:7fff::1')).toBe(true);
    expect(cidrContains(cidr('2001:db8::/33'), '2001:db8:8000::1')).toBe(false);
    // IPv4-mapped IPv6 is the IPv4 address, both ways
    expect(cidrContains(cidr('10.0.0.0/8'), '::ffff:10.0.0.1')).toBe(true);
    expect(cidrContains(cidr('::ffff:10.0.0.0/104'), '10.0.0.1')).toBe(true);
    // families never mix otherwise
    expect(cidrContains(cidr('::/0'), '10.0.0.1')).toBe(false);
    expect(cidrContains(cidr('0.0.0.0/0'), 'fd00::1')).toBe(false);
  });

  it('rejects malformed CIDRs with a message', () => {
    expect(parseCidr('10.0.0.0/33')).toMatch(/invalid prefix length/);
    expect(parseCidr('10.0.0/8')).toMatch(/is not a CIDR/);
    expect(parseCidr('fd00::/129')).toMatch(/invalid prefix length/);
    expect(parseCidr('10.0.0.0/x')).toMatch(/invalid prefix length/);
  });
});

describe('DialAllowlist', () => {
  const naming = { cluster: 'cluster1', agentNamespace: '', clusterDomain: 'cluster.local' };
  const parsed = parseRules({
    naming,
    expose: ['default/web'],
    file: { origin: 'rules.yaml', content: 'static: [{name: db.cluster1, target: 127.0.0.2}]' },
  });
  if (!parsed.ok) throw new Error(parsed.errors.join());
  const rules = parsed.value;
  const calls: string[] = [];
  // Stands in for dns/dial.ts: rule names resolve to loopback; other names "resolve" through the system.
  const resolveForDial = async (host: string): Promise<DialResolution> => {
    calls.push(host);
    const match = rules.match(host);
    if (host === 'web.default.cluster1' || host === rules.hosts()[2])
      return { addresses: [{ address: '127.0.0.1' }], match };
    if (match?.target.kind === 'ip') return { addresses: match.target.v4.map((address) => ({ address })), match };
    if (host === 'elsewhere.example') return { addresses: [{ address: '127.0.0.3' }] };
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  };
  const make = (cidrs: string[] = []) => {
    const registry = new Registry();
    const denied: string[] = [];
    const allowlist = new DialAllowlist({
      resolveForDial,
      cidrs: cidrs.map(cidr),
      registry,
      onDenied: (_h, _a, why) => denied.push(why),
    });
    return { allowlist, registry, denied };
  };
  let target: Target | undefined;
  afterEach(async () => target?.close());

  it('allows what rules resolve to, by name and, after a refresh, by address', async () => {
    const { allowlist } = make();
    await allowlist.refresh(rules);
    expect(allowlist.authorize('127.0.0.1', '127.0.0.1')).toBeUndefined();
    expect(allowlist.authorize('127.0.0.2', '127.0.0.2')).toBeUndefined();
    expect(await allowlist.resolve('Web.Default.Cluster1.')).toEqual(['127.0.0.1']);
    expect(allowlist.authorize('Web.Default.Cluster1.', '127.0.0.1')).toBeUndefined();
  });

  it('refuses the metadata service, a private address, and names no rule serves, counting each', async () => {
    const { allowlist, registry, denied } = make();
    await allowlist.refresh(rules);
    expect(allowlist.authorize('169.254.169.254', '169.254.169.254')).toMatch(
      /^not allowed: 169.254.169.254 is not an address any rule resolves to/,
    );
    expect(allowlist.authorize('10.0.0.5', '10.0.0.5')).toMatch(/not an address any rule resolves to/);
    expect(await allowlist.resolve('elsewhere.example')).toEqual(['127.0.0.3']);
    expect(allowlist.authorize('elsewhere.example', '127.0.0.3')).toBe(
      'not allowed: no rule serves "elsewhere.example" and 127.0.0.3 is not inside --allowed-cidrs',
    );
    // a rule name whose answer does not contain the address
    await allowlist.resolve('db.cluster1');
    expect(allowlist.authorize('db.cluster1', '127.0.0.1')).toMatch(
      /is not what the rule for "db.cluster1" resolves to/,
    );
    expect(denied).toHaveLength(4);
    const metric = await registry.getSingleMetricAsString('spoke_agent_dials_denied_total');
    expect(metric).toContain('spoke_agent_dials_denied_total{reason="not_a_rule_address"} 2');
    expect(metric).toContain('spoke_agent_dials_denied_total{reason="no_rule"} 2');
  });

  it('lets --allowed-cidrs through, IPv4 and IPv6', async () => {
    const { allowlist } = make(['10.0.0.0/8', 'fd00::/8']);
    expect(allowlist.authorize('10.0.0.5', '10.0.0.5')).toBeUndefined();
    expect(allowlist.authorize('fd00::5', 'fd00::5')).toBeUndefined();
    expect(allowlist.authorize('169.254.169.254', '169.254.169.254')).toMatch(/not allowed/);
  });

  it('forgets addresses of rules that are gone', async () => {
    const { allowlist } = make();
    await allowlist.refresh(rules);
    const fewer = parseRules({ naming, expose: ['default/web'] });
    if (!fewer.ok) throw new Error();
    await allowlist.refresh(fewer.value);
    expect(allowlist.authorize('127.0.0.2', '127.0.0.2')).toMatch(/not allowed/);
    expect(allowlist.authorize('127.0.0.1', '127.0.0.1')).toBeUndefined();
  });

  it('refuses in the dialer before any connection attempt, with the reason in the error', async () => {
    target = await startEchoServer('127.0.0.3');
    const { allowlist } = make();
    await allowlist.refresh(rules);
    const dial = (address: string) =>
      dialTcp(address, { timeoutMs: 2000, resolve: allowlist.resolve, authorize: allowlist.authorize });
    await expect(dial(`127.0.0.3:${target.port}`)).rejects.toMatchObject({
      reason: 'denied',
      message: `dial tcp 127.0.0.3:${target.port}: not allowed: 127.0.0.3 is not an address any rule resolves to, nor inside --allowed-cidrs`,
    });
    await expect(dial(`elsewhere.example:${target.port}`)).rejects.toMatchObject({ reason: 'denied' });
    await expect(dial(`nothere.default.cluster1:${target.port}`)).rejects.toMatchObject({ reason: 'unresolvable' });
    expect(target.accepted()).toBe(0);
    // the same listener is reachable once a CIDR covers it: the refusals above were not for lack of a server
    const open = make(['127.0.0.3/32']).allowlist;
    const socket = await dialTcp(`127.0.0.3:${target.port}`, { timeoutMs: 2000, authorize: open.authorize });
    socket.destroy();
    await new Promise((r) => setTimeout(r, 20));
    expect(target.accepted()).toBe(1);
  });

  it('allows the host= names of --agent-identifiers by name, resolved by the system resolver (/etc/hosts)', async () => {
    // cluster-proxy's service-proxy host is such a name, mapped to 127.0.0.1 by the pod's hostAliases;
    // "localhost" is in every /etc/hosts and served by no rule here, so it takes the same path.
    target = await startEchoServer('127.0.0.1');
    const registry = new Registry();
    const resolver = createResolver(
      {
        dnsBindAddress: '127.0.0.1',
        dnsPort: 0,
        dnsUpstream: '127.0.0.1:9',
        dnsBatchedUdp: false,
        dnsForward: false,
        dnsTtl: 1000,
        dnsCacheSize: 10,
        dnsUpstreamTimeout: 500,
        dnsQueryLogSize: 0,
      },
      new RuleHolder(rules),
      registry,
      createLogger('silent'),
    );
    try {
      const allowlist = new DialAllowlist({
        resolveForDial: (h) => resolveThroughRules(resolver, h),
        cidrs: [],
        identifierHosts: ['LocalHost.', 'cluster1'],
        registry,
      });
      await allowlist.refresh(rules);
      const dial = (address: string) =>
        dialTcp(address, { timeoutMs: 2000, resolve: allowlist.resolve, authorize: allowlist.authorize });
      (await dial(`localhost:${target.port}`)).destroy();
      await expect(dial(`127.0.0.1:${target.port}`)).rejects.toMatchObject({ reason: 'denied' }); // the name, not its address
      await new Promise((r) => setTimeout(r, 20));
      expect(target.accepted()).toBe(1);
      // an identifier in the rules' zone that no rule serves stays unresolvable
      const zone = new DialAllowlist({
        resolveForDial: (h) => resolveThroughRules(resolver, h),
        cidrs: [],
        identifierHosts: ['nothere.cluster1'],
        registry: new Registry(),
      });
      await expect(
        dialTcp(`nothere.cluster1:${target.port}`, {
          timeoutMs: 2000,
          resolve: zone.resolve,
          authorize: zone.authorize,
        }),
      ).rejects.toMatchObject({ reason: 'unresolvable' });
    } finally {
      resolver.close();
    }
  });
});
