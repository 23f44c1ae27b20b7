// Every spoke_agent_kube_* metric in one place.
import { Counter, Gauge, type Registry } from 'prom-client';

export type Resource = 'configmap' | 'services' | 'namespaces' | 'authentication-configmap' | 'leases';

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
    const registers = [registry];
    this.watchErrors = new Counter({
      name: 'spoke_agent_kube_watch_errors_total',
      help: 'List or watch failures against the API server, by resource; each restarts the watch with backoff.',
      labelNames: ['resource'],
      registers,
    });
    this.watchRestarts = new Counter({
      name: 'spoke_agent_kube_watch_restarts_total',
      help: 'Watches started over with a fresh list, by resource and reason (error; resync: the periodic watchdog relist; expired: the server had compacted the version watched from, 410 Gone).',
      labelNames: ['resource', 'reason'],
      registers,
    });
    this.watchSynced = new Gauge({
      name: 'spoke_agent_kube_watch_synced',
      help: '1 when the watch of the resource has listed and is watching, 0 while it is failing (the last known objects stay in force).',
      labelNames: ['resource'],
      registers,
    });
    this.lastEvent = new Gauge({
      name: 'spoke_agent_kube_last_event_timestamp_seconds',
      help: 'When the watch of the resource last listed or received an event (Unix seconds).',
      labelNames: ['resource'],
      registers,
    });
    this.ruleUpdates = new Counter({
      name: 'spoke_agent_kube_rule_updates_total',
      help: 'Rule recomputations after a ConfigMap or Service change, by result (applied, unchanged, rejected: the last good rules stay).',
      labelNames: ['result'],
      registers,
    });
    this.rulesRejected = new Gauge({
      name: 'spoke_agent_kube_rules_rejected',
      help: '1 while the latest rules from the Kubernetes API are rejected (the ConfigMap as it is now, or the sources together, do not make valid rules) and the last good rules stay in force; 0 once they apply.',
      registers,
    });
    this.autoExposed = new Gauge({
      name: 'spoke_agent_kube_auto_exposed_services',
      help: 'Services exposed by --auto-expose.',
      registers,
    });
    this.reregistrations = new Counter({
      name: 'spoke_agent_kube_reregistrations_total',
      help: 'Times the agent re-registered with new identifiers after the served names changed.',
      registers,
    });
    this.authDecisions = new Counter({
      name: 'spoke_agent_kube_auth_decisions_total',
      help: 'Delegated authentication and authorization of /debug and /metrics requests, by result (allowed, unauthenticated, forbidden, error) and whether the decision came from the cache.',
      labelNames: ['result', 'cached'],
      registers,
    });
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
