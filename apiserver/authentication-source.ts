// The authentication configuration the API server publishes in kube-system/extension-apiserver-
// authentication, read once at start (unreadable is a start-up error that names the missing RBAC)
// and then followed with a watch, so a rotated front-proxy CA or client CA applies without a restart.
import type { V1ConfigMap } from '@kubernetes/client-node';
import type { KubeApiClient } from '../kube/api-client.js';
import { kubeMetrics } from '../kube/metrics.js';
import { configMapSpec, describeApiError, listOf, ResilientWatch, statusOf } from '../kube/watch.js';
import type { Logger } from '../observability/log.js';
import type { Registry } from 'prom-client';
import { authenticationConfigMap, parseAuthenticationConfig, type AuthenticationConfig } from './authentication.js';

const ref = `${authenticationConfigMap.namespace}/${authenticationConfigMap.name}`;
const rbacHint = `bind the Role ${authenticationConfigMap.namespace}/extension-apiserver-authentication-reader to the agent's ServiceAccount with a RoleBinding in ${authenticationConfigMap.namespace} (manifests/dns-api has it)`;

export interface AuthenticationSourceOptions {
  client: KubeApiClient;
  log: Logger;
  registry: Registry;
  resyncMs: number;
  backoff?: { initialMs: number; capMs: number };
}

export class AuthenticationSource {
  private watch?: ResilientWatch<V1ConfigMap>;

  private config: AuthenticationConfig;
  /** The ConfigMap's data as last applied: a relist of the same data changes nothing. */
  private data: string;

  private constructor(
    private readonly opts: AuthenticationSourceOptions,
    cm: V1ConfigMap,
  ) {
    this.config = configFrom(cm, opts.log);
    this.data = JSON.stringify(cm.data ?? {});
  }

  get current(): AuthenticationConfig {
    return this.config;
  }

  /** Reads the ConfigMap; throws a message for the operator when it cannot. */
  static async load(opts: AuthenticationSourceOptions): Promise<AuthenticationSource> {
    let items: V1ConfigMap[];
    try {
      items = (await listOf<V1ConfigMap>(opts.client, spec)).items;
    } catch (err) {
      const code = statusOf(err);
      if (code === 401 || code === 403)
        throw new Error(`--api-server-port: cannot read the ConfigMap ${ref} (HTTP ${code}): ${rbacHint}`);
      throw new Error(`--api-server-port: cannot read the ConfigMap ${ref}: ${describeApiError(err)}`);
    }
    if (items.length === 0)
      throw new Error(
        `--api-server-port: the ConfigMap ${ref} does not exist: the API server publishes it at start (is this a Kubernetes API server?)`,
      );
    return new AuthenticationSource(opts, items[0]!);
  }

  /** Follows changes; `onChange` gets each new configuration. */
  start(onChange: (config: AuthenticationConfig) => void): void {
    this.watch = new ResilientWatch<V1ConfigMap>({
      client: this.opts.client,
      log: this.opts.log,
      metrics: kubeMetrics(this.opts.registry),
      resyncMs: this.opts.resyncMs,
      backoff: this.opts.backoff,
      spec,
      onList: (items) => {
        // A deleted ConfigMap is a moment in a re-creation: keep trusting what was last published.
        if (items.length === 0)
          return void this.opts.log.warn(
            { configmap: ref },
            'authentication ConfigMap deleted; keeping the last configuration',
          );
        const data = JSON.stringify(items[0]!.data ?? {});
        if (data === this.data) return;
        this.data = data;
        this.config = configFrom(items[0]!, this.opts.log);
        this.opts.log.info({ configmap: ref }, 'authentication configuration changed');
        onChange(this.config);
      },
    });
    this.watch.start();
  }

  stop(): void {
    this.watch?.stop();
  }
}

const spec = configMapSpec('authentication-configmap', authenticationConfigMap);

function configFrom(cm: V1ConfigMap, log: Logger): AuthenticationConfig {
  const { config, problems } = parseAuthenticationConfig(cm.data);
  if (problems.length)
    log.warn({ configmap: ref, problems }, 'parts of the authentication configuration are unusable and left out');
  if (!config.requestHeader)
    log.warn(
      { configmap: ref },
      'no requestheader-client-ca-file: requests through the aggregation layer cannot be authenticated (kube-apiserver --requestheader-client-ca-file)',
    );
  return config;
}
