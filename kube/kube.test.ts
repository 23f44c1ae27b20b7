import http from 'node:http';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { parseFlags } from '../flags/flags.js';
import { RuleHolder } from '../rules/holder.js';
import { parseRules } from '../rules/rule-set.js';
import { autoExposed } from './auto-expose.js';
import { composeRules, configMapRules } from './compose.js';
import { delegatedAuthGuard, type Reviewer } from './delegated-auth.js';
import { KubeMetrics } from './metrics.js';
import { kubeFlags, validateKubeOptions } from './options.js';
import { followRuleIdentifiers } from './reregister.js';
import { hashedServiceHost } from '../rules/naming.js';
import { ManualClock } from '../test/support/manual-clock.js';

const log = pino({ level: 'silent' });
const naming = { cluster: 'cluster1', agentNamespace: '', clusterDomain: 'cluster.local' };

describe('auto-expose', () => {
  const svc = (namespace: string, name: string, annotations: Record<string, string> = {}) => ({
    namespace,
    name,
    annotations,
  });
  it('exposes annotated Services and whole selected namespaces; the opt-out wins', () => {
    const rules = autoExposed(
      [
        svc('a', 'on', { 'spoke-agent.io/expose': 'true' }),
        svc('a', 'plain'),
        svc('b', 'x'),
        svc('b', 'out', { 'spoke-agent.io/expose': 'false' }),
        svc('c', 'odd', { 'spoke-agent.io/expose': 'yes' }),
      ],
      { annotation: 'spoke-agent.io/expose', namespaces: new Set(['b']) },
    );
    expect(rules.map((r) => `${r.namespace}/${r.service}`)).toEqual(['a/on', 'b/x']);
    expect(rules[0]!.source).toBe('auto-expose a/on (annotation spoke-agent.io/expose=true)');
    expect(rules[1]!.source).toBe('auto-expose b/x (namespace selector)');
  });
});

describe('composing rules', () => {
  it('takes the ConfigMap in the rules-file format and names it in errors', () => {
    const text = configMapRules('spoke/rules', { data: { 'rules.yaml': 'expose: [default/web]' } });
    expect(text).toEqual({ origin: 'configmap spoke/rules rules.yaml', content: 'expose: [default/web]' });
    expect(configMapRules('spoke/rules', undefined)).toBeUndefined();
    expect(configMapRules('spoke/rules', { data: { other: '' } })).toBe(
      'configmap spoke/rules: no "rules.yaml" or "rules.json" key (has: other)',
    );
    expect(configMapRules('spoke/rules', { data: { 'rules.yaml': '', 'rules.json': '{}' } })).toMatch(/has both/);
    const bad = composeRules({
      naming,
      expose: [],
      files: [{ origin: 'configmap spoke/rules rules.yaml', content: 'expose: [nope]' }],
      autoExposed: [],
      services: [],
    });
    expect(bad.ok ? [] : bad.errors).toEqual([
      'configmap spoke/rules rules.yaml: expose[0] (nope): want NAMESPACE/SERVICE or NAMESPACE/*, got "nope"',
    ]);
  });

  it('merges flags, files and auto-exposed Services, and expands NAMESPACE/* with known Services', () => {
    const r = composeRules({
      naming,
      expose: ['default/web'],
      files: [
        { origin: 'f', content: 'expose: [prod/*]' },
        { origin: 'cm', content: 'static: [{name: db.cluster1, target: 10.0.0.7}]' },
      ],
      autoExposed: autoExposed([{ namespace: 'x', name: 'y', annotations: { k: 'true' } }], {
        annotation: 'k',
        namespaces: new Set(),
      }),
      services: [{ namespace: 'prod', name: 'api' }],
    });
    if (!r.ok) throw new Error(r.errors.join());
    expect(r.value.hosts()).toEqual(
      expect.arrayContaining(['web.default.cluster1', 'api.prod.cluster1', 'db.cluster1', 'y.x.cluster1']),
    );
  });
});

describe('auto-expose collisions', () => {
  it('leaves out an auto-exposed Service that collides with an explicit rule, and says so', () => {
    const r = composeRules({
      naming,
      expose: [],
      files: [{ origin: 'cm', content: 'static: [{name: web.prod.cluster1, target: 10.0.0.7}]' }],
      autoExposed: autoExposed(
        [
          { namespace: 'prod', name: 'web', annotations: { k: 'true' } },
          { namespace: 'prod', name: 'api', annotations: { k: 'true' } },
        ],
        { annotation: 'k', namespaces: new Set() },
      ),
      services: [],
    });
    if (!r.ok) throw new Error(r.errors.join());
    expect(r.value.match('web.prod.cluster1')?.target).toEqual({ kind: 'ip', v4: ['10.0.0.7'], v6: [] });
    expect(r.value.match('api.prod.cluster1')).toBeDefined();
    expect(r.skipped?.[0]).toMatch(/collides with auto-expose prod\/web/);
  });
});

describe('flags', () => {
  it('parses and checks the kube group', () => {
    const { values } = parseFlags(kubeFlags, [
      '--rules-configmap=spoke/rules',
      '--auto-expose-namespace-selector=team=a',
    ]);
    expect(validateKubeOptions(values)).toBe('--auto-expose-namespace-selector needs --auto-expose');
    expect(() => parseFlags(kubeFlags, ['--rules-configmap=rules'])).toThrow(/want NAMESPACE\/NAME/);
    expect(() => parseFlags(kubeFlags, ['--debug-auth=maybe'])).toThrow(/auto, true or false/);
  });
});

describe('re-registration', () => {
  it('sends the rule names once for a burst of rule changes, a group per rule, leaving out --agent-identifiers names', async () => {
    const clock = new ManualClock();
    const rules = (expose: string[]) => {
      const r = parseRules({ naming, expose });
      if (!r.ok) throw new Error();
      return r.value;
    };
    const holder = new RuleHolder(rules([]));
    const sent: string[][] = [];
    const stop = followRuleIdentifiers({
      holder,
      clients: { setIdentifierGroups: (g) => void sent.push([...g]) },
      extra: 'default-route=true&host=d.c.cluster1',
      debounceMs: 100,
      clock,
      log,
    });
    holder.replace(rules(['a/b']));
    await clock.advance(50);
    holder.replace(rules(['a/b', 'c/d']));
    await clock.advance(99);
    expect(sent).toEqual([]);
    await clock.advance(1);
    // b.a has its stream; d.c is one of the agent's own (--agent-identifiers), only its hashed name is a rule's
    expect(sent).toEqual([
      [
        `host=b.a.cluster1&host=${hashedServiceHost('cluster1', 'a', 'b')}`,
        `host=${hashedServiceHost('cluster1', 'c', 'd')}`,
      ],
    ]);
    // the same names again: nothing to do
    holder.replace(rules(['c/d', 'a/b']));
    await clock.advance(200);
    expect(sent).toHaveLength(1);
    // a steady trickle still goes out
    for (let i = 0; i < 10; i++) {
      holder.replace(rules([`n${i}/s`]));
      await clock.advance(60);
    }
    expect(sent.length).toBeGreaterThanOrEqual(2);
    stop();
  });
});

describe('delegated auth guard', () => {
  async function serve(guard: ReturnType<typeof delegatedAuthGuard>) {
    const server = http.createServer(async (req, res) => {
      if (await guard(req, res)) res.writeHead(200).end('ok');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    const get = async (token?: string) =>
      (
        await fetch(`http://127.0.0.1:${port}/debug/rules`, {
          headers: token ? { authorization: `Bearer ${token}` } : {},
        })
      ).status;
    return { get, close: () => new Promise((r) => server.close(r)) };
  }

  it('answers 401, 403 and 200, caches decisions briefly, and does not cache API errors', async () => {
    let now = 0;
    const calls: string[] = [];
    let failing = false;
    const reviewer: Reviewer = {
      async authenticate(token) {
        calls.push(`tr ${token}`);
        if (failing) throw new Error('connect ECONNREFUSED');
        return token === 'alice' || token === 'bob' ? { username: token } : undefined;
      },
      async authorize(user, attributes) {
        calls.push(
          `sar ${user.username} ${attributes.verb} ${'path' in attributes ? attributes.path : attributes.resource}`,
        );
        return { allowed: user.username === 'alice' };
      },
    };
    const registry = new Registry();
    const guard = delegatedAuthGuard({
      reviewer,
      path: '/debug/spoke-agent',
      log,
      metrics: new KubeMetrics(registry),
      cacheTtlMs: 1000,
      now: () => now,
    });
    const s = await serve(guard);
    try {
      expect(await s.get()).toBe(401);
      expect(await s.get('mallory')).toBe(401);
      expect(await s.get('bob')).toBe(403);
      expect(await s.get('alice')).toBe(200);
      expect(await s.get('alice')).toBe(200);
      expect(calls).toEqual([
        'tr mallory',
        'tr bob',
        'sar bob get /debug/spoke-agent',
        'tr alice',
        'sar alice get /debug/spoke-agent',
      ]);
      now = 1001;
      failing = true;
      expect(await s.get('alice')).toBe(503);
      failing = false;
      expect(await s.get('alice')).toBe(200);
      expect(await registry.getSingleMetricAsString('spoke_agent_kube_auth_decisions_total')).toContain(
        'spoke_agent_kube_auth_decisions_total{result="allowed",cached="true"} 1',
      );
    } finally {
      await s.close();
    }
  });
});

describe('the kubeconfig', () => {
  it('names the deferred modules a kubeconfig needs: a proxy, an auth provider; none in a pod', async () => {
    const { optionalModules } = await import('./config.js');
    const none = {
      clusters: [{ name: 'c', server: 'https://10.96.0.1', skipTLSVerify: false }],
      users: [{ name: 'u', authProvider: { name: 'tokenFile', config: { tokenFile: '/t' } } }],
    };
    expect(optionalModules(none)).toEqual([]);
    const proxied = { ...none, clusters: [{ ...none.clusters[0]!, proxyUrl: 'http://proxy:3128' }] };
    expect(optionalModules(proxied).sort()).toEqual(['hpagent', 'socks-proxy-agent']);
    const oidc = {
      ...none,
      users: [
        { name: 'u', authProvider: { name: 'oidc', config: {} } },
        { name: 'g', authProvider: { name: 'gcp', config: {} } },
      ],
    };
    expect(optionalModules(oidc).sort()).toEqual(['jsonpath-plus', 'openid-client']);
  });
});
