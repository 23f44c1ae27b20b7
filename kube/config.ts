// Where the spoke's API server is: --kubeconfig, else the pod's service account. client-node's
// loadFromCluster() does not fail outside a cluster (it yields https://undefined:undefined), so the
// environment is checked first. KubeConfig comes from its own module, not the package's index: the
// index loads every generated API class and model, which the agent does not use (kube/api-client.ts).
import { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import { KubeApiClient } from './api-client.js';
import { loadDeferredModules } from './deferred-modules.js';
import { inCluster } from './options.js';

/** The API server's configuration, or undefined when there is neither a kubeconfig nor a cluster. */
async function loadKubeConfig(kubeconfigPath: string, env: NodeJS.ProcessEnv): Promise<KubeConfig | undefined> {
  const kc = new KubeConfig();
  if (kubeconfigPath !== '') {
    await loadDeferredModules(['js-yaml']);
    kc.loadFromFile(kubeconfigPath);
  } else if (inCluster(env)) kc.loadFromCluster();
  else return undefined;
  return kc;
}

/** The modules of KubeConfig that the bundle defers (cmd/bundle-plugins.ts) which this kubeconfig uses. */
export function optionalModules(kc: Pick<KubeConfig, 'clusters' | 'users'>): string[] {
  const modules = new Set<string>();
  for (const cluster of kc.clusters)
    if (cluster.proxyUrl) {
      modules.add('socks-proxy-agent');
      modules.add('hpagent');
    }
  for (const user of kc.users) {
    const provider = user.authProvider?.name;
    if (provider === 'oidc') modules.add('openid-client');
    if (provider === 'azure' || provider === 'gcp') modules.add('jsonpath-plus');
  }
  return [...modules];
}

/** A client for the API server `loadKubeConfig` finds, with what its kubeconfig needs loaded; or undefined. */
export async function kubeApiClient(
  kubeconfigPath: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<KubeApiClient | undefined> {
  const kc = await loadKubeConfig(kubeconfigPath, env);
  if (!kc) return undefined;
  await loadDeferredModules(optionalModules(kc));
  return new KubeApiClient(kc);
}

/** The client `flag` needs; throws, naming the flag, when there is no API server to reach. */
export function requireClient(client: KubeApiClient | undefined, flag: string): KubeApiClient {
  if (!client) throw new Error(`${flag} needs --kubeconfig, or running in a pod with a service account`);
  return client;
}
