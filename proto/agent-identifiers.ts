// Agent identifiers: the URL-query string the proxy-server's destHost/defaultRoute strategies route
// by (`host=cluster1&host=cluster1.ns&default-route=true`). Validation accepts exactly what the Go
// agent accepts (cmd/agent/app/options/options.go validateAgentIdentifiers: Go's url.ParseQuery,
// then known keys only), so any flag value cluster-proxy passes the Go binary works here too.
import { parseQueryString } from './url-query.js';

const identifierKeys = ['ipv4', 'ipv6', 'host', 'cidr', 'default-route'] as const;

/** Returns a message when `text` is not a valid identifier string, worded like the Go agent's. */
export function validateIdentifiers(text: string): string | undefined {
  let query: Map<string, string[]>;
  try {
    query = parseQueryString(text);
  } catch (err) {
    return `agent address is invalid: ${(err as Error).message}`;
  }
  for (const key of query.keys()) {
    if (!(identifierKeys as readonly string[]).includes(key))
      return `agent address is invalid: unknown address type: ${key}`;
  }
  return undefined;
}

/** The `host=` values of a valid identifier string, lower-cased, without a trailing dot, in order. */
export function identifierHosts(text: string): string[] {
  return (parseQueryString(text).get('host') ?? [])
    .map((h) => h.toLowerCase().replace(/\.$/, ''))
    .filter((h) => h !== '');
}

/** Merges identifier strings, dropping exact duplicates, keeping first-seen order. */
export function mergeIdentifiers(...parts: string[]): string {
  const seen = new Set<string>();
  const out = new URLSearchParams();
  for (const part of parts) {
    for (const [key, value] of new URLSearchParams(part)) {
      const k = `${key}=${value}`;
      if (seen.has(k)) continue;
      seen.add(k);
      out.append(key, value);
    }
  }
  return out.toString();
}
