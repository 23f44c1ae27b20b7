// manifests/ rendered by the real `kubectl kustomize` (test/support/global-setup.ts installs it), then
// checked against the agent itself: its flag parser accepts the container args, and probes, ports and
// mounts agree with the flag values those args produce.
import { readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { agentFlags, validateAgentOptions } from '../agent/options.js';
import { group, resources, version as apiVersion, type ResourceInfo } from '../apiserver/discovery.js';
import { servesApi, validateApiServerOptions } from '../apiserver/options.js';
import { agentCommandFlags } from '../cmd/agent-command.js';
import { parseFlags, type Flag, type FlagSet } from '../flags/flags.js';
import { dnsFlags } from '../dns/options.js';
import { defaultRulesConfigmap, liveLogAuthPath, validateKubeOptions } from '../kube/options.js';
import { deriveIdentity } from '../rules/cluster-proxy.js';
import { agentIdentifiers } from '../rules/identifiers.js';
import { serviceProxyHost } from '../rules/naming.js';
import { rulesFromFlags } from '../rules/from-flags.js';
import { manifestsDir as manifests, render, renderWithComponent, type Obj } from './support/kustomize.js';
import { repoRoot } from './support/processes.js';

const one = (objs: Obj[], kind: string, name?: string) => {
  const found = objs.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  expect(found, `${kind} ${name ?? ''}`).toHaveLength(1);
  return found[0]!;
};

const version = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
// ENTRYPOINT ["/nodejs/bin/node", ..., "/app/dist/cmd/main.js"]: what a command override must repeat.
const entrypoint = JSON.parse(
  /^ENTRYPOINT (\[.*\])$/m.exec(readFileSync(join(repoRoot, 'Dockerfile'), 'utf8'))![1]!,
) as string[];

// Flags naming files: on this machine they do not exist, in the pod they must lie in a mounted volume.
const fileFlags = [
  'ca-cert',
  'agent-cert',
  'agent-key',
  'service-account-token-path',
  'rules-file',
  'kubeconfig',
  'api-tls-cert-file',
  'api-tls-private-key-file',
];

/** The agent's own parse of a container's args and env (downward-API values filled in as the kubelet would). */
function parseContainer(pod: Obj, container: Obj, namespace: string) {
  const mounts: Obj[] = container.volumeMounts ?? [];
  const underMount = (path: string) =>
    path === '' || mounts.some((m) => path.startsWith(posix.join(m.mountPath, '/')))
      ? undefined
      : `${path} is in no mounted volume`;
  const set: FlagSet = Object.fromEntries(
    Object.entries(agentCommandFlags).map(([k, f]) => [
      k,
      fileFlags.includes(f.name) ? ({ ...f, validate: underMount } as Flag) : f,
    ]),
  );
  const fields: Record<string, string> = {
    'metadata.name': 'spoke-agent-x7k2p',
    'metadata.namespace': namespace,
    'spec.nodeName': 'node-a',
    'status.hostIP': '10.0.0.5',
  };
  const env: Record<string, string> = Object.fromEntries(
    (container.env ?? []).map((e: Obj) => [e.name, e.value ?? fields[e.valueFrom?.fieldRef?.fieldPath]]),
  );
  // The kubelet expands $(VAR) in args from the container's env, and leaves an unknown one as written.
  const expand = (arg: string) => arg.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name: string) => env[name] ?? m);
  const args = [...(container.command ?? []).slice(entrypoint.length), ...container.args].map(expand);
  const parsed = parseFlags(set, args, env);
  const values = parsed.values as ReturnType<typeof parseFlags<typeof agentCommandFlags>>['values'];
  expect(parsed.positionals).toEqual([]);
  expect(validateAgentOptions(values)).toBeUndefined();
  expect(validateKubeOptions(values)).toBeUndefined();
  const volumeOf = (path: string) => {
    const mount = mounts.find((m) => path.startsWith(posix.join(m.mountPath, '/')))!;
    return { mount, volume: (pod.volumes as Obj[]).find((v) => v.name === mount.name)! };
  };
  return { values, given: parsed.given, volumeOf };
}

function expectHttpProbe(probe: Obj | undefined, path: string, port: number) {
  expect(probe?.httpGet).toMatchObject({ path, port });
}

describe('manifests/ (DaemonSet on a spoke)', () => {
  const objs = render(manifests);
  const ds = one(objs, 'DaemonSet', 'spoke-agent');
  const ns = ds.metadata.namespace as string;
  const pod = ds.spec.template.spec as Obj;
  const container = (pod.containers as Obj[]).find((c) => c.name === 'spoke-agent')!;
  const { values, given, volumeOf } = parseContainer(pod, container, ns);

  it('renders exactly the expected kinds, all in one namespace', () => {
    expect(objs.map((o) => o.kind).sort()).toEqual([
      'ClusterRole',
      'ClusterRole',
      'ClusterRole',
      'ClusterRoleBinding',
      'ConfigMap',
      'DaemonSet',
      'Namespace',
      'Role',
      'RoleBinding',
      'Service',
      'ServiceAccount',
    ]);
    for (const o of objs.filter((o) => !['Namespace', 'ClusterRole', 'ClusterRoleBinding'].includes(o.kind)))
      expect(o.metadata.namespace, o.kind).toBe(ns);
    expect(one(objs, 'Namespace').metadata.name).toBe(ns);
  });

  it('the namespace enforces Pod Security "restricted"', () => {
    expect(one(objs, 'Namespace').metadata.labels).toMatchObject({
      'pod-security.kubernetes.io/enforce': 'restricted',
      'pod-security.kubernetes.io/warn': 'restricted',
      'pod-security.kubernetes.io/audit': 'restricted',
    });
  });

  it('runs the image of this version, non-root, read-only, without privileges', () => {
    expect(container.image).toBe(`spoke-agent:${version}`);
    expect(container.command, 'the image ENTRYPOINT is used').toBeUndefined();
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(pod.securityContext.runAsUser).toBeGreaterThan(0);
    expect(container.securityContext).toMatchObject({
      runAsNonRoot: true,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(container.securityContext.capabilities.add).toBeUndefined();
    expect(container.securityContext.runAsUser).toBeGreaterThan(0);
    for (const bad of ['hostNetwork', 'hostPID', 'hostIPC']) expect(pod[bad], bad).toBeFalsy();
  });

  it('has resource requests and limits, and a grace period above --drain-timeout', () => {
    for (const r of ['cpu', 'memory']) {
      expect(container.resources.requests[r], `requests.${r}`).toBeDefined();
      expect(container.resources.limits[r], `limits.${r}`).toBeDefined();
    }
    expect(pod.terminationGracePeriodSeconds * 1000).toBeGreaterThan(values.drainTimeout);
  });

  it('takes the agent ID from the pod name and the namespace from the downward API', () => {
    const env = Object.fromEntries((container.env as Obj[]).map((e) => [e.name, e.valueFrom?.fieldRef?.fieldPath]));
    expect(env).toMatchObject({ PROXY_AGENT_ID: 'metadata.name', POD_NAMESPACE: 'metadata.namespace' });
    expect(values.agentID).toBe('spoke-agent-x7k2p');
    expect(values.agentNamespace).toBe(ns);
  });

  it('probes and ports are where the agent listens (flag defaults)', () => {
    expect(given.has('health-server-port')).toBe(false);
    expect(values.healthServerPort).toBe(agentFlags.healthServerPort.default);
    expect(values.dnsPort).toBe(dnsFlags.dnsPort.default);
    expectHttpProbe(container.readinessProbe, '/readyz', values.healthServerPort);
    expectHttpProbe(container.livenessProbe, '/healthz', values.healthServerPort);
    const ports = (container.ports as Obj[]).map((p) => `${p.containerPort}/${p.protocol}`).sort();
    expect(ports).toEqual([`${values.dnsPort}/TCP`, `${values.dnsPort}/UDP`, `${values.healthServerPort}/TCP`].sort());
  });

  it('connects to the hub with mTLS from a Secret and a projected token for the hub audience', () => {
    expect(given.has('proxy-server-host')).toBe(true); // else it would start a local hub
    for (const path of [values.caCert, values.agentCert, values.agentKey]) {
      const { volume } = volumeOf(path);
      expect(volume.secret?.secretName, path).toBeDefined();
    }
    const { volume, mount } = volumeOf(values.serviceAccountTokenPath);
    const token = (volume.projected.sources as Obj[]).find((s) => s.serviceAccountToken)!.serviceAccountToken;
    expect(token.audience).toMatch(/\S/);
    expect(posix.join(mount.mountPath, token.path)).toBe(values.serviceAccountTokenPath);
  });

  it('serves DNS off loopback so the Service reaches it, and the rules ConfigMap is valid', () => {
    expect(values.clusterName).not.toBe('');
    expect(values.dnsBindAddress).not.toMatch(/^127\.|^::1$/);
    const cm = one(objs, 'ConfigMap');
    expect(values.rulesConfigmap).toBe(`${cm.metadata.namespace}/${cm.metadata.name}`);
    const rules = rulesFromFlags({ ...values, rulesFile: 'rules.yaml' }, undefined, () => cm.data['rules.yaml']);
    expect(rules.ok, JSON.stringify(rules)).toBe(true);
  });

  it('updates by surging: the new pod beside the old, which leaves only once the new one is Ready (holds the hub)', () => {
    expect(ds.spec.updateStrategy).toEqual({
      type: 'RollingUpdate',
      rollingUpdate: { maxSurge: 1, maxUnavailable: 0 },
    });
    // Two pods on one node: nothing may claim a node-wide port.
    expect(pod.hostNetwork).toBeFalsy();
    for (const c of pod.containers as Obj[])
      for (const p of (c.ports ?? []) as Obj[]) expect(p.hostPort, `${c.name} ${p.name}`).toBeUndefined();
    expectHttpProbe(container.readinessProbe, '/readyz', values.healthServerPort);
  });

  it('the DNS Service maps 53 to the DNS port over UDP and TCP, and keeps pods that do not hold the hub', () => {
    const svc = one(objs, 'Service');
    expect(svc.spec.publishNotReadyAddresses).toBe(true);
    expect(svc.spec.selector).toEqual(ds.spec.selector.matchLabels);
    expect(ds.spec.template.metadata.labels).toMatchObject(svc.spec.selector);
    const ports = (svc.spec.ports as Obj[]).map((p) => `${p.port}->${p.targetPort}/${p.protocol}`).sort();
    expect(ports).toEqual([`53->${values.dnsPort}/TCP`, `53->${values.dnsPort}/UDP`]);
  });

  it("RBAC: least privilege for the flags given (one ConfigMap, delegated auth), bound to the pod's account", () => {
    const sa = one(objs, 'ServiceAccount');
    expect(pod.serviceAccountName).toBe(sa.metadata.name);
    const cm = one(objs, 'ConfigMap');
    const role = one(objs, 'Role');
    expect(role.rules).toEqual([
      { apiGroups: [''], resources: ['configmaps'], resourceNames: [cm.metadata.name], verbs: ['list', 'watch'] },
    ]);
    const subject = [{ kind: 'ServiceAccount', name: sa.metadata.name, namespace: ns }];
    expect(one(objs, 'RoleBinding')).toMatchObject({
      roleRef: { kind: 'Role', name: role.metadata.name },
      subjects: subject,
    });
    expect(values.debugAuth).toBe('auto'); // on in a pod: TokenReview + SubjectAccessReview
    expect(one(objs, 'ClusterRoleBinding')).toMatchObject({
      roleRef: { kind: 'ClusterRole', name: 'system:auth-delegator' },
      subjects: subject,
    });
    expect(values.autoExpose).toBe(false); // so no cluster-wide Service access is granted
    const rules = objs.flatMap((o) => (o.rules as Obj[] | undefined) ?? []);
    for (const r of rules) {
      expect([...(r.verbs ?? []), ...(r.resources ?? []), ...(r.apiGroups ?? [])]).not.toContain('*');
      expect(r.resources ?? []).not.toContain('secrets');
    }
    // The reader roles are for people: granted to nobody here. The query and dial logs have roles of their own.
    expect(one(objs, 'ClusterRole', 'spoke-agent-debug-reader').rules).toEqual([
      { nonResourceURLs: [values.debugAuthPath, '/metrics'], verbs: ['get'] },
    ]);
    expect(one(objs, 'ClusterRole', 'spoke-agent-debug-query-reader').rules).toEqual([
      { nonResourceURLs: [liveLogAuthPath(values.debugAuthPath, 'queries')], verbs: ['get'] },
    ]);
    expect(one(objs, 'ClusterRole', 'spoke-agent-debug-dial-reader').rules).toEqual([
      { nonResourceURLs: [liveLogAuthPath(values.debugAuthPath, 'dials')], verbs: ['get'] },
    ]);
    expect(objs.filter((o) => o.kind.endsWith('Binding') && o.roleRef.name.startsWith('spoke-agent-debug'))).toEqual(
      [],
    );
  });
});

describe('manifests/cluster-proxy (the image is the only change)', () => {
  const dir = join(manifests, 'cluster-proxy');
  const docs = (file: string) => parseAllDocuments(readFileSync(join(dir, file), 'utf8')).map((d) => d.toJS() as Obj);
  const rendered = docs('rendered-proxy-agent.yaml');
  const patch = docs('managedproxyconfiguration-patch.yaml')[0]!;
  const deploy = one(rendered, 'Deployment', 'cluster-proxy-proxy-agent');
  const ns = deploy.metadata.namespace as string;
  const pod = deploy.spec.template.spec as Obj;
  // What the addon manager renders once spec.proxyAgent.image is ours: that one field changes.
  const original = (pod.containers as Obj[]).find((c) => c.name === 'proxy-agent')!;
  const agent: Obj = { ...original, image: patch.spec.proxyAgent.image };
  const { values, given } = parseContainer(pod, agent, ns);
  const identity = deriveIdentity({
    identifiers: values.agentIdentifiers,
    clusterName: values.clusterName,
    agentNamespace: values.agentNamespace,
    serviceAccountNamespace: ns,
  });

  it('the hub patch sets the image of this version and nothing else', () => {
    expect(patch).toEqual({ spec: { proxyAgent: { image: `spoke-agent:${version}` } } });
  });

  it("cluster-proxy's command is /proxy-agent, which the image provides", () => {
    expect(agent.command).toEqual(['/proxy-agent']);
    expect(readFileSync(join(repoRoot, 'Dockerfile'), 'utf8')).toMatch(
      /^COPY --chmod=0755 cmd\/proxy-agent \/proxy-agent$/m,
    );
  });

  it("cluster-proxy's args are the Go agent's flags, with no cluster name and no namespace (no POD_NAMESPACE)", () => {
    expect(agent.args.map((a: string) => a.split('=')[0])).toEqual([
      '--proxy-server-host',
      '--proxy-server-port',
      '--agent-identifiers',
      '--ca-cert',
      '--agent-cert',
      '--agent-key',
    ]);
    expect(values).toMatchObject({
      caCert: '/etc/ca/ca.crt',
      agentCert: '/etc/tls/tls.crt',
      agentKey: '/etc/tls/tls.key',
      proxyServerPort: 8091,
      clusterName: '',
      agentNamespace: '',
    });
    expect(given.has('cluster-name') || given.has('rules-configmap') || given.has('allowed-cidrs')).toBe(false);
  });

  it("derives the cluster from the identifiers, whose service-proxy host is the pod's hostAliases name", () => {
    expect(identity).toMatchObject({ clusterName: 'cluster1', agentNamespace: ns });
    expect(identity.problem).toBeUndefined();
    const aliases = (pod.hostAliases as Obj[]).flatMap((a) => (a.ip === '127.0.0.1' ? a.hostnames : []));
    expect(aliases).toEqual([serviceProxyHost(identity.clusterName)]);
    expect(values.agentIdentifiers).toContain(`host=${aliases[0]}`);
  });

  it("watches spoke-agent-rules in the pod's namespace, which cluster-proxy's Role lets it list and watch", () => {
    const configmap = defaultRulesConfigmap(identity, {
      KUBERNETES_SERVICE_HOST: '10.96.0.1',
      KUBERNETES_SERVICE_PORT: '443',
    });
    const example = docs('spoke-agent-rules.yaml')[0]!;
    expect(configmap).toBe(`${example.metadata.namespace}/${example.metadata.name}`);
    const rules = rulesFromFlags(
      { ...values, ...identity, rulesFile: 'rules.yaml' },
      undefined,
      () => example.data['rules.yaml'],
    );
    expect(rules.ok, JSON.stringify(rules)).toBe(true);
    const role = one(rendered, 'Role');
    expect(role.metadata.namespace).toBe(ns);
    expect(role.rules).toContainEqual(
      expect.objectContaining({
        apiGroups: [''],
        resources: ['configmaps'],
        verbs: expect.arrayContaining(['list', 'watch']),
      }),
    );
    expect(one(rendered, 'RoleBinding').subjects).toEqual([
      { kind: 'ServiceAccount', name: pod.serviceAccount, namespace: ns },
    ]);
  });

  it("keeps its ports off the liveness probe's 8888, which is the addon-agent sidecar's, and passes the pod's runAsNonRoot with a numeric USER", () => {
    expect(agent.livenessProbe.httpGet.port).toBe(8888);
    const addonAgent = (pod.containers as Obj[]).find((c) => c.name === 'addon-agent')!;
    expect(addonAgent.command).toEqual(['/agent']);
    expect([values.healthServerPort, values.adminServerPort, values.dnsPort]).not.toContain(8888);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(readFileSync(join(repoRoot, 'Dockerfile'), 'utf8')).toMatch(/^USER \d+:\d+$/m);
  });

  it('serves health on 8093 (addon-agent polls /readyz there) and drains within the 40 s grace period', () => {
    expect(given.has('health-server-port')).toBe(false);
    expect(values.healthServerPort).toBe(8093);
    expect(pod.terminationGracePeriodSeconds * 1000).toBeGreaterThan(values.drainTimeout);
    expect(agent.securityContext).toMatchObject({ runAsNonRoot: true, readOnlyRootFilesystem: true });
  });
});

describe("manifests/cluster-proxy/networkpolicy.yaml (beside cluster-proxy's opt-in NetworkPolicy)", () => {
  const dir = join(manifests, 'cluster-proxy');
  const doc = (file: string) => parseYaml(readFileSync(join(dir, file), 'utf8')) as Obj;
  const deploy = one(
    parseAllDocuments(readFileSync(join(dir, 'rendered-proxy-agent.yaml'), 'utf8')).map((d) => d.toJS() as Obj),
    'Deployment',
  );
  const podLabels = deploy.spec.template.metadata.labels as Record<string, string>;
  const ns = deploy.metadata.namespace as string;
  const theirs = doc('rendered-networkpolicy.yaml');
  const ours = doc('networkpolicy.yaml');
  const agent = (deploy.spec.template.spec.containers as Obj[]).find((c) => c.name === 'proxy-agent')!;
  const { values } = parseContainer(deploy.spec.template.spec, agent, ns);
  // The API port as the dns-api component runs it (cluster-proxy's args carry none; additionalArgs may).
  const apiArgs = parseYaml(readFileSync(join(manifests, 'dns-api', 'daemonset-api-args.yaml'), 'utf8')) as Obj[];
  const apiPort = Number(
    apiArgs.map((op) => /^--api-server-port=(\d+)$/.exec(op.value)?.[1]).find((v) => v !== undefined),
  );
  const served: Array<[string, number, string]> = [
    ['DNS', values.dnsPort, 'UDP'],
    ['DNS', values.dnsPort, 'TCP'],
    ['the aggregated API', apiPort, 'TCP'],
    ['/metrics', values.healthServerPort, 'TCP'],
  ];

  /** Policies that select the pod for ingress: none means all traffic in; else what one of their rules admits from anyone. */
  const admits = (policies: Obj[], port: number, protocol: string) => {
    const selecting = policies.filter(
      (p) =>
        p.metadata.namespace === ns &&
        Object.entries(p.spec.podSelector.matchLabels as Record<string, string>).every(
          ([k, v]) => podLabels[k] === v,
        ) &&
        (p.spec.policyTypes as string[]).includes('Ingress'),
    );
    if (selecting.length === 0) return true;
    return selecting.some((p) =>
      ((p.spec.ingress ?? []) as Obj[]).some(
        (rule) =>
          rule.from === undefined &&
          ((rule.ports ?? []) as Obj[]).some((r) => r.port === port && (r.protocol ?? 'TCP') === protocol),
      ),
    );
  };

  it("with cluster-proxy's policy alone, what the agent serves in the pod gets no ingress", () => {
    for (const [what, port, protocol] of served) expect(admits([theirs], port, protocol), what).toBe(false);
    expect(admits([theirs], 7443, 'TCP')).toBe(true);
  });

  it('with ours beside it, DNS, the aggregated API and /metrics get in, and what cluster-proxy allows still does', () => {
    for (const [what, port, protocol] of served) expect(admits([theirs, ours], port, protocol), what).toBe(true);
    expect(admits([theirs, ours], 7443, 'TCP')).toBe(true);
    expect(admits([theirs, ours], 8000, 'TCP')).toBe(true);
  });

  it('selects the proxy-agent pod the way cluster-proxy does, and restricts nothing cluster-proxy allows (ingress only, its ports too)', () => {
    expect(ours.spec.podSelector).toEqual(theirs.spec.podSelector);
    expect(ours.spec.podSelector.matchLabels).toEqual(deploy.spec.selector.matchLabels);
    expect(ours.metadata.namespace).toBe(ns);
    expect(ours.spec.policyTypes).toEqual(['Ingress']);
    expect(ours.spec.egress).toBeUndefined();
    // Applied while cluster-proxy's policy is off, it still lets in what that one would.
    for (const [port, protocol] of [
      ...served.map(([, p, proto]) => [p, proto] as const),
      [7443, 'TCP'],
      [8000, 'TCP'],
    ] as const)
      expect(admits([ours], port, protocol), `${protocol} ${port}`).toBe(true);
  });
});

describe('manifests/monitoring (optional component: PodMonitor, PrometheusRule, Grafana dashboard)', () => {
  const objs = renderWithComponent('monitoring');
  const base = render(manifests);
  const ds = one(objs, 'DaemonSet', 'spoke-agent');
  const ns = ds.metadata.namespace as string;
  const container = (ds.spec.template.spec.containers as Obj[]).find((c) => c.name === 'spoke-agent')!;

  it('adds a PodMonitor, a PrometheusRule and the dashboard ConfigMap to the base, in its namespace, and changes nothing else', () => {
    const added = objs.filter((o) => !base.some((b) => b.kind === o.kind && b.metadata.name === o.metadata.name));
    expect(added.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'ConfigMap/spoke-agent-dashboard',
      'PodMonitor/spoke-agent',
      'PrometheusRule/spoke-agent',
    ]);
    for (const o of added) expect(o.metadata.namespace, o.kind).toBe(ns);
    expect(objs.filter((o) => !added.includes(o))).toEqual(base);
  });

  it("the PodMonitor scrapes /metrics on the agent pods' health port", () => {
    const pm = one(objs, 'PodMonitor');
    expect(ds.spec.template.metadata.labels).toMatchObject(pm.spec.selector.matchLabels);
    const [endpoint] = pm.spec.podMetricsEndpoints as Obj[];
    expect(endpoint).toMatchObject({ path: '/metrics' });
    const port = (container.ports as Obj[]).find((p) => p.name === endpoint!.port)!;
    expect(port.containerPort).toBe(container.livenessProbe.httpGet.port);
  });

  it("the PrometheusRule holds the rule file's groups, and the ConfigMap the dashboard, labelled for Grafana's sidecar", () => {
    const rules = parseYaml(readFileSync(join(manifests, 'monitoring/alerts.rules.yaml'), 'utf8')) as Obj;
    expect(one(objs, 'PrometheusRule').spec).toEqual(rules);
    const cm = one(objs, 'ConfigMap', 'spoke-agent-dashboard');
    expect(cm.metadata.labels).toMatchObject({ grafana_dashboard: '1' });
    expect(JSON.parse(cm.data['spoke-agent.json'])).toEqual(
      JSON.parse(readFileSync(join(manifests, 'monitoring/dashboard.json'), 'utf8')),
    );
  });
});

describe('manifests/dns-api (optional component: kubectl through the aggregation layer)', () => {
  const objs = renderWithComponent('dns-api');
  const ds = one(objs, 'DaemonSet', 'spoke-agent');
  const ns = ds.metadata.namespace as string;
  const pod = ds.spec.template.spec as Obj;
  const container = (pod.containers as Obj[]).find((c) => c.name === 'spoke-agent')!;
  const { values, volumeOf } = parseContainer(pod, container, ns);
  const apiService = one(objs, 'APIService');
  const sa = one(objs, 'ServiceAccount');
  const subject = [{ kind: 'ServiceAccount', name: sa.metadata.name, namespace: ns }];

  it('adds the APIService, its Service and RBAC, and changes nothing in the base but the DaemonSet', () => {
    const base = render(manifests);
    const added = objs.filter((o) => !base.some((b) => b.kind === o.kind && b.metadata.name === o.metadata.name));
    expect(added.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'APIService/v1alpha1.dns.spoke-agent.io',
      'ClusterRole/spoke-agent-dial-reader',
      'ClusterRole/spoke-agent-dns-debugger',
      'ClusterRole/spoke-agent-dns-query-reader',
      'RoleBinding/spoke-agent-authentication-reader',
      'Service/spoke-agent-api',
    ]);
    expect(objs.filter((o) => !added.includes(o) && o.kind !== 'DaemonSet')).toEqual(
      base.filter((o) => o.kind !== 'DaemonSet'),
    );
  });

  it('serves the API with the serving certificate from a Secret, on a declared container port', () => {
    expect(servesApi(values)).toBe(true);
    expect(validateApiServerOptions(values)).toBeUndefined();
    for (const path of [values.apiTlsCertFile, values.apiTlsPrivateKeyFile])
      expect(volumeOf(path).volume.secret?.secretName, path).toBe('spoke-agent-api-tls');
    expect((container.ports as Obj[]).find((p) => p.name === 'api')).toMatchObject({
      containerPort: values.apiServerPort,
      protocol: 'TCP',
    });
  });

  it('registers the group and version the agent serves, at a Service that reaches that port, with a CA bundle and verification on', () => {
    expect(apiService.metadata.name).toBe(`${apiVersion}.${group}`);
    expect(apiService.spec).toMatchObject({ group, version: apiVersion });
    expect(apiService.spec.insecureSkipTLSVerify).toBeUndefined();
    expect(apiService.spec.caBundle).toEqual(expect.any(String));
    const svc = one(objs, 'Service', apiService.spec.service.name);
    expect(svc.metadata.namespace).toBe(apiService.spec.service.namespace);
    expect(svc.spec.publishNotReadyAddresses, 'DNS explanations while the hub is down').toBe(true);
    expect(svc.spec.selector).toEqual(ds.spec.selector.matchLabels);
    const port = (svc.spec.ports as Obj[]).find((p) => p.port === apiService.spec.service.port)!;
    expect(
      (container.ports as Obj[]).find((p) => p.name === port.targetPort || p.containerPort === port.targetPort)
        ?.containerPort,
    ).toBe(values.apiServerPort);
  });

  it('RBAC: the agent reads extension-apiserver-authentication and delegates auth; people get a role for exactly what is served', () => {
    expect(one(objs, 'RoleBinding', 'spoke-agent-authentication-reader')).toMatchObject({
      metadata: { namespace: 'kube-system' },
      roleRef: { kind: 'Role', name: 'extension-apiserver-authentication-reader' },
      subjects: subject,
    });
    expect(one(objs, 'ClusterRoleBinding')).toMatchObject({
      roleRef: { kind: 'ClusterRole', name: 'system:auth-delegator' },
      subjects: subject,
    });
    const role = (...served: ResourceInfo[]) =>
      served.map((r) => ({ apiGroups: [group], resources: [r.name], verbs: r.verbs }));
    expect(one(objs, 'ClusterRole', 'spoke-agent-dns-debugger').rules).toEqual(
      role(resources.resolutions, resources.rules),
    );
    // Reading the queries pods make is not reading the rules: a role of its own.
    expect(one(objs, 'ClusterRole', 'spoke-agent-dns-query-reader').rules).toEqual(role(resources.queries));
    // Nor is who reached what through the tunnel.
    expect(one(objs, 'ClusterRole', 'spoke-agent-dial-reader').rules).toEqual(role(resources.dials));
    expect(Object.keys(resources).sort()).toEqual(['dials', 'queries', 'resolutions', 'rules']);
    // Bound to nobody here.
    expect(
      objs.filter((o) =>
        ['spoke-agent-dns-debugger', 'spoke-agent-dns-query-reader', 'spoke-agent-dial-reader'].includes(
          o.roleRef?.name,
        ),
      ),
    ).toEqual([]);
  });
});

describe("manifests/lease-counting (optional component: the server count from the proxy-servers' Leases)", () => {
  const objs = renderWithComponent('lease-counting');
  const ds = one(objs, 'DaemonSet', 'spoke-agent');
  const ns = ds.metadata.namespace as string;
  const pod = ds.spec.template.spec as Obj;
  const container = (pod.containers as Obj[]).find((c) => c.name === 'spoke-agent')!;
  const { values } = parseContainer(pod, container, ns);
  const sa = one(objs, 'ServiceAccount');

  it('turns lease counting on and lets the agent read the Leases where it counts them, nothing more', () => {
    expect(values.countServerLeases).toBe(true);
    const base = render(manifests);
    const added = objs.filter((o) => !base.some((b) => b.kind === o.kind && b.metadata.name === o.metadata.name));
    expect(added.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual([
      'Role/spoke-agent-leases',
      'RoleBinding/spoke-agent-leases',
    ]);
    const role = one(objs, 'Role', 'spoke-agent-leases');
    expect(role.metadata.namespace).toBe(values.leaseNamespace);
    expect(role.rules).toEqual([
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch'] },
    ]);
    expect(one(objs, 'RoleBinding', 'spoke-agent-leases')).toMatchObject({
      metadata: { namespace: values.leaseNamespace },
      roleRef: { kind: 'Role', name: 'spoke-agent-leases' },
      subjects: [{ kind: 'ServiceAccount', name: sa.metadata.name, namespace: ns }],
    });
  });
});

describe('manifests/per-node (optional component: each agent serves its own node)', () => {
  const objs = renderWithComponent('per-node');
  const base = render(manifests);
  const ds = one(objs, 'DaemonSet', 'spoke-agent');
  const pod = ds.spec.template.spec as Obj;
  const container = (pod.containers as Obj[]).find((c) => c.name === 'spoke-agent')!;
  const { values } = parseContainer(pod, container, ds.metadata.namespace);

  it('changes only the DaemonSet: the node from the downward API, in --node-name and --node-ips', () => {
    expect(objs.filter((o) => o.kind !== 'DaemonSet')).toEqual(base.filter((o) => o.kind !== 'DaemonSet'));
    const env = Object.fromEntries((container.env as Obj[]).map((e) => [e.name, e.valueFrom?.fieldRef?.fieldPath]));
    expect(env).toMatchObject({ NODE_NAME: 'spec.nodeName', NODE_IPS: 'status.hostIP' });
    expect(container.args).toEqual(expect.arrayContaining(['--node-name=$(NODE_NAME)', '--node-ips=$(NODE_IPS)']));
  });

  it("the agent, given the kubelet's expansion, serves its node's name and announces its address for destHost", () => {
    expect(values).toMatchObject({ nodeName: 'node-a', nodeIps: ['10.0.0.5'], kubeletPort: 10250 });
    const rules = rulesFromFlags(values);
    if (!rules.ok) throw new Error(rules.errors.join());
    expect(rules.value.match('node-a.node.cluster1')?.target).toEqual({ kind: 'ip', v4: ['10.0.0.5'], v6: [] });
    const own = new URLSearchParams(agentIdentifiers(values.agentIdentifiers, rules.value, values.nodeIps).own);
    expect(own.getAll('ipv4')).toEqual(['10.0.0.5']);
    expect(own.getAll('host')).toEqual(expect.arrayContaining(['cluster1', 'node-a.node.cluster1']));
  });
});

describe('manifests/service-access (optional component: a Deployment of 3 for Service access alone)', () => {
  const objs = renderWithComponent('service-access');
  const base = render(manifests);
  const baseDs = one(base, 'DaemonSet', 'spoke-agent');
  const deploy = one(objs, 'Deployment', 'spoke-agent');

  it('replaces the DaemonSet with a Deployment of the same pod, 3 replicas spread over nodes, surging', () => {
    expect(objs.filter((o) => o.kind === 'DaemonSet')).toEqual([]);
    expect(objs.filter((o) => o.kind !== 'Deployment')).toEqual(base.filter((o) => o.kind !== 'DaemonSet'));
    expect(deploy.metadata).toEqual(baseDs.metadata);
    expect(deploy.spec.replicas).toBe(3);
    expect(deploy.spec.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
    const { topologySpreadConstraints, ...podSpec } = deploy.spec.template.spec as Obj;
    expect({ ...deploy.spec.template, spec: podSpec }).toEqual(baseDs.spec.template);
    expect(topologySpreadConstraints).toEqual([
      expect.objectContaining({ topologyKey: 'kubernetes.io/hostname', labelSelector: deploy.spec.selector }),
    ]);
  });

  it('takes the other components in either order', () => {
    for (const order of [
      ['service-access', 'dns-api', 'lease-counting'],
      ['dns-api', 'lease-counting', 'service-access'],
    ]) {
      const d = one(renderWithComponent(...order), 'Deployment', 'spoke-agent');
      const c = (d.spec.template.spec.containers as Obj[])[0]!;
      expect(c.args, order.join()).toEqual(expect.arrayContaining(['--api-server-port=8443', '--count-server-leases']));
      expect((c.ports as Obj[]).map((p) => p.name)).toContain('api');
    }
  });
});
