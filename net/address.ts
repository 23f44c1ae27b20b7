// "host:port" as konnectivity carries it in DialRequest.address (Go's net.SplitHostPort and
// net.JoinHostPort rules), for every side that builds or reads one: agent, hub, client, DNS.
import { isIP } from 'node:net';

export interface HostPort {
  host: string;
  port: number;
}

/** Splits `host:port`, `[v6]:port`; returns an error text worded like Go's when malformed. */
export function splitHostPort(address: string): HostPort | string {
  let host: string;
  let portText: string;
  if (address.startsWith('[')) {
    const end = address.indexOf(']');
    if (end === -1) return `address ${address}: missing ']' in address`;
    host = address.slice(1, end);
    if (address[end + 1] !== ':') return `address ${address}: missing port in address`;
    portText = address.slice(end + 2);
  } else {
    const colon = address.lastIndexOf(':');
    if (colon === -1) return `address ${address}: missing port in address`;
    host = address.slice(0, colon);
    if (host.includes(':')) return `address ${address}: too many colons in address`;
    portText = address.slice(colon + 1);
  }
  if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65535) return `address ${address}: invalid port`;
  return { host, port: Number(portText) };
}

/**
 * The TLS server name (SNI) to send for a host: none for an IP, as Go's crypto/tls does; the IP is
 * then checked against the certificate's IP names (Node warns DEP0123 for an IP server name).
 */
export function tlsServerName(host: string): string | undefined {
  return isIP(host) ? undefined : host;
}

/** Go's net.JoinHostPort: brackets any host with a colon (an IPv6 address). */
export function joinHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
