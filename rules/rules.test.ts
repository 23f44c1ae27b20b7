import { describe, expect, it } from 'vitest';
import { RuleHolder } from './holder.js';
import { agentIdentifiers, packGroups } from './identifiers.js';
import { hashedServiceHost, normalizeName } from './naming.js';
import { parseRuleFile } from './rule-file.js';
import { parseRules, type RuleSet } from './rule-set.js';
import { rulesFromFlags } from './from-flags.js';

const naming = {
  cluster: 'cluster1',
  agentNamespace: 'open-cluster-management-cluster-proxy',
  clusterDomain: 'cluster.local',
};

function rules(expose: string[], file?: unknown, services?: { namespace: string; name: string }[]): RuleSet {
  const r = parseRules({
    naming,
    expose,
    file: file === undefined ? undefined : { origin: 'rules.yaml', content: file },
    services,
  });
  if (!r.ok) throw new Error(r.errors.join('\n'));
  return r.value;
}

function errors(expose: string[], file?: unknown, ctx = naming): string[] {
  const r = parseRules({
    naming: ctx,
    expose,
    file: file === undefined ? undefined : { origin: 'rules.yaml', content: file },
  });
  return r.ok ? [] : r.errors;
}

describe('naming', () => {
  it('hashes service hosts like cluster-proxy GenerateServiceURL (its own test vector)', () => {
    expect(hashedServiceHost('cluster1', 'default', 'service1')).toBe(
      'cluster-proxy-1f28e10e03e76d3df8306b102a1da1adc79e744dd27fe48eb',
    );
  });
  it('normalizes case and the root dot', () => {
    expect(normalizeName('Search.Default.Cluster1.')).toBe('search.default.cluster1');
  });
});

describe('rules', () => {
  it('serves <cluster> and <cluster>.<agent-namespace> as the kube-apiserver', () => {
    const set = rules([]);
    const api = { kind: 'fqdn', fqdn: 'kubernetes.default.svc.cluster.local' };
    expect(set.match('cluster1')?.target).toEqual(api);
    expect(set.match('cluster1.open-cluster-management-cluster-proxy')?.target).toEqual(api);
    expect(set.match('cluster1.other')).toBeUndefined();
  });

  it('serves <service>.<namespace>.<cluster> and the hashed name for each exposed Service', () => {
    const set = rules(['default/search']);
    const target = { kind: 'fqdn', fqdn: 'search.default.svc.cluster.local' };
    expect(set.match('search.default.cluster1')).toMatchObject({ rule: { source: '--expose=default/search' }, target });
    expect(set.match(hashedServiceHost('cluster1', 'default', 'search'))?.target).toEqual(target);
    expect(set.match('other.default.cluster1')).toBeUndefined();
    expect(set.inZone('other.default.cluster1')).toBe(true);
    expect(set.inZone('example.com')).toBe(false);
  });

  it('matches any Service of a whole namespace, and gives known Services exact and hashed names', () => {
    const set = rules(['prod/*'], undefined, [{ namespace: 'prod', name: 'web' }]);
    expect(set.match('anything.prod.cluster1')?.target).toEqual({
      kind: 'fqdn',
      fqdn: 'anything.prod.svc.cluster.local',
    });
    expect(set.match('a.b.prod.cluster1')).toBeUndefined();
    expect(set.match('-bad.prod.cluster1')).toBeUndefined();
    expect(set.hosts()).toContain(hashedServiceHost('cluster1', 'prod', 'web'));
    expect(set.hosts()).toContain('web.prod.cluster1');
  });

  it('reads static IP and FQDN targets from YAML and JSON', () => {
    const yaml =
      'expose: [default/search]\nstatic:\n  - name: Legacy-DB.cluster1\n    target: [10.0.0.7, "fd00::7"]\n  - name: mail.example.org\n    target: smtp.corp.example.\n';
    const set = rules([], yaml);
    expect(set.match('legacy-db.cluster1')?.target).toEqual({ kind: 'ip', v4: ['10.0.0.7'], v6: ['fd00::7'] });
    expect(set.match('mail.example.org')?.target).toEqual({ kind: 'fqdn', fqdn: 'smtp.corp.example' });
    const json = JSON.stringify({ static: [{ name: 'x.cluster1', target: '10.0.0.8' }] });
    expect(rules([], json).match('x.cluster1')?.target).toEqual({ kind: 'ip', v4: ['10.0.0.8'], v6: [] });
  });

  it('treats the same rule given twice as one', () => {
    expect(errors(['default/search', 'default/search'], 'expose: [default/search, default/*]')).toEqual([]);
  });

  it('rejects invalid names with a message naming the rule', () => {
    expect(errors([`default/${'a'.repeat(64)}`])[0]).toMatch(
      /^--expose=default\/a+: service "a+" is 64 characters, over the 63/,
    );
    expect(errors(['default'])[0]).toMatch(/^--expose=default: want NAMESPACE\/SERVICE/);
    expect(errors(['Default/web'])[0]).toMatch(/namespace "Default" is not a DNS label/);
    expect(errors(['default/1web'])[0]).toMatch(/service "1web" is not a DNS label/);
    expect(errors([], {}, { ...naming, cluster: 'cluster_1' })[0]).toMatch(
      /cluster name "cluster_1" is not a DNS label/,
    );
    expect(errors([], {}, { ...naming, cluster: 'local' })[0]).toMatch(/would make the cluster domain/);
    expect(errors([], 'static: [{name: x.cluster1, target: [10.0.0.1, foo.bar]}]')[0]).toMatch(
      /^rules.yaml: static\[0\] \(x.cluster1\): a target list may hold IP addresses only/,
    );
    expect(errors([], 'static: [{name: x.cluster1}]')[0]).toMatch(
      /^rules.yaml: static\[0\] \(x.cluster1\): target must be/,
    );
    expect(errors([], 'exposed: []')[0]).toMatch(/unknown key "exposed"/);
    expect(errors([], 'expose: [')[0]).toMatch(/^rules.yaml: not valid YAML or JSON/);
  });

  it('rejects a rule that collides with another', () => {
    expect(errors([], 'static: [{name: cluster1, target: 10.0.0.1}]')).toEqual([
      'rules.yaml: static[0] (cluster1): "cluster1" collides with --cluster-name',
    ]);
    expect(errors(['default/web'], 'static: [{name: web.default.cluster1, target: 10.0.0.1}]')[0]).toMatch(
      /collides with --expose=default\/web/,
    );
    expect(errors(['prod/*'], 'static: [{name: web.prod.cluster1, target: 10.0.0.1}]')[0]).toMatch(
      /collides with --expose=prod\/\*/,
    );
    // the same target is not a collision
    expect(
      errors(['default/web'], 'static: [{name: web.default.cluster1, target: web.default.svc.cluster.local}]'),
    ).toEqual([]);
  });

  it('rejects a name over 253 characters', () => {
    const ns = 'n'.repeat(63);
    const svc = 's'.repeat(63);
    const long = { ...naming, clusterDomain: `${'d'.repeat(60)}.${'e'.repeat(60)}.${'f'.repeat(60)}` };
    expect(errors([`${ns}/${svc}`], undefined, long)[0]).toMatch(/over the 253 a DNS name allows/);
  });

  it('reads --rules-file through the flags and names an unreadable file', () => {
    const values = {
      clusterName: 'cluster1',
      agentNamespace: '',
      clusterDomain: 'Cluster.Local.',
      expose: ['a/b'],
      rulesFile: '/nope.yaml',
      nodeName: '',
      nodeIps: [],
    };
    const failed = rulesFromFlags(values);
    expect(failed.ok ? [] : failed.errors[0]).toMatch(/^--rules-file=\/nope.yaml: ENOENT/);
    const ok = rulesFromFlags(values, undefined, () => 'expose: [c/d]');
    expect(ok.ok && ok.value.hosts()).toEqual([
      'cluster1',
      'b.a.cluster1',
      hashedServiceHost('cluster1', 'a', 'b'),
      'd.c.cluster1',
      hashedServiceHost('cluster1', 'c', 'd'),
    ]);
    expect(ok.ok && ok.value.match('b.a.cluster1')?.target).toEqual({ kind: 'fqdn', fqdn: 'b.a.svc.cluster.local' });
  });
});

describe('identifiers', () => {
  it("the cluster's names and --agent-identifiers are the agent's own; each rule's names are a group", () => {
    const set = rules(['default/search', 'default/web']);
    const ids = agentIdentifiers('host=search.default.cluster1&ipv4=10.0.0.1', set);
    expect(ids.own).toBe(
      'host=search.default.cluster1&ipv4=10.0.0.1&host=cluster1&host=cluster1.open-cluster-management-cluster-proxy',
    );
    expect(ids.groups).toEqual([
      `host=${hashedServiceHost('cluster1', 'default', 'search')}`,
      `host=${hashedServiceHost('cluster1', 'default', 'web')}&host=web.default.cluster1`,
    ]);
    expect(agentIdentifiers('host=a', undefined)).toEqual({ own: 'host=a', groups: [] });
  });

  it('packs groups past the limit into stable buckets: a group stays in its bucket whatever else changes', () => {
    const groups = Array.from({ length: 300 }, (_, i) => `host=s${i}.ns.cluster1`);
    const packed = packGroups(groups, 16);
    expect(packed.length).toBeLessThanOrEqual(16);
    expect(packed.flatMap((b) => b.split('&')).sort()).toEqual([...groups].sort());
    const bucketOf = (p: string[], g: string) => p.find((b) => b.split('&').includes(g));
    const fewer = packGroups(groups.slice(1), 16);
    for (const g of groups.slice(1, 50))
      expect(bucketOf(fewer, g)!.split('&')).toEqual(
        bucketOf(packed, g)!
          .split('&')
          .filter((x) => x !== groups[0]),
      );
    expect(packGroups(groups.slice(0, 3), 16)).toEqual([...groups.slice(0, 3)].sort());
  });
});

describe('holder', () => {
  it('swaps rule sets and tells listeners', () => {
    const holder = new RuleHolder(rules([]));
    const seen: string[][] = [];
    const off = holder.onChange((next, prev) => seen.push([...next.hosts(), '|', ...prev.hosts()]));
    holder.replace(rules(['a/b']));
    off();
    holder.replace(rules([]));
    expect(seen).toHaveLength(1);
    expect(holder.generation).toBe(3);
    expect(holder.current.match('b.a.cluster1')).toBeUndefined();
    expect(parseRuleFile(null, 'x')).toEqual({ ok: true, value: { expose: [], static: [] } });
  });

  it('remembers when each rule came into force: one a replacement keeps keeps its time', () => {
    let now = 1000;
    const holder = new RuleHolder(rules(['a/b']), () => now);
    const since = () =>
      Object.fromEntries(holder.current.rules.map((r) => [r.names[0] ?? r.wildcard, holder.since(r)]));
    expect(since()).toEqual({ cluster1: 1000, 'b.a.cluster1': 1000 });
    now = 2000;
    holder.replace(rules(['a/b', 'c/d']));
    expect(since()).toEqual({ cluster1: 1000, 'b.a.cluster1': 1000, 'd.c.cluster1': 2000 });
    now = 3000;
    holder.replace(rules(['c/d']));
    now = 4000;
    holder.replace(rules(['a/b', 'c/d']));
    expect(since()).toEqual({ cluster1: 1000, 'b.a.cluster1': 4000, 'd.c.cluster1': 2000 });
  });
});
