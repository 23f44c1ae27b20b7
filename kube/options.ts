// Flags for what the agent takes from the spoke's Kubernetes API: rules from a ConfigMap, auto-exposed
// Services, and delegated authentication for /debug and /metrics.
import { readFileSync } from 'node:fs';
import { bool, duration, str, type FlagSet, type Values } from '../flags/flags.js';
import { labelSelectorProblem } from '../flags/label-selector.js';
import { labelProblem } from '../rules/naming.js';

/** `NAMESPACE/NAME`, or a message. */
export function parseObjectRef(text: string): { namespace: string; name: string } | string {
  const parts = text.split('/');
  if (parts.length !== 2) return `want NAMESPACE/NAME, got "${text}"`;
  const [namespace, name] = parts as [string, string];
  const problem =
    labelProblem(namespace, 'namespace') ??
    (/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(name) && name.length <= 253
      ? undefined
      : `"${name}" is not a ConfigMap name`);
  return problem ?? { namespace, name };
}

export const kubeFlags = {
  kubeconfig: str(
    'kubeconfig',
    '',
    "Path to a kubeconfig for the spoke's API server; when empty, the in-cluster service account is used (if running in a pod).",
  ),
  rulesConfigmap: str(
    'rules-configmap',
    '',
    'NAMESPACE/NAME of a ConfigMap whose "rules.yaml" (or "rules.json") key holds rules in the --rules-file format; watched, applied within seconds, a bad edit is rejected whole and the last good rules stay. Not given, in a pod with rules: spoke-agent-rules in the agent\'s namespace, if it exists and the agent may read it; --rules-configmap= turns that off.',
    {
      defaultText: '<agent-namespace>/spoke-agent-rules in a pod',
      validate: (v) => {
        if (v === '') return undefined;
        const ref = parseObjectRef(v);
        return typeof ref === 'string' ? ref : undefined;
      },
    },
  ),
  autoExpose: bool(
    'auto-expose',
    false,
    'Watch Services and expose as <service>.<namespace>.<cluster> every Service annotated --auto-expose-annotation="true", and every Service of the namespaces --auto-expose-namespace-selector picks; "false" opts a Service out.',
  ),
  autoExposeNamespaceSelector: str(
    'auto-expose-namespace-selector',
    '',
    'Label selector (e.g. spoke-agent.io/expose=true) of namespaces whose every Service is exposed; needs --auto-expose.',
    { validate: labelSelectorProblem },
  ),
  autoExposeAnnotation: str(
    'auto-expose-annotation',
    'spoke-agent.io/expose',
    'Service annotation: "true" exposes the Service, "false" keeps it unexposed even in a selected namespace.',
    {
      validate: (v) =>
        /^([a-z0-9.-]+\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(v)
          ? undefined
          : `"${v}" is not an annotation key`,
    },
  ),
  debugAuth: str(
    'debug-auth',
    'auto',
    'Require a bearer token for /debug/*: checked with a TokenReview, then a SubjectAccessReview for "get" on --debug-auth-path. auto: on when running in a cluster.',
    {
      validate: (v) => (['auto', 'true', 'false'].includes(v) ? undefined : `must be auto, true or false, got "${v}"`),
    },
  ),
  debugAuthPath: str(
    'debug-auth-path',
    '/debug/spoke-agent',
    'Non-resource URL a caller of /debug/* must be allowed to "get" (RBAC nonResourceURLs); /debug/queries, the DNS query log, needs "get" on this path + "/queries" instead.',
    {
      validate: (v) => (v.startsWith('/') ? undefined : 'must start with "/"'),
    },
  ),
  metricsAuth: bool(
    'metrics-auth',
    false,
    'Protect /metrics like /debug (delegated authentication), requiring "get" on the non-resource URL /metrics.',
  ),
  kubeResync: duration(
    'kube-resync',
    300_000,
    'Relist watched objects this often even when the watch looks healthy: a watchdog against watches that go quiet.',
    {
      validate: (ms) => (ms < 1000 ? 'must be at least 1s' : undefined),
    },
  ),
} satisfies FlagSet;

export type KubeFlagValues = Values<typeof kubeFlags>;

/**
 * What a caller of /debug/queries or /debug/dials must be allowed to "get": reading the queries pods
 * make, or who reached what through the tunnel, is not reading the rules.
 */
export const liveLogAuthPath = (debugAuthPath: string, log: 'queries' | 'dials') =>
  `${debugAuthPath.replace(/\/$/, '')}/${log}`;

/** Checks that span several flags. */
export function validateKubeOptions(o: KubeFlagValues): string | undefined {
  if (o.autoExposeNamespaceSelector !== '' && !o.autoExpose)
    return '--auto-expose-namespace-selector needs --auto-expose';
  return undefined;
}

export function inCluster(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT);
}

/** Where the kubelet mounts the pod's service account: token, ca.crt, namespace. */
const serviceAccountDir = '/var/run/secrets/kubernetes.io/serviceaccount';

/** The pod's namespace as its service account says, or undefined outside a pod. */
export function serviceAccountNamespace(dir = serviceAccountDir): string | undefined {
  try {
    return readFileSync(`${dir}/namespace`, 'utf8');
  } catch {
    return undefined;
  }
}

/** The rules ConfigMap watched when --rules-configmap is not given: the agent's own namespace's, in a pod with rules. */
export function defaultRulesConfigmap(
  o: { clusterName: string; agentNamespace: string },
  env: NodeJS.ProcessEnv = process.env,
): string {
  return o.clusterName !== '' && o.agentNamespace !== '' && inCluster(env)
    ? `${o.agentNamespace}/spoke-agent-rules`
    : '';
}

/** Whether the flags need the Kubernetes API at all; the client library costs ~60 MiB, so load it only then. */
export function usesKubeApi(o: KubeFlagValues, env: NodeJS.ProcessEnv = process.env): boolean {
  return (
    o.rulesConfigmap !== '' ||
    o.autoExpose ||
    o.metricsAuth ||
    o.debugAuth === 'true' ||
    (o.debugAuth === 'auto' && inCluster(env))
  );
}
