// manifests/ rendered by the real `kubectl kustomize` (test/support/global-setup.ts installs it), then
// checked against the agent itself: its flag parser accepts the container args, and probes, ports and
// mounts agree with the flag values those args produce.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { agentFlags, validateAgentOptions } from '../agent/options.js';
import { agentCommandFlags } from '../cmd/agent-command.js';
import { parseFlags, type Flag, type FlagSet } from '../flags/flags.js';
import { dnsFlags } from '../dns/options.js';
import { validateKubeOptions } from '../kube/options.js';
import { rulesFromFlags } from '../rules/options.js';
import { repoRoot } from './support/processes.js';

/* eslint-disable @typescript-eslint/no-explicit-any -- rendered Kubernetes objects are plain data */
type Obj = Record<string, any>;

const manifests = join(repoRoot, 'manifests');
const render = (dir: string): Obj[] =>
  parseAllDocuments(execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }))
    .map((d) => d.toJS() as Obj)
    .filter(Boolean);
const one = (objs: Obj[], kind: string, name?: string) => {
  const found = objs.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  expect(found, `${kind} ${name ?? ''}`).toHaveLength(1);
  return found[0]!;
};

const version = (JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
// ENTRYPOINT ["/nodejs/bin/node", ..., "/app/dist/cmd/main.js"]: what a command override must repeat.
const entrypoint = JSON.parse(/^ENTRYPOINT (\[.*\])$/m.exec(readFileSync(join(repoRoot, 'Dockerfile'), 'utf8'))![1]!) as string[];

// Flags naming files: on this machine they do not exist, in the pod they must lie in a mounted volume.
const fileFlags = ['ca-cert', 'agent-cert', 'agent-key', 'service-account-token-path', 'rules-file', 'kubeconfig'];

/** The agent's own parse of a container's args and env (downward-API values filled in as the kubelet would). */
function parseContainer(pod: Obj, container: Obj, namespace: string) {
  const mounts: Obj[] = container.volumeMounts ?? [];
  const underMount = (path: string) => (path === '' || mounts.some((m) => path.startsWith(posix.join(m.mountPath, '/'))) ? undefined : `${path} is in no mounted volume`);
  const set: FlagSet = Object.fromEntries(Object.entries(agentCommandFlags).map(([k, f]) => [k, fileFlags.includes(f.name) ? ({ ...f, validate: underMount } as Flag) : f]));
  const fields: Record<string, string> = { 'metadata.name': 'spoke-agent-x7k2p', 'metadata.namespace': namespace };
  const env = Object.fromEntries((container.env ?? []).map((e: Obj) => [e.name, e.value ?? fields[e.valueFrom?.fieldRef?.fieldPath]]));
  const parsed = parseFlags(set, [...(container.command ?? []).slice(entrypoint.length), ...container.args], env);
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
    expect(objs.map((o) => o.kind).sort()).toEqual(['ClusterRole', 'ClusterRoleBinding', 'ConfigMap', 'DaemonSet', 'Namespace', 'Role', 'RoleBinding', 'Service', 'ServiceAccount']);
    for (const o of objs.filter((o) => !['Namespace', 'ClusterRole', 'ClusterRoleBinding'].includes(o.kind))) expect(o.metadata.namespace, o.kind).toBe(ns);
    expect(one(objs, 'Namespace').metadata.name).toBe(ns);
  });

  it('the namespace enforces Pod Security "restricted"', () => {
    expect(one(objs, 'Namespace').metadata.labels).toMatchObject({ 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/warn': 'restricted', 'pod-security.kubernetes.io/audit': 'restricted' });
  });

  it('runs the image of this version, non-root, read-only, without privileges', () => {
    expect(container.image).toBe(`spoke-agent:${version}`);
    expect(container.command, 'the image ENTRYPOINT is used').toBeUndefined();
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    expect(pod.securityContext.runAsUser).toBeGreaterThan(0);
    expect(container.securityContext).toMatchObject({ runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } });
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

  it('the DNS Service maps 53 to the DNS port over UDP and TCP', () => {
    const svc = one(objs, 'Service');
    expect(svc.spec.selector).toEqual(ds.spec.selector.matchLabels);
    expect(ds.spec.template.metadata.labels).toMatchObject(svc.spec.selector);
    const ports = (svc.spec.ports as Obj[]).map((p) => `${p.port}->${p.targetPort}/${p.protocol}`).sort();
    expect(ports).toEqual([`53->${values.dnsPort}/TCP`, `53->${values.dnsPort}/UDP`]);
  });

  it('RBAC: least privilege for the flags given (one ConfigMap, delegated auth), bound to the pod\'s account', () => {
    const sa = one(objs, 'ServiceAccount');
    expect(pod.serviceAccountName).toBe(sa.metadata.name);
    const cm = one(objs, 'ConfigMap');
    const role = one(objs, 'Role');
    expect(role.rules).toEqual([{ apiGroups: [''], resources: ['configmaps'], resourceNames: [cm.metadata.name], verbs: ['list', 'watch'] }]);
    const subject = [{ kind: 'ServiceAccount', name: sa.metadata.name, namespace: ns }];
    expect(one(objs, 'RoleBinding')).toMatchObject({ roleRef: { kind: 'Role', name: role.metadata.name }, subjects: subject });
    expect(values.debugAuth).toBe('auto'); // on in a pod: TokenReview + SubjectAccessReview
    expect(one(objs, 'ClusterRoleBinding')).toMatchObject({ roleRef: { kind: 'ClusterRole', name: 'system:auth-delegator' }, subjects: subject });
    expect(values.autoExpose).toBe(false); // so no cluster-wide Service access is granted
    const rules = objs.flatMap((o) => (o.rules as Obj[] | undefined) ?? []);
    for (const r of rules) {
      expect([...(r.verbs ?? []), ...(r.resources ?? []), ...(r.apiGroups ?? [])]).not.toContain('*');
      expect(r.resources ?? []).not.toContain('secrets');
    }
    // The reader role is for people: granted to nobody here.
    expect(one(objs, 'ClusterRole').rules).toEqual([{ nonResourceURLs: [values.debugAuthPath, '/metrics'], verbs: ['get'] }]);
  });
});

describe('manifests/overlays/cluster-proxy (drop-in for the Go agent)', () => {
  const overlay = join(manifests, 'overlays/cluster-proxy');
  const objs = render(overlay);
  const before = parseYaml(readFileSync(join(overlay, 'cluster-proxy-proxy-agent.yaml'), 'utf8')) as Obj;
  const deploy = one(objs, 'Deployment', 'cluster-proxy-proxy-agent');
  const pod = deploy.spec.template.spec as Obj;
  const containers = pod.containers as Obj[];
  const agent = containers.find((c) => c.name === 'proxy-agent')!;
  const original = (before.spec.template.spec.containers as Obj[]).find((c) => c.name === 'proxy-agent')!;
  const { values } = parseContainer(pod, agent, deploy.metadata.namespace);

  it('swaps the image and the command for spoke-agent\'s entrypoint', () => {
    expect(agent.image).toBe(`spoke-agent:${version}`);
    expect(agent.command).toEqual(entrypoint);
  });

  it('keeps cluster-proxy\'s args and adds the DNS ones after them', () => {
    expect(original.args.map((a: string) => a.split('=')[0])).toEqual(['--proxy-server-host', '--proxy-server-port', '--agent-identifiers', '--ca-cert', '--agent-cert', '--agent-key']);
    expect(agent.args.slice(0, original.args.length)).toEqual(original.args);
    expect(values).toMatchObject({ caCert: '/etc/ca/ca.crt', agentCert: '/etc/tls/tls.crt', agentKey: '/etc/tls/tls.key', proxyServerPort: 8091 });
    expect(values.clusterName).not.toBe('');
    expect(values.agentNamespace).toBe(deploy.metadata.namespace);
    expect(values.allowedCidrs).toContain('127.0.0.1/32'); // the service-proxy sidecar's hostAliases address
  });

  it('serves health on the port addon-agent polls (8093), and keeps its liveness probe', () => {
    expect(values.healthServerPort).toBe(8093);
    expect(values.healthServerPort).toBe(agentFlags.healthServerPort.default);
    expectHttpProbe(agent.readinessProbe, '/readyz', values.healthServerPort);
    expect(agent.livenessProbe).toEqual(original.livenessProbe);
    expect(agent.securityContext).toEqual(original.securityContext);
    expect(agent.volumeMounts).toEqual(original.volumeMounts);
  });

  it('leaves the other containers and the pod as they were', () => {
    const others = (c: Obj[]) => c.filter((x) => x.name !== 'proxy-agent');
    expect(others(containers)).toEqual(others(before.spec.template.spec.containers));
    expect({ ...pod, containers: undefined }).toEqual({ ...before.spec.template.spec, containers: undefined });
  });
});

describe('manifests/monitoring (optional component: PodMonitor, PrometheusRule, Grafana dashboard)', () => {
  // An overlay as a user writes one: the base plus the component. Kustomize wants relative paths and
  // refuses an overlay inside the base's folder, so it lives in a temporary one.
  const dir = mkdtempSync(join(tmpdir(), 'spoke-overlay-'));
  let objs: Obj[];
  try {
    writeFileSync(
      join(dir, 'kustomization.yaml'),
      ['apiVersion: kustomize.config.k8s.io/v1beta1', 'kind: Kustomization', `resources: [${relative(dir, manifests)}]`, `components: [${relative(dir, join(manifests, 'monitoring'))}]`, ''].join('\n'),
    );
    objs = render(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  const base = render(manifests);
  const ds = one(objs, 'DaemonSet', 'spoke-agent');
  const ns = ds.metadata.namespace as string;
  const container = (ds.spec.template.spec.containers as Obj[]).find((c) => c.name === 'spoke-agent')!;

  it('adds a PodMonitor, a PrometheusRule and the dashboard ConfigMap to the base, in its namespace, and changes nothing else', () => {
    const added = objs.filter((o) => !base.some((b) => b.kind === o.kind && b.metadata.name === o.metadata.name));
    expect(added.map((o) => `${o.kind}/${o.metadata.name}`).sort()).toEqual(['ConfigMap/spoke-agent-dashboard', 'PodMonitor/spoke-agent', 'PrometheusRule/spoke-agent']);
    for (const o of added) expect(o.metadata.namespace, o.kind).toBe(ns);
    expect(objs.filter((o) => !added.includes(o))).toEqual(base);
  });

  it('the PodMonitor scrapes /metrics on the agent pods\' health port', () => {
    const pm = one(objs, 'PodMonitor');
    expect(ds.spec.template.metadata.labels).toMatchObject(pm.spec.selector.matchLabels);
    const [endpoint] = pm.spec.podMetricsEndpoints as Obj[];
    expect(endpoint).toMatchObject({ path: '/metrics' });
    const port = (container.ports as Obj[]).find((p) => p.name === endpoint!.port)!;
    expect(port.containerPort).toBe(container.livenessProbe.httpGet.port);
  });

  it('the PrometheusRule holds the rule file\'s groups, and the ConfigMap the dashboard, labelled for Grafana\'s sidecar', () => {
    const rules = parseYaml(readFileSync(join(manifests, 'monitoring/alerts.rules.yaml'), 'utf8')) as Obj;
    expect(one(objs, 'PrometheusRule').spec).toEqual(rules);
    const cm = one(objs, 'ConfigMap', 'spoke-agent-dashboard');
    expect(cm.metadata.labels).toMatchObject({ grafana_dashboard: '1' });
    expect(JSON.parse(cm.data['spoke-agent.json'])).toEqual(JSON.parse(readFileSync(join(manifests, 'monitoring/dashboard.json'), 'utf8')));
  });
});
