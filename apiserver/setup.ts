// What the agent command calls with --api-server-port: the authentication configuration from the
// spoke's API server (read, then followed), the reviewer for tokens and access, and the TLS server.
// Loaded only then: it brings the Kubernetes client (kube/api-client.ts).
import type { Registry } from 'prom-client';
import type { DialLog } from '../agent/dial-log.js';
import type { Resolver } from '../dns/resolver.js';
import type { KubeApiClient } from '../kube/api-client.js';
import { requireClient } from '../kube/config.js';
import { apiReviewer } from '../kube/delegated-auth.js';
import type { KubeFlagValues } from '../kube/options.js';
import type { Logger } from '../observability/log.js';
import type { RuleHolder } from '../rules/holder.js';
import { AuthenticationSource } from './authentication-source.js';
import type { ApiServerFlagValues } from './options.js';
import { ApiServer } from './server.js';

export interface StartApiServerOptions {
  options: ApiServerFlagValues & Pick<KubeFlagValues, 'kubeconfig' | 'kubeResync'>;
  resolver: Resolver;
  holder: RuleHolder;
  /** The agent's dial log, when on. */
  dialLog?: DialLog;
  log: Logger;
  registry: Registry;
  /** From --kubeconfig or the pod's service account (kube/config.ts kubeApiClient); undefined when neither is there. */
  client: KubeApiClient | undefined;
}

/** Starts serving; throws a message for the operator when it cannot. Returns the port and the stop function. */
export async function startApiServer(o: StartApiServerOptions): Promise<{ port: number; close: () => Promise<void> }> {
  const client = requireClient(o.client, '--api-server-port');
  const log = o.log.child({ component: 'api' });
  const source = await AuthenticationSource.load({ client, log, registry: o.registry, resyncMs: o.options.kubeResync });
  let server: ApiServer;
  try {
    server = new ApiServer({
      host: o.options.apiServerBindAddress,
      port: o.options.apiServerPort,
      certFile: o.options.apiTlsCertFile,
      keyFile: o.options.apiTlsPrivateKeyFile,
      authentication: source.current,
      reviewer: apiReviewer(client),
      routes: { resolver: o.resolver, holder: o.holder, dialLog: o.dialLog },
      log,
      registry: o.registry,
    });
  } catch (err) {
    throw new Error(`--api-tls-cert-file/--api-tls-private-key-file: ${(err as Error).message}`);
  }
  let port: number;
  try {
    port = (await server.listen()).port;
  } catch (err) {
    throw new Error(`cannot listen on --api-server-port ${o.options.apiServerPort}: ${(err as Error).message}`);
  }
  source.start((config) => server.setAuthentication(config));
  log.info({ port, group: 'dns.spoke-agent.io' }, 'aggregated API listening');
  return {
    port,
    close: async () => {
      source.stop();
      await server.close();
    },
  };
}
