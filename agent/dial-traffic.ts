// Per-rule traffic metrics: dials by result, bytes each way, open connections and dial latency,
// labelled by the rule a dial resolved through. Rules are finite (what the operator configured);
// every dial no rule served (IP literals, names the system resolves) is one label, "(none)". The
// counts are plain numbers per rule, added where the tunnel already counts (a connection holds its
// rule's counts), handed to prom-client when it is scraped.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { type DialResult, dialResults } from './dial.js';

const noRule = '(none)';

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
    const registers = [registry];
    const rules = this.rules;
    new Counter({
      name: 'spoke_agent_rule_dials_total',
      help: `Dials the hub asked for, by the rule the destination resolved through ("${noRule}": IP literals and names no rule serves) and result (connected, denied by the dial policy, error, cancelled by DIAL_CLS).`,
      labelNames: ['rule', 'result'],
      registers,
      collect() {
        this.reset();
        for (const [rule, t] of rules) for (const result of dialResults) this.inc({ rule, result }, t.dials[result]);
      },
    });
    new Counter({
      name: 'spoke_agent_rule_bytes_total',
      help: 'Payload bytes carried, by rule and direction (to_target, from_target).',
      labelNames: ['rule', 'direction'],
      registers,
      collect() {
        this.reset();
        for (const [rule, t] of rules) {
          this.inc({ rule, direction: 'to_target' }, t.toTarget);
          this.inc({ rule, direction: 'from_target' }, t.fromTarget);
        }
      },
    });
    new Gauge({
      name: 'spoke_agent_rule_open_connections',
      help: 'Tunnelled connections open, by rule.',
      labelNames: ['rule'],
      registers,
      collect() {
        this.reset();
        for (const [rule, t] of rules) this.set({ rule }, t.open);
      },
    });
    this.latency = new Histogram({
      name: 'spoke_agent_rule_dial_duration_seconds',
      help: 'How long dials that connected took (resolve, authorize, connect), by rule.',
      labelNames: ['rule'],
      buckets: [0.001, 0.005, 0.025, 0.1, 0.5, 2.5, 10],
      registers,
    });
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
