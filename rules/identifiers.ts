// The agent's identifiers, which the hub's destHost strategy matches against the host of each dial:
// one `host=` per name the rules serve, in the Go agent's URL-query form (`host=a&host=b`). The agent
// merges them with --agent-identifiers (proto/agent-identifiers.ts mergeIdentifiers).
import type { RuleSet } from './rule-set.js';

export function ruleIdentifiers(rules: RuleSet): string {
  const params = new URLSearchParams();
  for (const host of rules.hosts()) params.append('host', host);
  return params.toString();
}
