// The agentIdentifiers header and dial addresses, read the way the Go proxy-server reads them
// (ANP proto/header/header.go GenAgentIdentifiers, pkg/util/net.go RemovePortFromHost).
import { parseQueryString } from '../proto/url-query.js';

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

/** Unknown keys are ignored ("fail open"), as the Go server does for agents newer than itself. */
export function parseAgentIdentifiers(text: string): Identifiers {
  let query: Map<string, string[]>;
  try {
    query = parseQueryString(text);
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
