// The rules ruleFlags (rules/options.ts) describe. Apart from the flags: it loads the rule parser
// (and yaml), which an agent without --cluster-name never needs.
import { readFileSync } from 'node:fs';
import { type NamingContext, normalizeName } from './naming.js';
import { goIpString } from './node.js';
import type { RuleFlagValues } from './options.js';
import type { Result } from './rule-file.js';
import { parseRules, type RuleSet, type ServiceRef } from './rule-set.js';

/** The rules the flags describe (reading --rules-file), or every problem found, each naming its rule. */
export function rulesFromFlags(
  values: RuleFlagValues,
  services?: readonly ServiceRef[],
  readFile: (path: string) => string = (p) => readFileSync(p, 'utf8'),
): Result<RuleSet> {
  let file: { origin: string; content: string } | undefined;
  if (values.rulesFile !== '') {
    try {
      file = { origin: values.rulesFile, content: readFile(values.rulesFile) };
    } catch (err) {
      return { ok: false, errors: [`--rules-file=${values.rulesFile}: ${(err as Error).message}`] };
    }
  }
  return parseRules({
    naming: namingFromFlags(values),
    expose: values.expose,
    file,
    services,
  });
}

/** What the served names are built from: the cluster's identity and, for a per-node agent, its node. */
export function namingFromFlags(values: RuleFlagValues): NamingContext {
  return {
    cluster: values.clusterName,
    agentNamespace: values.agentNamespace,
    clusterDomain: normalizeName(values.clusterDomain),
    ...(values.nodeName !== '' && {
      node: { name: normalizeName(values.nodeName), ips: values.nodeIps.map(goIpString) },
    }),
  };
}
