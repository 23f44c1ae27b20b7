// The host names spoke-agent serves and the cluster-internal names they stand for. Pure string work:
// the same functions build the DNS table, the agent identifiers and the debug output.
import { createHash } from 'node:crypto';
import type { NodeIdentity } from './node.js';

/** What every name is built from: --cluster-name, --agent-namespace, --cluster-domain. */
export interface NamingContext {
  cluster: string;
  /** Empty when unknown (no --agent-namespace and no POD_NAMESPACE): `<cluster>.<ns>` is then not served. */
  agentNamespace: string;
  clusterDomain: string;
  /** The node of a per-node agent (--node-name, --node-ips): `<node>.node.<cluster>` is served too. */
  node?: NodeIdentity;
}

const rfc1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
// Service names are DNS-1035 labels (Kubernetes validation): they start with a letter.
const rfc1035Label = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/** Why `value` is not an RFC 1123 label (what Kubernetes requires of namespaces and cluster names), or undefined. */
export function labelProblem(value: string, what: string, rfc1035 = false): string | undefined {
  if (value === '') return `${what} is empty`;
  if (value.length > 63) return `${what} "${value}" is ${value.length} characters, over the 63 a DNS label allows`;
  const re = rfc1035 ? rfc1035Label : rfc1123Label;
  if (!re.test(value)) {
    const shape = rfc1035 ? 'start with a letter' : 'start with a letter or digit';
    return `${what} "${value}" is not a DNS label (lower-case letters, digits and "-"; ${shape} and end with a letter or digit)`;
  }
  return undefined;
}

/** Why `name` (normalized) is not a usable host name, or undefined. Labels are RFC 1123 plus "_" (SRV-style names). */
export function hostNameProblem(name: string, what: string): string | undefined {
  if (name === '') return `${what} is empty`;
  if (name.length > 253) return `${what} "${name}" is ${name.length} characters, over the 253 a DNS name allows`;
  for (const label of name.split('.')) {
    if (label.length > 63)
      return `${what} "${name}" has a label of ${label.length} characters, over the 63 a DNS label allows`;
    if (!/^[a-z0-9_]([-a-z0-9_]*[a-z0-9_])?$/.test(label)) return `${what} "${name}" is not a valid DNS name`;
  }
  return undefined;
}

/** Lower-cased, without the trailing root dot: the form every table is keyed by. */
export function normalizeName(name: string): string {
  const lower = name.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/** `<cluster>` and `<cluster>.<agent-namespace>`: the names cluster-proxy's hub dials for the kube-apiserver. */
export function clusterHosts(ctx: NamingContext): string[] {
  return ctx.agentNamespace === '' ? [ctx.cluster] : [ctx.cluster, `${ctx.cluster}.${ctx.agentNamespace}`];
}

export function kubernetesApiFqdn(ctx: NamingContext): string {
  return serviceFqdn(ctx, 'default', 'kubernetes');
}

/** `<service>.<namespace>.<cluster>`: the name a hub client dials for an exposed Service. */
export function serviceHost(ctx: NamingContext, namespace: string, service: string): string {
  return `${service}.${namespace}.${ctx.cluster}`;
}

/** `<service>.<namespace>.svc.<cluster-domain>`: the Service's name inside the cluster. */
export function serviceFqdn(ctx: NamingContext, namespace: string, service: string): string {
  return `${service}.${namespace}.svc.${ctx.clusterDomain}`;
}

/**
 * cluster-proxy's GenerateServiceURL (pkg/util/serviceurl.go): "cluster-proxy-" and the first 49 hex digits
 * of sha256("<cluster> <namespace> <service>"), 63 characters in all. Hub clients written for
 * ManagedProxyServiceResolver dial this name.
 */
export function hashedServiceHost(cluster: string, namespace: string, service: string): string {
  return `cluster-proxy-${sha256Hex(`${cluster} ${namespace} ${service}`).slice(0, 49)}`;
}

/**
 * cluster-proxy's GenerateServiceProxyHost (pkg/util/serviceurl.go): the first 56 characters of
 * "cluster-" + sha256(cluster) in hex, then ".open-cluster-management.proxy". The hub names it in
 * --agent-identifiers and the pod's hostAliases maps it to the service-proxy sidecar on 127.0.0.1.
 */
export function serviceProxyHost(cluster: string): string {
  return `${`cluster-${sha256Hex(cluster)}`.slice(0, 56)}.open-cluster-management.proxy`;
}

const sha256Hex = (text: string) => createHash('sha256').update(text).digest('hex');
