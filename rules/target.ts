// What a rule's name stands for: fixed addresses, or another name (an FQDN) answered as a CNAME.
import { isIP } from 'node:net';
import { hostNameProblem, normalizeName } from './naming.js';

export type Target = { kind: 'fqdn'; fqdn: string } | { kind: 'ip'; v4: string[]; v6: string[] };

/** A target in one line: the FQDN, or the addresses comma-separated. */
export const targetText = (t: Target) => (t.kind === 'fqdn' ? t.fqdn : [...t.v4, ...t.v6].join(','));

/** An IP, a list of IPs, or one FQDN. */
export function parseTarget(raw: unknown, source: string): Target | string {
  const items = Array.isArray(raw) ? raw : [raw];
  if (items.length === 0 || !items.every((t): t is string => typeof t === 'string' && t.trim() !== '')) {
    return `${source}: target must be an IP address, a list of IP addresses, or a DNS name`;
  }
  const trimmed = items.map((t) => t.trim());
  if (trimmed.every((t) => isIP(t) !== 0)) {
    return { kind: 'ip', v4: trimmed.filter((t) => isIP(t) === 4), v6: trimmed.filter((t) => isIP(t) === 6) };
  }
  if (trimmed.length > 1) return `${source}: a target list may hold IP addresses only, got ${JSON.stringify(trimmed)}`;
  const fqdn = normalizeName(trimmed[0]!);
  const problem = hostNameProblem(fqdn, 'target');
  return problem ? `${source}: ${problem}` : { kind: 'fqdn', fqdn };
}
