import { describe, expect, it } from 'vitest';
import { deriveIdentity } from './cluster-proxy.js';
import { serviceProxyHost } from './naming.js';

// What cluster-proxy's hub renders for cluster1 with the kube-api proxy on (its default).
const proxyHost = 'cluster-a140791d2b20a847f2c74c62c384f93fb83691d871e80385.open-cluster-management.proxy';
const rendered = `host=${proxyHost}&host=cluster1&host=cluster1.open-cluster-management-cluster-proxy`;
const none = { clusterName: '', agentNamespace: '' };

describe('serviceProxyHost', () => {
  it('is cluster-proxy GenerateServiceProxyHost (the host of its example for cluster1)', () => {
    expect(serviceProxyHost('cluster1')).toBe(proxyHost);
    expect(serviceProxyHost('a-much-longer-cluster-name')).toMatch(
      /^cluster-[0-9a-f]{48}\.open-cluster-management\.proxy$/,
    );
  });
});

describe('deriveIdentity', () => {
  it("takes the cluster and namespace from cluster-proxy's identifiers, in any order", () => {
    const d = deriveIdentity({ identifiers: rendered, ...none, serviceAccountNamespace: 'ignored-when-the-host-says' });
    expect(d).toMatchObject({ clusterName: 'cluster1', agentNamespace: 'open-cluster-management-cluster-proxy' });
    expect(d.derived.map((x) => x.flag)).toEqual(['--cluster-name', '--agent-namespace']);
    expect(d.derived[0]!.from).toContain(`host=${proxyHost}`);
    const reordered = deriveIdentity({
      identifiers: `host=cluster1.ns1&host=CLUSTER1&host=${proxyHost.toUpperCase()}`,
      ...none,
    });
    expect(reordered).toMatchObject({ clusterName: 'cluster1', agentNamespace: 'ns1' });
  });

  it("falls back to the service account's namespace file, trimmed", () => {
    const d = deriveIdentity({
      identifiers: `host=${proxyHost}&host=cluster1`,
      ...none,
      serviceAccountNamespace: 'agents\n',
    });
    expect(d).toMatchObject({ clusterName: 'cluster1', agentNamespace: 'agents' });
    expect(d.derived[1]!.from).toMatch(/service account/);
    expect(deriveIdentity({ identifiers: `host=${proxyHost}&host=cluster1`, ...none }).agentNamespace).toBe('');
    expect(
      deriveIdentity({
        identifiers: `host=${proxyHost}&host=cluster1`,
        ...none,
        serviceAccountNamespace: 'Not A Label',
      }).agentNamespace,
    ).toBe('');
  });

  it('lets explicit flags win, and still fills in what was not given', () => {
    expect(deriveIdentity({ identifiers: rendered, clusterName: 'mine', agentNamespace: 'ns' })).toEqual({
      clusterName: 'mine',
      agentNamespace: 'ns',
      derived: [],
    });
    const d = deriveIdentity({ identifiers: rendered, clusterName: '', agentNamespace: 'from-env' });
    expect(d).toMatchObject({ clusterName: 'cluster1', agentNamespace: 'from-env' });
    expect(d.derived).toHaveLength(1);
    // An explicit cluster name takes its namespace from the identifiers that name it, or the file.
    expect(deriveIdentity({ identifiers: 'host=c2.team', clusterName: 'c2', agentNamespace: '' }).agentNamespace).toBe(
      'team',
    );
  });

  it("derives nothing from identifiers that are not cluster-proxy's", () => {
    expect(deriveIdentity({ identifiers: '', ...none, serviceAccountNamespace: 'ns' })).toEqual({
      clusterName: '',
      agentNamespace: '',
      derived: [],
    });
    expect(deriveIdentity({ identifiers: 'host=cluster1&host=cluster1.ns&default-route=true', ...none })).toEqual({
      clusterName: '',
      agentNamespace: '',
      derived: [],
    });
    // a service-proxy host of another cluster does not make cluster1 the cluster
    const other = deriveIdentity({ identifiers: `host=${serviceProxyHost('cluster2')}&host=cluster1`, ...none });
    expect(other.clusterName).toBe('');
    expect(other.problem).toMatch(/no host=<cluster> that hashes to it/);
  });

  it('says why when only the service-proxy host is there (kube-api proxy off)', () => {
    const d = deriveIdentity({ identifiers: `host=${proxyHost}`, ...none, serviceAccountNamespace: 'ns' });
    expect(d).toMatchObject({ clusterName: '', agentNamespace: '', derived: [] });
    expect(d.problem).toMatch(/set --cluster-name/);
  });
});
