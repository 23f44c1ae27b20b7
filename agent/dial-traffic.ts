// Per-rule traffic metrics: dials by result, bytes each way, open connections and dial latency,
// labelled by the rule a dial resolved through. Rules are finite (what the operator configured);
// every dial no rule served (IP literals, names the system resolves) is one label, "(none)". The
// counts are plain numbers per rule, added where the tunnel already counts (a connection holds its
// rule's counts), handed to prom-client when it is scraped.
import type { Histogram, Registry } from 'prom-client';
import { counter, gauge, histogram } from '../observability/metric.js';
import { type DialResult, dialResults } from './dial.js';
import { agentMetricDeclarations, noRule } from './metrics.js';

/** One rule's counts; a connection adds its bytes to its rule's as it relays them. */
export class RuleTraffic {
  toTarget = 0;
  fromTarget = 0;
  open = 0;
  readonly dials: Record<DialResult, number> = { connected: 0, denied: 0, error: 0, cancelled: 0 };
  constructor(readonly latency: Histogram.Internal<'rule'>) {}
}

export class DialTraffic {
  private readonly rules = new Map<string, RuleTraffic>();
  private readonly latency: Histogram<'rule'>;

  constructor(registry: Registry) {
    const rules = this.rules;
    counter(agentMetricDeclarations.ruleDials, registry, function () {
      this.reset();
      for (const [rule, t] of rules) for (const result of dialResults) this.inc({ rule, result }, t.dials[result]);
    });
    counter(agentMetricDeclarations.ruleBytes, registry, function () {
      this.reset();
      for (const [rule, t] of rules) {
        this.inc({ rule, direction: 'to_target' }, t.toTarget);
        this.inc({ rule, direction: 'from_target' }, t.fromTarget);
      }
    });
    gauge(agentMetricDeclarations.ruleOpenConnections, registry, function () {
      this.reset();
      for (const [rule, t] of rules) this.set({ rule }, t.open);
    });
    this.latency = histogram(agentMetricDeclarations.ruleDialDuration, registry);
  }

  /** The counts of `rule` (undefined: no rule). */
  of(rule: string | undefined): RuleTraffic {
    const label = rule ?? noRule;
    let t = this.rules.get(label);
    if (!t) {
      t = new RuleTraffic(this.latency.labels({ rule: label }));
      this.rules.set(label, t);
    }
    return t;
  }
}
