// Reading rules: `--expose` values and the rules file (YAML or JSON; the next issue feeds a ConfigMap's
// text through the same parser). Each rule is checked on its own here; rule-set.ts checks them together.
import { parse as parseYaml } from 'yaml';
import { hostNameProblem, labelProblem, normalizeName } from './naming.js';
import { parseTarget, type Target } from './target.js';

/** `NAMESPACE/SERVICE`, or `NAMESPACE/*` for every Service of the namespace. */
export interface ExposeRule {
  /** Where the rule came from, for messages: `--expose=prod/web`, `rules.yaml: expose[2]`. */
  source: string;
  namespace: string;
  /** `*` for the whole namespace. */
  service: string;
}

/** A name that is not a Service, answered with fixed addresses or as a CNAME to an FQDN. */
export interface StaticRule {
  source: string;
  name: string;
  target: Target;
}

export interface RuleSpec {
  expose: ExposeRule[];
  static: StaticRule[];
}

export type Result<T> = { ok: true; value: T } | { ok: false; errors: string[] };

export function parseExpose(text: string, source: string): ExposeRule | string {
  const parts = text.trim().split('/');
  if (parts.length !== 2) return `${source}: want NAMESPACE/SERVICE or NAMESPACE/*, got "${text}"`;
  const [namespace, service] = parts as [string, string];
  const problem =
    labelProblem(namespace, 'namespace') ?? (service === '*' ? undefined : labelProblem(service, 'service', true));
  return problem ? `${source}: ${problem}` : { source, namespace, service };
}

/**
 * The rules file:
 *   expose: [prod/web, monitoring/*]
 *   static: [{ name: legacy-db.cluster1, target: 10.0.0.7 }, { name: search.cluster1, target: search.example.com }]
 * `origin` names the file in messages.
 */
export function parseRuleFile(input: string | unknown, origin: string): Result<RuleSpec> {
  let doc: unknown = input;
  if (typeof input === 'string') {
    try {
      doc = parseYaml(input); // YAML is a superset of JSON: one parser for both
    } catch (err) {
      return { ok: false, errors: [`${origin}: not valid YAML or JSON: ${(err as Error).message.split('\n')[0]}`] };
    }
  }
  if (doc === null || doc === undefined) return { ok: true, value: { expose: [], static: [] } };
  if (typeof doc !== 'object' || Array.isArray(doc))
    return { ok: false, errors: [`${origin}: want a mapping with "expose" and "static"`] };

  const errors: string[] = [];
  const spec: RuleSpec = { expose: [], static: [] };
  const { expose = [], static: statics = [], ...unknown } = doc as Record<string, unknown>;
  for (const key of Object.keys(unknown)) errors.push(`${origin}: unknown key "${key}" (want "expose" and "static")`);

  if (!Array.isArray(expose)) errors.push(`${origin}: "expose" must be a list of NAMESPACE/SERVICE`);
  else {
    expose.forEach((item, i) => {
      const source = `${origin}: expose[${i}]`;
      const rule =
        typeof item === 'string'
          ? parseExpose(item, `${source} (${item})`)
          : `${source}: want a NAMESPACE/SERVICE string`;
      if (typeof rule === 'string') errors.push(rule);
      else spec.expose.push(rule);
    });
  }

  if (!Array.isArray(statics)) errors.push(`${origin}: "static" must be a list of {name, target}`);
  else {
    statics.forEach((item, i) => {
      const { name, target, ...extra } = (item ?? {}) as Record<string, unknown>;
      const source = `${origin}: static[${i}]${typeof name === 'string' ? ` (${name})` : ''}`;
      if (typeof name !== 'string') {
        errors.push(`${source}: "name" must be a string`);
        return;
      }
      if (Object.keys(extra).length) {
        errors.push(`${source}: unknown key "${Object.keys(extra)[0]}" (want "name" and "target")`);
        return;
      }
      const normalized = normalizeName(name.trim());
      const problem = hostNameProblem(normalized, 'name');
      if (problem) {
        errors.push(`${source}: ${problem}`);
        return;
      }
      const parsed = parseTarget(target, source);
      if (typeof parsed === 'string') {
        errors.push(parsed);
        return;
      }
      spec.static.push({ source, name: normalized, target: parsed });
    });
  }
  return errors.length ? { ok: false, errors } : { ok: true, value: spec };
}
