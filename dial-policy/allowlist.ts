// The dial allowlist: with rules, the agent dials only what its rules resolve to, plus --allowed-cidrs,
// so a hub cannot use it to reach the cloud metadata service or a node's SSH port. The decision is made
// on the resolved address, before any connection attempt (agent/dialer.ts calls `authorize` for every
// candidate first); another node's name is denied by name. The only I/O is the resolver passed in.
import { isIP } from 'node:net';
import type { Counter, Registry } from 'prom-client';
import { counter, type MetricDeclarations } from '../observability/metric.js';
import { type Cidr, cidrContains } from '../net/cidr.js';
import { canonicalIp } from '../net/ip.js';
import { normalizeName } from '../rules/naming.js';
import type { RuleSet } from '../rules/rule-set.js';
import type { DialAuthorizer, HostResolver } from './contract.js';
import type { NodeLocalPorts } from './node-local.js';

/** The dial policy's one metric, declared here, where it is counted. */
export const dialPolicyMetricDeclarations = {
  denied: {
    type: 'counter',
    name: 'spoke_agent_dials_denied_total',
    help: "Dials denied before any connection attempt, by reason: no rule resolves to the address and --allowed-cidrs does not cover it (no_rule, not_a_rule_address), a port of this node's addresses that --kubelet-port and --node-local-ports do not list (node_port), another node's <node>.node.<cluster> name (other_node).",
    labelNames: ['reason'],
  },
} as const satisfies MetricDeclarations;

export type DenyReason = 'no_rule' | 'not_a_rule_address' | 'node_port' | 'other_node';

export interface DialAllowlistOptions {
  /** How a dial's host resolves through the rules: resolve.ts over the DNS server's resolver, or a stand-in in tests. */
  resolveForDial: HostResolver;
  cidrs: readonly Cidr[];
  /**
   * The `host=` names of --agent-identifiers: the hub was told this agent serves them (cluster-proxy's
   * service-proxy host, which the pod's /etc/hosts maps to its sidecar), so a dial by one of these
   * names is allowed to whatever it resolves to (the system resolver, for a name no rule serves).
   */
  identifierHosts?: readonly string[];
  /** A per-node agent's node (node-local.ts): its addresses are dialled on its ports only. */
  node?: NodeLocalPorts;
  registry: Registry;
}

/**
 * Holds what rules resolve to: per name, the addresses of its latest resolution, and the union of
 * all of them (what an IP-literal dial may reach). `resolve` and `authorize` go to the Agent.
 */
export class DialAllowlist {
  private readonly cidrs: readonly Cidr[];
  private readonly identifierHosts: ReadonlySet<string>;
  private byName = new Map<string, Set<string>>();
  private ruleAddresses = new Set<string>();
  private readonly denied: Counter<'reason'>;
  /** Refreshes started; see refresh. */
  private refreshes = 0;

  constructor(private readonly opts: DialAllowlistOptions) {
    this.cidrs = opts.cidrs;
    this.identifierHosts = new Set((opts.identifierHosts ?? []).map(normalizeName));
    this.denied = counter(dialPolicyMetricDeclarations.denied, opts.registry);
  }

  /** Resolves through the rules and remembers the answer, so `authorize` can check the address against it. */
  readonly resolve: HostResolver = async (host) => {
    const name = normalizeName(host);
    const answer = await this.opts.resolveForDial(name);
    if ('denied' in answer) return { denied: this.deny('other_node', answer.denied) };
    if (answer.route) this.remember(name, answer.addresses);
    return answer;
  };

  readonly authorize: DialAuthorizer = (host, address, port) => {
    const { node } = this.opts;
    if (node?.owns(address)) {
      const denial = node.portDenial(address, port);
      return denial && this.deny('node_port', denial);
    }
    if (this.cidrs.some((c) => cidrContains(c, address))) return undefined;
    const name = normalizeName(host);
    let reason: DenyReason | undefined;
    let message = '';
    if (isIP(host) === 0 && this.identifierHosts.has(name)) return undefined;
    if (isIP(host) !== 0) {
      if (!this.ruleAddresses.has(canonicalIp(address))) {
        reason = 'not_a_rule_address';
        message = node
          ? `not allowed: ${address} is ${node.notMine}, not an address any rule resolves to, nor inside --allowed-cidrs`
          : `not allowed: ${address} is not an address any rule resolves to, nor inside --allowed-cidrs`;
      }
    } else if (!this.byName.get(name)?.has(canonicalIp(address))) {
      reason = 'no_rule';
      message = this.byName.has(name)
        ? `not allowed: ${address} is not what the rule for "${name}" resolves to, nor inside --allowed-cidrs`
        : `not allowed: no rule serves "${name}" and ${address} is not inside --allowed-cidrs`;
    }
    return reason && this.deny(reason, message);
  };

  private deny(reason: DenyReason, message: string): string {
    this.denied.inc({ reason });
    return message;
  }

  /**
   * After the rules change: forget names no longer served and resolve one name per rule target, so
   * that an IP-literal dial to a rule's address is known before any named dial happened.
   * Whole-namespace rules are learned as their Services get dialled by name.
   */
  async refresh(rules: RuleSet, concurrency = 16): Promise<void> {
    // Rules changes come faster than their names resolve: only the newest refresh may apply its result,
    // or an older, slower one finishing last would bring back the addresses of rules since replaced.
    const generation = ++this.refreshes;
    const names = rules.rules.filter((r) => r.names.length > 0).map((r) => r.names[0]!);
    const byName = new Map<string, Set<string>>();
    let next = 0;
    const worker = async () => {
      while (next < names.length) {
        const name = names[next++]!;
        try {
          const answer = await this.opts.resolveForDial(name);
          if ('route' in answer) byName.set(name, new Set(answer.addresses.map(canonicalIp)));
        } catch {
          // Unresolvable now (e.g. a Service without a ClusterIP yet): learned on its first dial.
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, names.length) }, worker));
    if (generation !== this.refreshes) return;
    for (const [name, addrs] of this.byName) if (!byName.has(name) && rules.match(name)) byName.set(name, addrs);
    this.byName = byName;
    this.ruleAddresses = new Set([...byName.values()].flatMap((s) => [...s]));
  }

  private remember(name: string, addresses: string[]): void {
    const set = new Set(addresses.map(canonicalIp));
    this.byName.set(name, set);
    for (const a of set) this.ruleAddresses.add(a);
  }
}
