// Every spoke_agent_api_* metric in one place.
import type { Counter, Registry } from 'prom-client';
import { counter, type MetricDeclarations } from '../observability/metric.js';

/** Every API metric, declared; ApiMetrics builds them. */
export const apiMetricDeclarations = {
  requests: {
    type: 'counter',
    name: 'spoke_agent_api_requests_total',
    help: 'Requests to the dns.spoke-agent.io API, by status code and how the caller was authenticated (front-proxy, x509, token, none).',
    labelNames: ['code', 'authentication'],
  },
} as const satisfies MetricDeclarations;

export class ApiMetrics {
  readonly requests: Counter<'code' | 'authentication'>;

  constructor(registry: Registry) {
    this.requests = counter(apiMetricDeclarations.requests, registry);
  }
}
