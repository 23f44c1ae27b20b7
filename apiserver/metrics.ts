// Every spoke_agent_api_* metric in one place.
import { Counter, type Registry } from 'prom-client';

export class ApiMetrics {
  readonly requests: Counter<'code' | 'authentication'>;

  constructor(registry: Registry) {
    this.requests = new Counter({
      name: 'spoke_agent_api_requests_total',
      help: 'Requests to the dns.spoke-agent.io API, by status code and how the caller was authenticated (front-proxy, x509, token, none).',
      labelNames: ['code', 'authentication'],
      registers: [registry],
    });
  }
}
