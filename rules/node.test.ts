// A per-node agent's identity: its node's name in the cluster's zone, its addresses as identifiers,
// and another node's name recognised as not this agent's.
import { describe, expect, it } from 'vitest';
import { namingFromFlags } from './from-flags.js';
import { agentIdentifiers } from './identifiers.js';
import { portsProblem } from '../dial-policy/node-local.js';
import { parseFlags } from '../flags/flags.js';
import { dialPolicyFlags } from '../dial-policy/options.js';
import { goIpString, nodeIdentifiers } from './node.js';
import { ruleFlags } from './options.js';
import { parseRules } from './rule-set.js';

const flags = {
  clusterName: 'cluster1',
  agentNamespace: 'spoke-agent',
  clusterDomain: 'cluster.local',
  expose: [],
  rulesFile: '',
  nodeName: 'N1',
  nodeIps: ['10.201.0.11', 'FD00:0:0::11'],
};

describe('node identity', () => {
  it('spells addresses as Go prints them, which destHost compares byte for byte', () => {
    expect(goIpString('FD00:0:0:0:0:0:0:11')).toBe('fd00::11');
    expect(goIpString('2001:db8:0:0:1:0:0:1')).toBe('2001:db8::1:0:0:1');
    expect(goIpString('10.0.0.1')).toBe('10.0.0.1');
    expect(nodeIdentifiers(['10.201.0.11', 'FD00::11'])).toBe('ipv4=10.201.0.11&ipv6=fd00%3A%3A11');
    expect(nodeIdentifiers([])).toBe('');
  });

  it('serves <node>.node.<cluster> with the node addresses, beside the cluster-wide names', () => {
    const r = parseRules({ naming: namingFromFlags(flags), expose: ['default/web'] });
    if (!r.ok) throw new Error(r.errors.join());
    const set = r.value;
    expect(set.match('n1.node.cluster1')).toMatchObject({
      rule: { source: '--node-name', kind: 'node' },
      target: { kind: 'ip', v4: ['10.201.0.11'], v6: ['fd00::11'] },
    });
    expect(set.match('cluster1')).toBeDefined();
    expect(set.classify('n1.node.cluster1')).toMatchObject({ kind: 'rule' });
    expect(set.classify('n2.node.cluster1')).toEqual({ kind: 'other-node', node: 'n2' });
    expect(set.classify('ip-10-0-0-2.ec2.internal.node.cluster1')).toEqual({
      kind: 'other-node',
      node: 'ip-10-0-0-2.ec2.internal',
    });
    expect(set.classify('web.default.cluster1')).toMatchObject({ kind: 'rule' });
    expect(set.classify('db.default.cluster1')).toEqual({ kind: 'zone' });
    expect(set.classify('node.cluster1')).toEqual({ kind: 'zone' });
    expect(set.classify('example.com')).toEqual({ kind: 'outside' });
    // An agent without --node-name knows no node's name as its own: every one is another node's.
    const plain = parseRules({ naming: namingFromFlags({ ...flags, nodeName: '', nodeIps: [] }) });
    if (!plain.ok) throw new Error(plain.errors.join());
    expect(plain.value.match('n1.node.cluster1')).toBeUndefined();
    expect(plain.value.classify('n1.node.cluster1')).toEqual({ kind: 'other-node', node: 'n1' });
  });

  it('announces the node name and addresses in the agent own group, not in a rule stream', () => {
    const r = parseRules({ naming: namingFromFlags(flags), expose: ['default/web'] });
    if (!r.ok) throw new Error(r.errors.join());
    const ids = agentIdentifiers('host=extra', r.value, flags.nodeIps);
    const own = new URLSearchParams(ids.own);
    expect(own.getAll('host')).toEqual(['extra', 'cluster1', 'cluster1.spoke-agent', 'n1.node.cluster1']);
    expect(own.getAll('ipv4')).toEqual(['10.201.0.11']);
    expect(own.getAll('ipv6')).toEqual(['fd00::11']);
    expect(ids.groups.join('&')).not.toContain('node.cluster1');
  });

  it('rejects a node name without addresses, and a name that is no DNS name', () => {
    const noIps = parseRules({ naming: namingFromFlags({ ...flags, nodeIps: [] }) });
    expect(noIps.ok ? [] : noIps.errors).toEqual([
      "--node-name=n1 needs --node-ips: the node's addresses its name resolves to",
    ]);
    const bad = parseRules({ naming: namingFromFlags({ ...flags, nodeName: 'bad_name!' }) });
    expect(bad.ok ? [] : bad.errors[0]).toMatch(/node name "bad_name!" is not a valid DNS name/);
    // a static rule cannot take the node's name over
    const taken = parseRules({
      naming: namingFromFlags(flags),
      file: { origin: 'rules.yaml', content: 'static: [{name: n1.node.cluster1, target: 10.9.9.9}]' },
    });
    expect(taken.ok ? [] : taken.errors).toEqual([
      'rules.yaml: static[0] (n1.node.cluster1): "n1.node.cluster1" collides with --node-name',
    ]);
  });

  it('rejects flags that name no address or port', () => {
    expect(() => parseFlags(ruleFlags, ['--node-ips=10.0.0.1,nope'])).toThrow(
      'invalid value for "--node-ips": "nope" is not an IP address',
    );
    expect(() => parseFlags(dialPolicyFlags, ['--kubelet-port=70000'])).toThrow(/"70000" is not a port/);
    expect(() => parseFlags(dialPolicyFlags, ['--node-local-ports=9100,x'])).toThrow(/"x" is not a port/);
    expect(portsProblem(['9100', '1', '65535'])).toBeUndefined();
    expect(parseFlags(ruleFlags, ['--node-ips=10.0.0.1,fd00::1']).values.nodeIps).toEqual(['10.0.0.1', 'fd00::1']);
  });
});
