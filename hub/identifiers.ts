// The agentIdentifiers header and dial addresses, read the way the Go proxy-server reads them
// (ANP proto/header/header.go GenAgentIdentifiers, pkg/util/net.go RemovePortFromHost).

export interface Identifiers {
  ipv4: string[];
  ipv6: string[];
  host: string[];
  /** Parsed but unused by every strategy, as in the Go server. */
  cidr: string[];
  defaultRoute: boolean;
}

export const noIdentifiers = (): Identifiers => ({ ipv4: [], ipv6: [], host: [], cidr: [], defaultRoute: false });

/** strconv.ParseBool */
function parseGoBool(text: string): boolean | undefined {
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(text)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(text)) return false;
  return undefined;
}

/** url.QueryUnescape: `+` is a space, and a bad escape is an error (URLSearchParams would let it pass). */
function queryUnescape(text: string): string {
  const bad = /%(?![0-9A-Fa-f]{2})(.{0,2})/s.exec(text);
  if (bad) throw new Error(`invalid URL escape "%${bad[1]}"`);
  const bytes = Buffer.from(text.replace(/\+/g, ' ').replace(/%([0-9A-Fa-f]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))), 'latin1');
  return bytes.toString('utf8');
}

/** url.ParseQuery: repeated keys accumulate in order; a `;` is an error since Go 1.17. */
function parseQuery(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const part of text.split('&')) {
    if (part === '') continue;
    if (part.includes(';')) throw new Error('invalid semicolon separator in query');
    const eq = part.indexOf('=');
    const key = queryUnescape(eq === -1 ? part : part.slice(0, eq));
    const value = queryUnescape(eq === -1 ? '' : part.slice(eq + 1));
    out.set(key, [...(out.get(key) ?? []), value]);
  }
  return out;
}

/** Unknown keys are ignored ("fail open"), as the Go server does for agents newer than itself. */
export function parseAgentIdentifiers(text: string): Identifiers {
  let query: Map<string, string[]>;
  try {
    query = parseQuery(text);
  } catch (err) {
    throw new Error(`fail to parse url encoded string: ${(err as Error).message}`);
  }
  const ids = noIdentifiers();
  for (const [key, values] of query) {
    switch (key) {
      case 'ipv4':
      case 'ipv6':
      case 'host':
      case 'cidr':
        ids[key].push(...values);
        break;
      case 'default-route':
        if (parseGoBool(values[0]!) === true) ids.defaultRoute = true;
        break;
    }
  }
  return ids;
}

/** "host:port", "[v6]:port", a bare v6 address or a bare host -> the host part, without brackets. */
export function removePortFromHost(address: string): string {
  const colons = address.split(':').length - 1;
  if (colons < 2) return address.split(':')[0]!;
  let host = address;
  if (host.includes('[')) host = host.slice(0, host.lastIndexOf(':'));
  return host.replace(/^[[\]]+|[[\]]+$/g, '');
}
