// Every kube/ metric in one place: spoke_agent_kube_*, and the Go agent's lease metrics, which the
// lease counter (lease-counter.ts) builds.
import type { Counter, Gauge, Registry } from 'prom-client';
import { counter, gauge, type MetricDeclarations } from '../observability/metric.js';

export type Resource = 'configmap' | 'services' | 'namespaces' | 'authentication-configmap' | 'leases';

const goPrefix = 'konnectivity_network_proxy_agent_';

export const kubeMetricDeclarations = {
  watchErrors: {
    type: 'counter',
    name: 'spoke_agent_kube_watch_errors_total',
    help: 'List or watch failures against the API server, by resource; each restarts the watch with backoff.',
    labelNames: ['resource'],
  },
  watchRestarts: {
    type: 'counter',
    name: 'spoke_agent_kube_watch_restarts_total',
    help: 'Watches started over with a fresh list, by resource and reason (error; resync: the periodic watchdog relist; expired: the server had compacted the version watched from, 410 Gone).',
    labelNames: ['resource', 'reason'],
  },
  watchSynced: {
    type: 'gauge',
    name: 'spoke_agent_kube_watch_synced',
    help: '1 when the watch of the resource has listed and is watching, 0 while it is failing (the last known objects stay in force).',
    labelNames: ['resource'],
  },
  lastEvent: {
    type: 'gauge',
    name: 'spoke_agent_kube_last_event_timestamp_seconds',
    help: 'When the watch of the resource last listed or received an event (Unix seconds).',
    labelNames: ['resource'],
  },
  ruleUpdates: {
    type: 'counter',
    name: 'spoke_agent_kube_rule_updates_total',
    help: 'Rule recomputations after a ConfigMap or Service change, by result (applied, unchanged, rejected: the last good rules stay).',
    labelNames: ['result'],
  },
  rulesRejected: {
    type: 'gauge',
    name: 'spoke_agent_kube_rules_rejected',
    help: '1 while the latest rules from the Kubernetes API are rejected (the ConfigMap as it is now, or the sources together, do not make valid rules) and the last good rules stay in force; 0 once they apply.',
  },
  autoExposed: {
    type: 'gauge',
    name: 'spoke_agent_kube_auto_exposed_services',
    help: 'Services exposed by --auto-expose.',
  },
  reregistrations: {
    type: 'counter',
    name: 'spoke_agent_kube_reregistrations_total',
    help: 'Times the agent re-registered with new identifiers after the served names changed.',
  },
  authDecisions: {
    type: 'counter',
    name: 'spoke_agent_kube_auth_decisions_total',
    help: 'Delegated authentication and authorization of /debug and /metrics requests, by result (allowed, unauthenticated, forbidden, error) and whether the decision came from the cache.',
    labelNames: ['result', 'cached'],
  },
  // The Go agent's, with its names and labels (pkg/agent/metrics/metrics.go): lease-counter.ts's.
  leaseLists: {
    type: 'counter',
    name: `${goPrefix}lease_lists_total`,
    help: 'Count of server lease list calls made by the agent to the k8s apiserver, labeled by HTTP response code and reason',
    labelNames: ['http_response_code', 'reason'],
  },
  leaseWatches: {
    type: 'counter',
    name: `${goPrefix}lease_watches_total`,
    help: 'Count of server lease watch calls made by the agent to the k8s apiserver, labeled by HTTP response code and reason',
    labelNames: ['http_response_code', 'reason'],
  },
  leaseListLatency: {
    type: 'histogram',
    name: `${goPrefix}lease_list_latency_seconds`,
    help: 'Latency of server lease listing in seconds',
    labelNames: ['http_response_code'],
    buckets: [0.005, 0.025, 0.1, 0.5, 2.5, 12.5],
  },
} as const satisfies MetricDeclarations;

export class KubeMetrics {
  readonly watchErrors: Counter<'resource'>;
  readonly watchRestarts: Counter<'resource' | 'reason'>;
  readonly watchSynced: Gauge<'resource'>;
  readonly lastEvent: Gauge<'resource'>;
  readonly ruleUpdates: Counter<'result'>;
  readonly rulesRejected: Gauge;
  readonly autoExposed: Gauge;
  readonly reregistrations: Counter;
  readonly authDecisions: Counter<'result' | 'cached'>;

  constructor(registry: Registry) {
    this.watchErrors = counter(kubeMetricDeclarations.watchErrors, registry);
    this.watchRestarts = counter(kubeMetricDeclarations.watchRestarts, registry);
    this.watchSynced = gauge(kubeMetricDeclarations.watchSynced, registry);
    this.lastEvent = gauge(kubeMetricDeclarations.lastEvent, registry);
    this.ruleUpdates = counter(kubeMetricDeclarations.ruleUpdates, registry);
    this.rulesRejected = gauge(kubeMetricDeclarations.rulesRejected, registry);
    this.autoExposed = gauge(kubeMetricDeclarations.autoExposed, registry);
    this.reregistrations = counter(kubeMetricDeclarations.reregistrations, registry);
    this.authDecisions = counter(kubeMetricDeclarations.authDecisions, registry);
  }
}

/** The metrics, per registry: every user of the Kubernetes API shares them. */
const metricsByRegistry = new WeakMap<Registry, KubeMetrics>();
export function kubeMetrics(registry: Registry): KubeMetrics {
  let m = metricsByRegistry.get(registry);
  if (!m) {
    m = new KubeMetrics(registry);
    metricsByRegistry.set(registry, m);
  }
  return m;
}
