// The rules in force are one RuleSet built from every source: --expose, --rules-file, the ConfigMap and
// the auto-exposed Services. Any source's problem rejects the whole result (the caller keeps the last
// good set). Pure: the sources arrive as text and lists.
import type { V1ConfigMap } from '@kubernetes/client-node';
import type { NamingContext } from '../rules/naming.js';
import { parseExpose, parseRuleFile, type ExposeRule, type Result, type RuleSpec } from '../rules/rule-file.js';
import { compileRules, type RuleSet, type ServiceRef } from '../rules/rule-set.js';

export interface RuleText {
  /** Names the source in messages: `--rules-file=/etc/rules.yaml`, `configmap ns/name rules.yaml`. */
  origin: string;
  content: string;
}

export interface RuleSources {
  naming: NamingContext;
  expose: readonly string[];
  files: readonly RuleText[];
  autoExposed: readonly ExposeRule[];
  /** Known Services, which expand NAMESPACE/* rules into exact names (and identifiers). */
  services: readonly ServiceRef[];
}

const configMapKeys = ['rules.yaml', 'rules.json'] as const;

/** The rules text of the ConfigMap, undefined when it does not exist, or a message when it has no usable key. */
export function configMapRules(ref: string, cm: V1ConfigMap | undefined): RuleText | undefined | string {
  if (!cm) return undefined;
  const present = configMapKeys.filter((k) => cm.data?.[k] !== undefined);
  if (present.length === 0)
    return `configmap ${ref}: no "${configMapKeys.join('" or "')}" key (has: ${Object.keys(cm.data ?? {}).join(', ') || 'none'})`;
  if (present.length > 1) return `configmap ${ref}: has both "${present.join('" and "')}": keep one`;
  return { origin: `configmap ${ref} ${present[0]}`, content: cm.data![present[0]!]! };
}

/**
 * The rules, or every problem. An auto-exposed Service that collides with an explicit rule is left
 * out (listed in `skipped`) rather than failing everything: explicit rules win.
 */
export function composeRules(s: RuleSources): Result<RuleSet> & { skipped?: string[] } {
  const result = compose(s);
  if (result.ok || s.autoExposed.length === 0) return result;
  const culprits = s.autoExposed.filter((r) => result.errors.some((e) => e.includes(r.source)));
  if (culprits.length === 0 || !result.errors.every((e) => culprits.some((r) => e.includes(r.source)))) return result;
  const retry = compose({ ...s, autoExposed: s.autoExposed.filter((r) => !culprits.includes(r)) });
  return retry.ok ? { ...retry, skipped: result.errors } : result;
}

function compose(s: RuleSources): Result<RuleSet> {
  const errors: string[] = [];
  const spec: RuleSpec = { expose: [], static: [] };
  for (const value of s.expose) {
    const rule = parseExpose(value, `--expose=${value}`);
    if (typeof rule === 'string') errors.push(rule);
    else spec.expose.push(rule);
  }
  for (const file of s.files) {
    const parsed = parseRuleFile(file.content, file.origin);
    if (!parsed.ok) errors.push(...parsed.errors);
    else {
      spec.expose.push(...parsed.value.expose);
      spec.static.push(...parsed.value.static);
    }
  }
  spec.expose.push(...s.autoExposed);
  if (errors.length) return { ok: false, errors };
  return compileRules(s.naming, spec, s.services);
}

/** Whether two rule sets serve the same names the same way (a relist must not churn listeners). */
export function sameRules(a: RuleSet, b: RuleSet): boolean {
  return JSON.stringify(a) === JSON.stringify(b) && a.hosts().join(',') === b.hosts().join(',');
}
