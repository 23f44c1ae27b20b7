// Agent identifiers: the URL-query string the proxy-server's destHost/defaultRoute strategies route
// by (`host=cluster1&host=cluster1.ns&default-route=true`). Validation accepts exactly what the Go
// agent accepts (cmd/agent/app/options/options.go validateAgentIdentifiers: Go's url.ParseQuery,
// then known keys only), so any flag value cluster-proxy passes the Go binary works here too.

export const identifierKeys = ['ipv4', 'ipv6', 'host', 'cidr', 'default-route'] as const;

/** Returns a message when `text` is not a valid identifier string, worded like the Go agent's. */
export function validateIdentifiers(text: string): string | undefined {
  for (const pair of text.split('&')) {
    if (pair === '') continue;
    if (pair.includes(';')) return 'agent address is invalid: invalid semicolon separator in query';
    const bad = /%(?![0-9a-fA-F]{2})(.{0,2})/.exec(pair);
    if (bad) return `agent address is invalid: invalid URL escape "%${bad[1]}"`;
  }
  for (const key of new URLSearchParams(text).keys()) {
    if (!(identifierKeys as readonly string[]).includes(key)) return `agent address is invalid: unknown address type: ${key}`;
  }
  return undefined;
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
