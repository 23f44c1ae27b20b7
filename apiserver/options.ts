// Flags of the aggregated API (`dns.spoke-agent.io`): off unless --api-server-port is given, since it
// needs a serving certificate, an APIService and RBAC in the cluster (apiserver/README.md).
import { int, str, type FlagSet, type Values } from '../flags/flags.js';

export const apiServerFlags = {
  apiServerPort: int(
    'api-server-port',
    0,
    'Serve the dns.spoke-agent.io API (for kubectl through the aggregation layer) over TLS on this port; 0: off. Needs --cluster-name, --api-tls-cert-file and --api-tls-private-key-file, and a Kubernetes API server.',
    {
      validate: (v) => (v < 0 || v > 65535 ? 'must be a port number (0: off)' : undefined),
    },
  ),
  apiServerBindAddress: str(
    'api-server-bind-address',
    '0.0.0.0',
    'Address the dns.spoke-agent.io API listens on (the aggregator dials the pod IP).',
  ),
  apiTlsCertFile: str(
    'api-tls-cert-file',
    '',
    "Serving certificate (PEM) of the dns.spoke-agent.io API, e.g. from a mounted Secret; its CA goes in the APIService's caBundle. Re-read when it changes.",
  ),
  apiTlsPrivateKeyFile: str('api-tls-private-key-file', '', 'Private key (PEM) of --api-tls-cert-file.'),
} satisfies FlagSet;

export type ApiServerFlagValues = Values<typeof apiServerFlags>;

export function servesApi(o: ApiServerFlagValues): boolean {
  return o.apiServerPort !== 0;
}

/** Checks that span several flags. */
export function validateApiServerOptions(o: ApiServerFlagValues & { clusterName: string }): string | undefined {
  if (!servesApi(o)) return undefined;
  if (o.apiTlsCertFile === '' || o.apiTlsPrivateKeyFile === '')
    return "--api-server-port needs --api-tls-cert-file and --api-tls-private-key-file (a serving certificate the APIService's caBundle trusts)";
  if (o.clusterName === '')
    return '--api-server-port needs --cluster-name: without rules there are no names to explain';
  return undefined;
}
