// Which Services --auto-expose exposes: those annotated "true", and every Service of a namespace the
// selector picks, except those annotated "false" (the opt-out wins). Pure: the watches feed it.
import type { ExposeRule } from '../rules/rule-file.js';

export interface ServiceInfo {
  namespace: string;
  name: string;
  annotations: Readonly<Record<string, string>>;
}

export interface AutoExposePolicy {
  annotation: string;
  /** Namespaces the label selector picks (empty without a selector). */
  namespaces: ReadonlySet<string>;
}

export function autoExposed(services: readonly ServiceInfo[], policy: AutoExposePolicy): ExposeRule[] {
  const rules: ExposeRule[] = [];
  for (const s of services) {
    const value = s.annotations[policy.annotation]?.trim().toLowerCase();
    if (value === 'false') continue;
    const why =
      value === 'true'
        ? `annotation ${policy.annotation}=true`
        : policy.namespaces.has(s.namespace)
          ? 'namespace selector'
          : undefined;
    if (why)
      rules.push({ source: `auto-expose ${s.namespace}/${s.name} (${why})`, namespace: s.namespace, service: s.name });
  }
  return rules.sort((a, b) => a.namespace.localeCompare(b.namespace) || a.service.localeCompare(b.service));
}
