// The agent's identifiers, which the hub's destHost strategy matches against the host of each dial:
// one `host=` per name the rules serve, merged with --agent-identifiers, in the Go agent's URL-query form.
import type { RuleSet } from './rule-set.js';

/**
 * `extra` is --agent-identifiers (`host=a&ipv4=10.0.0.1&...`); its entries come first and repeats are
 * dropped. Encoding follows Go's url.Values (form encoding), e.g. `host=cluster1&host=cluster1.ns`.
 */
export function agentIdentifiers(rules: RuleSet, extra = ''): string {
  const params = new URLSearchParams(extra);
  const seen = new Set(params.getAll('host'));
  for (const host of rules.hosts()) {
    if (!seen.has(host)) params.append('host', host), seen.add(host);
  }
  return params.toString();
}
