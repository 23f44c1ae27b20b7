// Where the spoke's API server is: --kubeconfig, else the pod's service account. client-node's
// loadFromCluster() does not fail outside a cluster (it yields https://undefined:undefined), so the
// environment is checked first.
import { KubeConfig } from '@kubernetes/client-node';
import { inCluster } from './options.js';

/** The API server's configuration, or undefined when there is neither a kubeconfig nor a cluster. */
export function loadKubeConfig(kubeconfigPath: string, env: NodeJS.ProcessEnv = process.env): KubeConfig | undefined {
  const kc = new KubeConfig();
  if (kubeconfigPath !== '') kc.loadFromFile(kubeconfigPath);
  else if (inCluster(env)) kc.loadFromCluster();
  else return undefined;
  return kc;
}
