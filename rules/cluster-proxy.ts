// Zero-config under cluster-proxy: its addon manager renders the proxy-agent container with the same
// args on every managed cluster except --agent-identifiers, so the cluster's name and the agent's
// namespace are read from there (and from the pod's service account) instead of flags nobody can set
// per cluster. Pure: the identifiers and the namespace file's text come in, the values and the reasons
// (for the log) go out.
import { identifierHosts } from '../proto/agent-identifiers.js';
import { labelProblem, serviceProxyHost } from './naming.js';

export interface IdentityInputs {
  /** --agent-identifiers (already validated). */
  identifiers: string;
  /** --cluster-name and --agent-namespace (or POD_NAMESPACE) as given: a non-empty value always wins. */
  clusterName: string;
  agentNamespace: string;
  /** The text of the service account's namespace file, when there is one. */
  serviceAccountNamespace?: string;
}

export interface DerivedIdentity {
  clusterName: string;
  agentNamespace: string;
  /** One entry per value taken from somewhere other than its flag: what it is and why. */
  derived: Array<{ flag: '--cluster-name' | '--agent-namespace'; value: string; from: string }>;
  /** Set when cluster-proxy's service-proxy host is there but names no cluster we can see. */
  problem?: string;
}

const serviceProxyHostShape = /^cluster-[0-9a-f]{48}\.open-cluster-management\.proxy$/;

export function deriveIdentity(i: IdentityInputs): DerivedIdentity {
  const hosts = identifierHosts(i.identifiers);
  const out: DerivedIdentity = { clusterName: i.clusterName, agentNamespace: i.agentNamespace, derived: [] };
  if (out.clusterName === '') {
    const proxyHosts = new Set(hosts.filter((h) => serviceProxyHostShape.test(h)));
    // The one host= whose cluster-proxy hash is among the identifiers is the cluster (sha256 is one-way,
    // so without a host=<cluster> the name cannot be recovered).
    const cluster = proxyHosts.size === 0 ? undefined : hosts.find((h) => proxyHosts.has(serviceProxyHost(h)));
    if (cluster !== undefined) {
      out.clusterName = cluster;
      out.derived.push({
        flag: '--cluster-name',
        value: cluster,
        from: `--agent-identifiers: host=${cluster} is the cluster whose service-proxy host host=${serviceProxyHost(cluster)} is listed (cluster-proxy)`,
      });
    } else if (proxyHosts.size > 0) {
      out.problem = `--agent-identifiers has cluster-proxy's service-proxy host (${[...proxyHosts][0]}) but no host=<cluster> that hashes to it (is cluster-proxy's kube-api proxy off?): set --cluster-name to serve names`;
    }
  }
  if (out.agentNamespace === '' && out.clusterName !== '') {
    const prefix = `${out.clusterName}.`;
    const fromHost = hosts.find((h) => h.startsWith(prefix) && labelProblem(h.slice(prefix.length), '') === undefined);
    const fromFile = i.serviceAccountNamespace?.trim() ?? '';
    if (fromHost !== undefined) {
      out.agentNamespace = fromHost.slice(prefix.length);
      out.derived.push({
        flag: '--agent-namespace',
        value: out.agentNamespace,
        from: `--agent-identifiers: host=${fromHost} is <cluster>.<namespace>`,
      });
    } else if (fromFile !== '' && labelProblem(fromFile, '') === undefined) {
      out.agentNamespace = fromFile;
      out.derived.push({
        flag: '--agent-namespace',
        value: fromFile,
        from: "the pod's service account namespace file",
      });
    }
  }
  return out;
}
