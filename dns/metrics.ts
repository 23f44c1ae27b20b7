// Every DNS metric, in one place. Label children are bound once: the query path only increments.
import type { Counter, Histogram, Registry } from 'prom-client';
import { counter, gauge, histogram, type MetricDeclarations } from '../observability/metric.js';
import { RCODE_NAME, TYPE_NAME } from './wire.js';

export type Proto = 'udp' | 'tcp';
/** Where an answer came from. */
export type Source = 'rule' | 'zone' | 'forward' | 'error';
export type CacheName = 'answers' | 'upstream';

// Query types get their own label value only when well known, to bound the series count.
const typeLabel = (code: number) => TYPE_NAME[code] ?? 'other';

/** Every DNS metric, declared; DnsMetrics builds them. */
export const dnsMetricDeclarations = {
  requestsTotal: {
    type: 'counter',
    name: 'spoke_agent_dns_requests_total',
    help: 'DNS queries received, by transport and query type.',
    labelNames: ['proto', 'type'],
  },
  responsesTotal: {
    type: 'counter',
    name: 'spoke_agent_dns_responses_total',
    help: 'DNS responses sent, by rcode and by what answered: rule, zone (NXDOMAIN in the cluster zone), forward, error.',
    labelNames: ['rcode', 'source'],
  },
  hits: {
    type: 'counter',
    name: 'spoke_agent_dns_cache_hits_total',
    help: 'Answers served from a cache: answers (our own, per rule) or upstream.',
    labelNames: ['cache'],
  },
  misses: {
    type: 'counter',
    name: 'spoke_agent_dns_cache_misses_total',
    help: 'Lookups a cache could not answer.',
    labelNames: ['cache'],
  },
  dnsCacheEntries: {
    type: 'gauge',
    name: 'spoke_agent_dns_cache_entries',
    help: 'Responses held in each cache.',
    labelNames: ['cache'],
  },
  upstreamDuration: {
    type: 'histogram',
    name: 'spoke_agent_dns_upstream_duration_seconds',
    help: 'Time the upstream took to answer, by transport.',
    labelNames: ['proto'],
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  },
  upstreamErrors: {
    type: 'counter',
    name: 'spoke_agent_dns_upstream_errors_total',
    help: "Upstream queries that failed, by reason: timeout, network, mismatch (wrong or malformed answer), rcode (SERVFAIL or REFUSED for a rule's target).",
    labelNames: ['reason'],
  },
  dropped: {
    type: 'counter',
    name: 'spoke_agent_dns_dropped_total',
    help: 'Packets dropped without an answer: too short to carry an ID, or not a query.',
  },
  udpDropped: {
    type: 'counter',
    name: 'spoke_agent_dns_udp_dropped_total',
    help: 'UDP queries dropped instead of answered, by reason: truncated (larger than the 4096 bytes batched UDP reads), failed (handling it threw; logged), unsent (the socket would not take the answer: full, or a send error).',
    labelNames: ['reason'],
  },
  queryLogSkipped: {
    type: 'counter',
    name: 'spoke_agent_dns_query_log_skipped_total',
    help: "Query log entries a watcher did not get, by reason: overwritten (more queries arrived between two batches than the log holds), slow (the watcher's connection was not taking them).",
    labelNames: ['reason'],
  },
  dnsQueryLogWatchers: {
    type: 'gauge',
    name: 'spoke_agent_dns_query_log_watchers',
    help: 'Open watches of the query log (kubectl get --watch, /debug/queries?watch=true).',
  },
} as const satisfies MetricDeclarations;

export class DnsMetrics {
  private readonly requestChildren: Record<Proto, Map<number, Counter.Internal>> = { udp: new Map(), tcp: new Map() };
  private readonly responseChildren: Record<Source, Map<number, Counter.Internal>> = {
    rule: new Map(),
    zone: new Map(),
    forward: new Map(),
    error: new Map(),
  };
  readonly cacheHits: Record<CacheName, Counter.Internal>;
  readonly cacheMisses: Record<CacheName, Counter.Internal>;
  private readonly requestsTotal: Counter;
  private readonly responsesTotal: Counter;
  private readonly upstreamDuration: Histogram;
  private readonly upstreamErrors: Counter;
  readonly dropped: Counter;
  readonly udpDropped: Counter<'reason'>;
  readonly queryLogSkipped: Counter<'reason'>;

  constructor(
    registry: Registry,
    cacheSizes: () => Record<CacheName, number>,
    queryLogWatchers: () => number = () => 0,
  ) {
    this.requestsTotal = counter(dnsMetricDeclarations.requestsTotal, registry);
    this.responsesTotal = counter(dnsMetricDeclarations.responsesTotal, registry);
    const hits = counter(dnsMetricDeclarations.hits, registry);
    const misses = counter(dnsMetricDeclarations.misses, registry);
    this.cacheHits = { answers: hits.labels('answers'), upstream: hits.labels('upstream') };
    this.cacheMisses = { answers: misses.labels('answers'), upstream: misses.labels('upstream') };
    gauge(dnsMetricDeclarations.dnsCacheEntries, registry, function () {
      for (const [cache, n] of Object.entries(cacheSizes())) this.set({ cache }, n);
    });
    this.upstreamDuration = histogram(dnsMetricDeclarations.upstreamDuration, registry);
    this.upstreamErrors = counter(dnsMetricDeclarations.upstreamErrors, registry);
    this.dropped = counter(dnsMetricDeclarations.dropped, registry);
    this.udpDropped = counter(dnsMetricDeclarations.udpDropped, registry);
    this.queryLogSkipped = counter(dnsMetricDeclarations.queryLogSkipped, registry);
    gauge(dnsMetricDeclarations.dnsQueryLogWatchers, registry, function () {
      this.set(queryLogWatchers());
    });
  }

  request(proto: Proto, qtype: number): void {
    const children = this.requestChildren[proto];
    let child = children.get(qtype);
    if (!child) {
      child = this.requestsTotal.labels(proto, typeLabel(qtype));
      children.set(qtype, child);
    }
    child.inc();
  }

  response(rcode: number, source: Source): void {
    const children = this.responseChildren[source];
    let child = children.get(rcode);
    if (!child) {
      child = this.responsesTotal.labels(RCODE_NAME[rcode] ?? String(rcode), source);
      children.set(rcode, child);
    }
    child.inc();
  }

  upstream(proto: Proto, seconds: number): void {
    this.upstreamDuration.labels(proto).observe(seconds);
  }

  upstreamError(reason: string): void {
    this.upstreamErrors.labels(reason).inc();
  }
}
