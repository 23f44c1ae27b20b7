// The dial policy: the allowlist's decisions against what rules resolve to (allowlist.ts), and its
// wiring to the rules (dial-policy.ts). Only loopback addresses are ever dialled; other addresses
// appear as data only.
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type Cidr, parseCidr } from '../net/cidr.js';
import { DialAllowlist } from './allowlist.js';
import type { HostResolver } from './contract.js';
import { startDialPolicy } from './dial-policy.js';
import { dialTcp } from '../agent/dialer.js';
import { resolveForDial as resolveThroughRules } from './resolve.js';
import { createResolver } from '../dns/setup.js';
import { createLogger } from '../observability/log.js';
import { RuleHolder } from '../rules/holder.js';
import { parseRules, type RuleSet } from '../rules/rule-set.js';
import { testDnsValues } from '../test/support/dns-values.js';
import { startEchoServer, type Target } from '../test/support/targets.js';

const cidr = (text: string): Cidr => {
  const c = parseCidr(text);
  if (typeof c === 'string') throw new Error(c);
  return c;
};

/** The embedded resolver over `rules`, as the agent builds it; no upstream is ever asked. */
const rulesResolver = (rules: RuleSet, registry: Registry) =>
  createResolver(
    testDnsValues('127.0.0.1:9', { dnsBatchedUdp: false, dnsCacheSize: 10 }),
    new RuleHolder(rules),
    registry,
    createLogger('silent'),
  );

describe('DialAllowlist', () => {
  const naming = { cluster: 'cluster1', agentNamespace: '', clusterDomain: 'cluster.local' };
  const parsed = parseRules({
    naming,
    expose: ['default/web'],
    file: { origin: 'rules.yaml', content: 'static: [{name: db.cluster1, target: 127.0.0.2}]' },
  });
  if (!parsed.ok) throw new Error(parsed.errors.join());
  const rules = parsed.value;
  // Stands in for resolve.ts: rule names resolve to loopback; other names "resolve" through the system.
  const resolveForDial: HostResolver = async (host) => {
    const match = rules.match(host);
    const route = { rule: match?.rule.source, name: match?.target.kind === 'fqdn' ? match.target.fqdn : undefined };
    if (host === 'web.default.cluster1' || host === rules.hosts()[2]) return { addresses: ['127.0.0.1'], route };
    if (match?.target.kind === 'ip') return { addresses: match.target.v4, route };
    if (host === 'elsewhere.example') return { addresses: ['127.0.0.3'] };
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  };
  const make = (cidrs: string[] = []) => {
    const registry = new Registry();
    const allowlist = new DialAllowlist({
      resolveForDial,
      cidrs: cidrs.map(cidr),
      registry,
    });
    return { allowlist, registry };
  };
  let target: Target | undefined;
  afterEach(async () => target?.close());

  it('allows what rules resolve to, by name and, after a refresh, by address', async () => {
    const { allowlist } = make();
    await allowlist.refresh(rules);
    expect(allowlist.authorize('127.0.0.1', '127.0.0.1', 443)).toBeUndefined();
    expect(allowlist.authorize('127.0.0.2', '127.0.0.2', 443)).toBeUndefined();
    expect(await allowlist.resolve('Web.Default.Cluster1.')).toEqual({
      addresses: ['127.0.0.1'],
      route: { rule: '--expose=default/web', name: 'web.default.svc.cluster.local' },
    });
    expect(allowlist.authorize('Web.Default.Cluster1.', '127.0.0.1', 443)).toBeUndefined();
  });

  it('refuses the metadata service, a private address, and names no rule serves, counting each', async () => {
    const { allowlist, registry } = make();
    await allowlist.refresh(rules);
    expect(allowlist.authorize('169.254.169.254', '169.254.169.254', 443)).toMatch(
      /^not allowed: 169.254.169.254 is not an address any rule resolves to/,
    );
    expect(allowlist.authorize('10.0.0.5', '10.0.0.5', 443)).toMatch(/not an address any rule resolves to/);
    expect(await allowlist.resolve('elsewhere.example')).toEqual({ addresses: ['127.0.0.3'] });
    expect(allowlist.authorize('elsewhere.example', '127.0.0.3', 443)).toBe(
      'not allowed: no rule serves "elsewhere.example" and 127.0.0.3 is not inside --allowed-cidrs',
    );
    // a rule name whose answer does not contain the address
    await allowlist.resolve('db.cluster1');
    expect(allowlist.authorize('db.cluster1', '127.0.0.1', 443)).toMatch(
      /is not what the rule for "db.cluster1" resolves to/,
    );
    const metric = await registry.getSingleMetricAsString('spoke_agent_dials_denied_total');
    expect(metric).toContain('spoke_agent_dials_denied_total{reason="not_a_rule_address"} 2');
    expect(metric).toContain('spoke_agent_dials_denied_total{reason="no_rule"} 2');
  });

  it('lets --allowed-cidrs through, IPv4 and IPv6', async () => {
    const { allowlist } = make(['10.0.0.0/8', 'fd00::/8']);
    expect(allowlist.authorize('10.0.0.5', '10.0.0.5', 443)).toBeUndefined();
    expect(allowlist.authorize('fd00::5', 'fd00::5', 443)).toBeUndefined();
    expect(allowlist.authorize('169.254.169.254', '169.254.169.254', 443)).toMatch(/not allowed/);
  });

  it('forgets addresses of rules that are gone', async () => {
    const { allowlist } = make();
    await allowlist.refresh(rules);
    const fewer = parseRules({ naming, expose: ['default/web'] });
    if (!fewer.ok) throw new Error();
    await allowlist.refresh(fewer.value);
    expect(allowlist.authorize('127.0.0.2', '127.0.0.2', 443)).toMatch(/not allowed/);
    expect(allowlist.authorize('127.0.0.1', '127.0.0.1', 443)).toBeUndefined();
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
    const { socket } = await dialTcp(`127.0.0.3:${target.port}`, { timeoutMs: 2000, authorize: open.authorize });
    socket.destroy();
    await target.whenAccepted(1);
    expect(target.accepted()).toBe(1);
  });

  it('allows the host= names of --agent-identifiers by name, resolved by the system resolver (/etc/hosts)', async () => {
    // cluster-proxy's service-proxy host is such a name, mapped to 127.0.0.1 by the pod's hostAliases;
    // "localhost" is in every /etc/hosts and served by no rule here, so it takes the same path.
    target = await startEchoServer('127.0.0.1');
    const registry = new Registry();
    const resolver = rulesResolver(rules, registry);
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
      (await dial(`localhost:${target.port}`)).socket.destroy();
      await expect(dial(`127.0.0.1:${target.port}`)).rejects.toMatchObject({ reason: 'denied' }); // the name, not its address
      await target.whenAccepted(1);
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

describe('startDialPolicy', () => {
  const naming = { cluster: 'cluster1', agentNamespace: '', clusterDomain: 'cluster.local' };
  const rulesOf = (content: string) => {
    const r = parseRules({ naming, file: { origin: 'f', content } });
    if (!r.ok) throw new Error(r.errors.join());
    return r.value;
  };

  it('dials anything without rules (saying so once), and only rule targets plus CIDRs with them', async () => {
    const warnings: string[] = [];
    const spy = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(JSON.parse(line).msg) });
    const open = await startDialPolicy({
      options: { allowedCidrs: [], kubeletPort: 10250, nodeLocalPorts: [] },
      registry: new Registry(),
      log: spy,
    });
    expect(open.authorize).toBeUndefined();
    expect(warnings).toEqual([expect.stringMatching(/dials any address the hub names/)]);
    const registry = new Registry();
    const resolver = rulesResolver(rulesOf('static: [{name: db.cluster1, target: 127.0.0.2}]'), registry);
    const closed = await startDialPolicy({
      options: { allowedCidrs: ['10.0.0.0/8'], kubeletPort: 10250, nodeLocalPorts: [] },
      resolver,
      registry,
      log: spy,
    });
    await vi.waitFor(() => expect(closed.authorize!('127.0.0.2', '127.0.0.2', 443)).toBeUndefined());
    expect(closed.authorize!('169.254.169.254', '169.254.169.254', 443)).toMatch(/not allowed/);
    expect(closed.authorize!('10.0.0.5', '10.0.0.5', 443)).toBeUndefined();
    closed.stop();
    resolver.close();
  });

  it('keeps the newest rules when an older refresh finishes last', async () => {
    // Two rules edits in a row: the first one's names resolve slowly, the second's at once. The
    // slow answer must not replace what the second edit's refresh learned.
    const before = rulesOf('static: [{name: old.cluster1, target: slow.example}]');
    const after = rulesOf('static: [{name: new.cluster1, target: 127.0.0.7}]');
    let releaseSlow!: () => void;
    const slow = new Promise<void>((resolve) => {
      releaseSlow = resolve;
    });
    const resolveForDial: HostResolver = async (host) => {
      if (host === 'old.cluster1') {
        await slow;
        return { addresses: ['127.0.0.6'], route: { rule: 'f: static[0] (old.cluster1)' } };
      }
      return { addresses: ['127.0.0.7'], route: { rule: 'f: static[0] (new.cluster1)' } };
    };
    const allowlist = new DialAllowlist({ resolveForDial, cidrs: [], registry: new Registry() });
    const first = allowlist.refresh(before);
    await allowlist.refresh(after);
    expect(allowlist.authorize('127.0.0.7', '127.0.0.7', 443)).toBeUndefined();
    releaseSlow();
    await first;
    expect(allowlist.authorize('127.0.0.7', '127.0.0.7', 443)).toBeUndefined();
    expect(allowlist.authorize('127.0.0.6', '127.0.0.6', 443)).toMatch(/not an address any rule resolves to/);
  });
});

describe('a per-node agent (node-local.ts)', () => {
  // This node is 127.0.0.5 and another node 127.0.0.6: each "kubelet" an echo server on loopback.
  const naming = {
    cluster: 'cluster1',
    agentNamespace: '',
    clusterDomain: 'cluster.local',
    node: { name: 'n1', ips: ['127.0.0.5'] },
  };
  const targets: Target[] = [];
  afterEach(async () => {
    for (const t of targets.splice(0)) await t.close();
  });

  it('dials its node on the kubelet and node-local ports only, never another node, by address or name', async () => {
    const kubelet = await startEchoServer('127.0.0.5');
    const exporter = await startEchoServer('127.0.0.5');
    const ssh = await startEchoServer('127.0.0.5');
    const otherKubelet = await startEchoServer('127.0.0.6');
    targets.push(kubelet, exporter, ssh, otherKubelet);
    const parsed = parseRules({ naming });
    if (!parsed.ok) throw new Error(parsed.errors.join());
    const registry = new Registry();
    const resolver = rulesResolver(parsed.value, registry);
    // --allowed-cidrs covering every node does not open other ports of this one.
    const policy = await startDialPolicy({
      options: { allowedCidrs: ['127.0.0.0/8'], kubeletPort: kubelet.port, nodeLocalPorts: [String(exporter.port)] },
      nodeIps: ['127.0.0.5'],
      resolver,
      registry,
      log: createLogger('silent'),
    });
    const dial = (address: string) =>
      dialTcp(address, { timeoutMs: 2000, resolve: policy.resolve, authorize: policy.authorize });
    try {
      (await dial(`127.0.0.5:${kubelet.port}`)).socket.destroy();
      (await dial(`n1.node.cluster1:${kubelet.port}`)).socket.destroy();
      (await dial(`N1.Node.Cluster1.:${exporter.port}`)).socket.destroy();
      await kubelet.whenAccepted(2);
      await exporter.whenAccepted(1);

      const ports = [kubelet.port, exporter.port].sort((a, b) => a - b).join(', ');
      await expect(dial(`127.0.0.5:${ssh.port}`)).rejects.toMatchObject({
        reason: 'denied',
        message: `dial tcp 127.0.0.5:${ssh.port}: not allowed: 127.0.0.5 is this node's address, where only ports ${ports} are dialled (--kubelet-port, --node-local-ports)`,
      });
      await expect(dial(`n1.node.cluster1:${ssh.port}`)).rejects.toMatchObject({ reason: 'denied' });
      await expect(dial(`n2.node.cluster1:${kubelet.port}`)).rejects.toMatchObject({
        reason: 'denied',
        message: `dial tcp n2.node.cluster1:${kubelet.port}: not allowed: n2.node.cluster1 is the name of node n2, which only the agent on that node serves`,
      });
      expect(ssh.accepted()).toBe(0);
      const metric = await registry.getSingleMetricAsString('spoke_agent_dials_denied_total');
      expect(metric).toContain('spoke_agent_dials_denied_total{reason="node_port"} 2');
      expect(metric).toContain('spoke_agent_dials_denied_total{reason="other_node"} 1');

      // Without a CIDR that covers it, another node's address is refused, naming this node's.
      const strict = await startDialPolicy({
        options: { allowedCidrs: [], kubeletPort: otherKubelet.port, nodeLocalPorts: [] },
        nodeIps: ['127.0.0.5'],
        resolver,
        registry: new Registry(),
        log: createLogger('silent'),
      });
      await expect(
        dialTcp(`127.0.0.6:${otherKubelet.port}`, { timeoutMs: 2000, authorize: strict.authorize }),
      ).rejects.toMatchObject({
        reason: 'denied',
        message: `dial tcp 127.0.0.6:${otherKubelet.port}: not allowed: 127.0.0.6 is not this node's address (--node-ips=127.0.0.5), not an address any rule resolves to, nor inside --allowed-cidrs`,
      });
      expect(otherKubelet.accepted()).toBe(0);
      strict.stop();
    } finally {
      policy.stop();
      resolver.close();
    }
  });
});
