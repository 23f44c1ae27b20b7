// What the agent command calls: start the watches that feed the rules (the rules ConfigMap, and with
// --auto-expose the Services and the selected namespaces), and build the /debug and /metrics guards.
import { readFileSync } from 'node:fs';
import type { V1ConfigMap, V1Namespace, V1Service } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import type { Guard } from '../observability/health-server.js';
import type { Logger } from '../observability/log.js';
import type { RuleHolder } from '../rules/holder.js';
import { namingFromFlags } from '../rules/from-flags.js';
import type { RuleFlagValues } from '../rules/options.js';
import type { KubeApiClient } from './api-client.js';
import { requireClient } from './config.js';
import { apiReviewer, delegatedAuthGuard } from './delegated-auth.js';
import { kubeMetrics } from './metrics.js';
import { inCluster, parseObjectRef, liveLogAuthPath, type KubeFlagValues } from './options.js';
import { KubeRuleSource } from './rule-source.js';
import { LeaseCounter, leaseSelector } from './lease-counter.js';
import { configMapSpec, ResilientWatch } from './watch.js';

export { kubeApiClient } from './config.js';

export interface KubeSourcesOptions {
  kube: KubeFlagValues;
  ruleFlags: RuleFlagValues;
  holder: RuleHolder;
  log: Logger;
  registry: Registry;
  /** From --kubeconfig or the pod's service account (kube/config.ts kubeApiClient); undefined when neither is there. */
  client: KubeApiClient | undefined;
  /** Watch restart backoff; tests shorten it. */
  backoff?: { initialMs: number; capMs: number };
  readFile?: (path: string) => string;
}

/** Whether any Kubernetes source of rules is configured. */
function wantsKubeSources(o: KubeFlagValues): boolean {
  return o.rulesConfigmap !== '' || o.autoExpose;
}

/**
 * Starts the watches and returns the function that stops them. Throws (a message for the operator)
 * when sources are configured but there are no rules (--cluster-name) or no API server to ask.
 */
export function startKubeSources(o: KubeSourcesOptions): () => void {
  if (!wantsKubeSources(o.kube)) return () => {};
  const flags = o.kube.rulesConfigmap !== '' ? '--rules-configmap' : '--auto-expose';
  if (o.ruleFlags.clusterName === '')
    throw new Error(`${flags} needs --cluster-name: without it the agent serves no names`);
  const client = requireClient(o.client, flags);
  const metrics = kubeMetrics(o.registry);
  const log = o.log.child({ component: 'kube' });
  const readFile = o.readFile ?? ((p: string) => readFileSync(p, 'utf8'));
  const source = new KubeRuleSource({
    naming: namingFromFlags(o.ruleFlags),
    expose: o.ruleFlags.expose,
    rulesFile:
      o.ruleFlags.rulesFile === ''
        ? undefined
        : { origin: `--rules-file=${o.ruleFlags.rulesFile}`, content: readFile(o.ruleFlags.rulesFile) },
    configMapRef: o.kube.rulesConfigmap,
    annotation: o.kube.autoExposeAnnotation,
    holder: o.holder,
    log,
    metrics,
  });
  const common = { client, log, metrics, resyncMs: o.kube.kubeResync, backoff: o.backoff };
  const watches: Array<ResilientWatch<V1ConfigMap> | ResilientWatch<V1Service> | ResilientWatch<V1Namespace>> = [];

  if (o.kube.rulesConfigmap !== '') {
    const ref = parseObjectRef(o.kube.rulesConfigmap);
    if (typeof ref === 'string') throw new Error(`--rules-configmap: ${ref}`);
    watches.push(
      new ResilientWatch<V1ConfigMap>({
        ...common,
        spec: configMapSpec('configmap', ref),
        onList: (items) => source.setConfigMap(items),
      }),
    );
  }
  if (o.kube.autoExpose) {
    watches.push(
      new ResilientWatch<V1Service>({
        ...common,
        spec: { resource: 'services', path: '/api/v1/services' },
        onList: (items) => source.setServices(items),
      }),
    );
    const labelSelector = o.kube.autoExposeNamespaceSelector;
    if (labelSelector !== '') {
      watches.push(
        new ResilientWatch<V1Namespace>({
          ...common,
          spec: { resource: 'namespaces', path: '/api/v1/namespaces', labelSelector },
          onList: (items) => source.setNamespaces(items),
        }),
      );
    }
  }
  for (const w of watches) w.start();
  log.info(
    {
      configmap: o.kube.rulesConfigmap || undefined,
      autoExpose: o.kube.autoExpose,
      namespaceSelector: o.kube.autoExposeNamespaceSelector || undefined,
    },
    'watching the Kubernetes API for rules',
  );
  return () => {
    for (const w of watches) w.stop();
  };
}

export interface LeaseCountingOptions {
  agent: { leaseNamespace: string; leaseLabelSelector: string; leaseLabel: string };
  kube: Pick<KubeFlagValues, 'kubeResync'>;
  client: KubeApiClient | undefined;
  onCount: (count: number) => void;
  log: Logger;
  registry: Registry;
  backoff?: { initialMs: number; capMs: number };
}

/** --count-server-leases: starts counting the proxy-servers' Leases; returns the function that stops it. */
export function startLeaseCounting(o: LeaseCountingOptions): () => void {
  const counter = new LeaseCounter({
    client: requireClient(o.client, '--count-server-leases'),
    namespace: o.agent.leaseNamespace,
    selector: leaseSelector(o.agent),
    onCount: o.onCount,
    log: o.log.child({ component: 'leases' }),
    registry: o.registry,
    resyncMs: o.kube.kubeResync,
    backoff: o.backoff,
  });
  counter.start();
  return () => counter.stop();
}

export interface Guards {
  /** For every /debug/* route but the query and dial logs; undefined when delegated auth is off. */
  debug?: Guard;
  /** For /debug/queries: a permission of its own, get on --debug-auth-path + "/queries". */
  queries?: Guard;
  /** For /debug/dials: a permission of its own, get on --debug-auth-path + "/dials". */
  dials?: Guard;
  /** For /metrics (HealthServer.protectMetrics); undefined unless --metrics-auth. */
  metrics?: Guard;
}

/** The guards --debug-auth and --metrics-auth ask for. Throws when auth is required but there is no API server. */
export function authGuards(o: {
  kube: KubeFlagValues;
  log: Logger;
  registry: Registry;
  client: KubeApiClient | undefined;
  env?: NodeJS.ProcessEnv;
}): Guards {
  const debugOn = o.kube.debugAuth === 'true' || (o.kube.debugAuth === 'auto' && inCluster(o.env));
  if (!debugOn && !o.kube.metricsAuth) return {};
  const reviewer = apiReviewer(requireClient(o.client, debugOn ? '--debug-auth=true' : '--metrics-auth'));
  const common = { reviewer, log: o.log.child({ component: 'delegated-auth' }), metrics: kubeMetrics(o.registry) };
  return {
    debug: debugOn ? delegatedAuthGuard({ ...common, path: o.kube.debugAuthPath }) : undefined,
    queries: debugOn
      ? delegatedAuthGuard({ ...common, path: liveLogAuthPath(o.kube.debugAuthPath, 'queries') })
      : undefined,
    dials: debugOn
      ? delegatedAuthGuard({ ...common, path: liveLogAuthPath(o.kube.debugAuthPath, 'dials') })
      : undefined,
    metrics: o.kube.metricsAuth ? delegatedAuthGuard({ ...common, path: '/metrics' }) : undefined,
  };
}
