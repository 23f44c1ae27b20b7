// --count-server-leases: how many proxy-servers there are, from the Leases they publish
// (--enable-lease-controller: konnectivity-proxy-server-<serverID>, renewed every 15 s, valid 30 s),
// as the Go agent counts them (ANP pkg/agent/lease_counter.go, pkg/util/leases.go). The Leases are
// watched, and counted again at each change and at the moment the next valid one would expire, so a
// new server is dialled and a gone one dropped without a periodic check. Unlike the Go agent, which
// blocks its start on the Lease cache (and never becomes ready without RBAC for it), the agent serves
// by the serverCount header until the Leases can be read, and picks them up once they can.
import type { Registry } from 'prom-client';
import { type Clock, systemClock } from '../clock/clock.js';
import type { Logger } from '../observability/log.js';
import { counter, histogram } from '../observability/metric.js';
import type { KubeApiClient } from './api-client.js';
import { kubeMetricDeclarations, kubeMetrics } from './metrics.js';
import { ResilientWatch } from './watch.js';

/** What the agent reads of a Lease (coordination.k8s.io/v1); the times as the API server sends them. */
export interface Lease {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  spec?: { renewTime?: string; acquireTime?: string; leaseDurationSeconds?: number };
}

/** When a Lease stops being valid (renewTime, else acquireTime, plus its duration), in ms; undefined: never valid. */
export function leaseExpiry(lease: Lease): number | undefined {
  const renewed = lease.spec?.renewTime ?? lease.spec?.acquireTime;
  const seconds = lease.spec?.leaseDurationSeconds;
  if (renewed === undefined || seconds === undefined) return undefined;
  return new Date(renewed).getTime() + seconds * 1000;
}

/**
 * The Go agent's count: Leases valid at `now`, at least 1 (no valid Lease: "assuming server count of
 * 1"); and when the earliest of them expires, to count again then.
 */
export function countLeases(leases: readonly Lease[], now: number): { count: number; nextExpiry?: number } {
  let count = 0;
  let nextExpiry: number | undefined;
  for (const lease of leases) {
    const expiry = leaseExpiry(lease);
    if (expiry === undefined || expiry <= now) continue;
    count++;
    nextExpiry = nextExpiry === undefined ? expiry : Math.min(nextExpiry, expiry);
  }
  return { count: Math.max(1, count), nextExpiry };
}

/** The Leases' label selector: --lease-label-selector when given, else --lease-label (its alias, as in ANP master). */
export function leaseSelector(o: { leaseLabelSelector: string; leaseLabel: string }): string {
  return (o.leaseLabelSelector !== '' ? o.leaseLabelSelector : o.leaseLabel).trim();
}

/** The Go agent's lease metrics, with its names and labels (declared in metrics.ts). */
function leaseMetrics(registry: Registry) {
  return {
    lists: counter(kubeMetricDeclarations.leaseLists, registry),
    watches: counter(kubeMetricDeclarations.leaseWatches, registry),
    listLatency: histogram(kubeMetricDeclarations.leaseListLatency, registry),
  };
}

export interface LeaseCounterOptions {
  client: KubeApiClient;
  /** --lease-namespace */
  namespace: string;
  /** --lease-label-selector (or --lease-label's pairs) */
  selector: string;
  /** The count, at least 1: after the first list, and whenever it changes. */
  onCount: (count: number) => void;
  log: Logger;
  registry: Registry;
  resyncMs: number;
  backoff?: { initialMs: number; capMs: number };
  /** What the recount and the watch wait on (default the system clock; tests pass a ManualClock). */
  clock?: Clock;
  /** The wall-clock time in ms that Leases' renewTimes are read against. */
  now?: () => number;
}

export class LeaseCounter {
  private readonly watch: ResilientWatch<Lease>;
  private leases: readonly Lease[] = [];
  /** Cancels the pending recount. */
  private cancelRecount = () => {};
  private last?: number;
  private readonly now: () => number;
  private readonly clock: Clock;

  constructor(private readonly opts: LeaseCounterOptions) {
    this.now = opts.now ?? Date.now;
    this.clock = opts.clock ?? systemClock;
    const metrics = leaseMetrics(opts.registry);
    const path = `/apis/coordination.k8s.io/v1/namespaces/${opts.namespace}/leases`;
    this.watch = new ResilientWatch<Lease>({
      client: opts.client,
      spec: {
        resource: 'leases',
        path,
        labelSelector: opts.selector,
        forbidden: `counting proxy-servers by the serverCount header meanwhile; --count-server-leases needs a Role in ${opts.namespace} granting get, list and watch on leases (apiGroup coordination.k8s.io), bound to the agent's service account (manifests/lease-counting); it is picked up within seconds of the binding, without a restart`,
      },
      onList: (leases) => {
        this.leases = leases;
        this.recount();
      },
      // Cut off from the API server, the agent cannot see renewals: it keeps the last count (as the
      // Go agent keeps its last good one) rather than let every Lease expire in its view.
      onError: () => this.cancelRecount(),
      observer: {
        list: (code, reason, seconds) => {
          metrics.lists.inc({ http_response_code: String(code), reason });
          metrics.listLatency.observe({ http_response_code: String(code) }, seconds);
        },
        watch: (code, reason) => metrics.watches.inc({ http_response_code: String(code), reason }),
      },
      log: opts.log,
      metrics: kubeMetrics(opts.registry),
      resyncMs: opts.resyncMs,
      backoff: opts.backoff,
      clock: this.clock,
    });
  }

  start(): void {
    this.opts.log.info(
      { namespace: this.opts.namespace, selector: this.opts.selector },
      'counting proxy-servers by their Leases',
    );
    this.watch.start();
  }

  stop(): void {
    this.cancelRecount();
    this.watch.stop();
  }

  /** Counts the Leases valid now, and again when the first of them would expire unrenewed. */
  private recount(): void {
    this.cancelRecount();
    const now = this.now();
    const { count, nextExpiry } = countLeases(this.leases, now);
    if (nextExpiry !== undefined) this.cancelRecount = this.clock.after(nextExpiry - now + 1, () => this.recount());
    if (count === this.last) return;
    if (this.last !== undefined || count > 1)
      this.opts.log.info({ count, leases: this.leases.length }, 'proxy-server Leases counted');
    this.last = count;
    this.opts.onCount(count);
  }
}
