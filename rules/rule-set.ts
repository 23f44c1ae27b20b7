// A validated, immutable set of rules and its matcher. Every served name is precomputed into one map,
// so matching a query is a hash lookup; only whole-namespace rules (`NAMESPACE/*`) match by shape.
import {
  clusterHosts,
  hashedServiceHost,
  hostNameProblem,
  kubernetesApiFqdn,
  labelProblem,
  type NamingContext,
  serviceFqdn,
  serviceHost,
} from './naming.js';
import { nodeHost, nodeZone } from './node.js';
import { parseExpose, parseRuleFile, type Result, type RuleSpec } from './rule-file.js';
import type { Target } from './target.js';

export type RuleKind = 'cluster' | 'node' | 'service' | 'namespace' | 'static';

export interface Rule {
  source: string;
  kind: RuleKind;
  /** The exact names the rule serves, lower-case. */
  names: string[];
  /** `*.<ns>.<cluster>` for a whole-namespace rule: any Service name in that position matches. */
  wildcard?: string;
  /** For a whole-namespace rule, `*.<ns>.svc.<cluster-domain>`: the `*` is the queried Service. */
  target: Target;
}

export interface Match {
  rule: Rule;
  target: Target;
}

/** What a name is to the rules (`RuleSet.classify`). */
export type NameClass =
  | { kind: 'rule'; match: Match }
  | { kind: 'other-node'; node: string }
  | { kind: 'zone' }
  | { kind: 'outside' };

const inZone: NameClass = { kind: 'zone' };
const outside: NameClass = { kind: 'outside' };

/** A Service known to exist (from the Kubernetes API, next issue): expands `NAMESPACE/*` into exact names. */
export interface ServiceRef {
  namespace: string;
  name: string;
}

export class RuleSet {
  private readonly zoneSuffix: string;
  private readonly nodeSuffix: string;

  constructor(
    readonly naming: NamingContext,
    readonly rules: readonly Rule[],
    private readonly exact: ReadonlyMap<string, Match>,
    private readonly namespaces: ReadonlyMap<string, Rule>,
  ) {
    this.zoneSuffix = `.${naming.cluster}`;
    this.nodeSuffix = `.${nodeZone(naming.cluster)}`;
  }

  /** `name` must be normalized (lower-case, no trailing dot). */
  match(name: string): Match | undefined {
    const hit = this.exact.get(name);
    if (hit !== undefined || this.namespaces.size === 0 || !name.endsWith(this.zoneSuffix)) return hit;
    const rest = name.slice(0, -this.zoneSuffix.length);
    const dot = rest.indexOf('.');
    if (dot <= 0 || rest.indexOf('.', dot + 1) !== -1) return undefined;
    const service = rest.slice(0, dot);
    const namespace = rest.slice(dot + 1);
    const rule = this.namespaces.get(namespace);
    if (!rule || labelProblem(service, '', true)) return undefined;
    return { rule, target: { kind: 'fqdn', fqdn: serviceFqdn(this.naming, namespace, service) } };
  }

  /** The cluster's zone (`<cluster>` and below): a name here that no rule matches does not exist. */
  inZone(name: string): boolean {
    return name === this.naming.cluster || name.endsWith(this.zoneSuffix);
  }

  /**
   * What `name` (normalized) is to these rules, decided here once for the DNS server and the dial
   * policy: a rule serves it; else it is another node's (`<node>.node.<cluster>`: only the agent on
   * that node answers and dials it); else it is in the cluster's zone, where it does not exist; else
   * it is outside, for the upstream or the system resolver.
   */
  classify(name: string): NameClass {
    const match = this.match(name);
    if (match !== undefined) return { kind: 'rule', match };
    if (name.endsWith(this.nodeSuffix) && name.length > this.nodeSuffix.length)
      return { kind: 'other-node', node: name.slice(0, -this.nodeSuffix.length) };
    return this.inZone(name) ? inZone : outside;
  }

  /** Every exact name served, in rule order: the agent's `host=` identifiers. */
  hosts(): string[] {
    return [...this.exact.keys()];
  }

  toJSON() {
    return { naming: this.naming, rules: this.rules };
  }
}

const sameTarget = (a: Target, b: Target) => JSON.stringify(a) === JSON.stringify(b);

/**
 * Validates the rules together and builds the matcher. Errors name the rule; a name served twice with
 * different targets is a collision, with the same target a harmless repeat.
 */
export function compileRules(
  naming: NamingContext,
  spec: RuleSpec,
  services: readonly ServiceRef[] = [],
): Result<RuleSet> {
  const errors: string[] = [];
  const contextProblem =
    labelProblem(naming.cluster, 'cluster name') ??
    (naming.agentNamespace === '' ? undefined : labelProblem(naming.agentNamespace, 'agent namespace')) ??
    hostNameProblem(naming.clusterDomain, 'cluster domain') ??
    (naming.clusterDomain === naming.cluster || naming.clusterDomain.endsWith(`.${naming.cluster}`)
      ? `cluster name "${naming.cluster}" would make the cluster domain "${naming.clusterDomain}" part of its zone`
      : undefined) ??
    nodeProblem(naming);
  if (contextProblem) return { ok: false, errors: [contextProblem] };

  const rules: Rule[] = [];
  const exact = new Map<string, Match>();
  const namespaces = new Map<string, Rule>();
  const wildcardMatch = (name: string): Match | undefined => {
    const labels = name.split('.');
    const rule = labels.length === 3 && labels[2] === naming.cluster ? namespaces.get(labels[1]!) : undefined;
    return rule && { rule, target: { kind: 'fqdn', fqdn: serviceFqdn(naming, labels[1]!, labels[0]!) } };
  };

  const add = (rule: Rule) => {
    const fresh = rule.names.filter((name) => {
      const problem = hostNameProblem(name, 'name');
      if (problem) {
        errors.push(`${rule.source}: ${problem}`);
        return false;
      }
      const existing = exact.get(name) ?? (rule.kind === 'static' ? wildcardMatch(name) : undefined);
      if (!existing) return true;
      if (!sameTarget(existing.target, rule.target))
        errors.push(`${rule.source}: "${name}" collides with ${existing.rule.source}`);
      return false;
    });
    if (rule.target.kind === 'fqdn' && !rule.wildcard) {
      const problem = hostNameProblem(rule.target.fqdn, 'target');
      if (problem) return errors.push(`${rule.source}: ${problem}`);
    }
    if (fresh.length === 0 && !rule.wildcard) return;
    const kept = { ...rule, names: fresh };
    rules.push(kept);
    for (const name of fresh) exact.set(name, { rule: kept, target: kept.target });
  };

  add({
    source: '--cluster-name',
    kind: 'cluster',
    names: clusterHosts(naming),
    target: { kind: 'fqdn', fqdn: kubernetesApiFqdn(naming) },
  });

  const { node } = naming;
  if (node) {
    const v4 = node.ips.filter((ip) => !ip.includes(':'));
    const v6 = node.ips.filter((ip) => ip.includes(':'));
    add({
      source: '--node-name',
      kind: 'node',
      names: [nodeHost(naming.cluster, node.name)],
      target: { kind: 'ip', v4, v6 },
    });
  }

  // Whole namespaces first, so an exact rule or a Service inside one is recognized as a repeat.
  for (const e of spec.expose.filter((r) => r.service === '*')) {
    if (namespaces.has(e.namespace)) continue;
    const rule: Rule = {
      source: e.source,
      kind: 'namespace',
      names: [],
      wildcard: `*.${e.namespace}.${naming.cluster}`,
      target: { kind: 'fqdn', fqdn: `*.${e.namespace}.svc.${naming.clusterDomain}` },
    };
    namespaces.set(e.namespace, rule);
    add(rule);
    // Each known Service of the namespace gets exact names (and so identifiers and a hashed name) like an exact rule.
    for (const s of services.filter((s) => s.namespace === e.namespace))
      add(exposeRule(naming, s.namespace, s.name, e.source));
  }
  for (const e of spec.expose.filter((r) => r.service !== '*'))
    add(exposeRule(naming, e.namespace, e.service, e.source));
  for (const s of spec.static) add({ source: s.source, kind: 'static', names: [s.name], target: s.target });

  return errors.length ? { ok: false, errors } : { ok: true, value: new RuleSet(naming, rules, exact, namespaces) };
}

function nodeProblem({ node }: NamingContext): string | undefined {
  if (!node) return undefined;
  if (node.ips.length === 0)
    return `--node-name=${node.name} needs --node-ips: the node's addresses its name resolves to`;
  return hostNameProblem(node.name, 'node name');
}

function exposeRule(naming: NamingContext, namespace: string, service: string, source: string): Rule {
  return {
    source,
    kind: 'service',
    names: [serviceHost(naming, namespace, service), hashedServiceHost(naming.cluster, namespace, service)],
    target: { kind: 'fqdn', fqdn: serviceFqdn(naming, namespace, service) },
  };
}

export interface RuleInputs {
  naming: NamingContext;
  /** `--expose` values, each `NAMESPACE/SERVICE` or `NAMESPACE/*`. */
  expose?: readonly string[];
  /** The rules file's text or parsed document, and its name for messages. */
  file?: { origin: string; content: string | unknown };
  services?: readonly ServiceRef[];
}

/** Flags plus rules file to a RuleSet, or every problem found, each naming its rule. */
export function parseRules(inputs: RuleInputs): Result<RuleSet> {
  const errors: string[] = [];
  const spec: RuleSpec = { expose: [], static: [] };
  for (const value of inputs.expose ?? []) {
    const rule = parseExpose(value, `--expose=${value}`);
    if (typeof rule === 'string') errors.push(rule);
    else spec.expose.push(rule);
  }
  if (inputs.file) {
    const parsed = parseRuleFile(inputs.file.content, inputs.file.origin);
    if (!parsed.ok) errors.push(...parsed.errors);
    else {
      spec.expose.push(...parsed.value.expose);
      spec.static.push(...parsed.value.static);
    }
  }
  if (errors.length) return { ok: false, errors };
  return compileRules(inputs.naming, spec, inputs.services);
}
