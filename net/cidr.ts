// CIDRs (`10.0.0.0/8`, `fd00::/8`): parsed once, matched against addresses byte by byte. Pure.
import { isIP } from 'node:net';
import { ipBytes } from './ip.js';

/** A parsed CIDR: the network's bytes (4 or 16) and its prefix length. */
export interface Cidr {
  text: string;
  bytes: Uint8Array;
  prefix: number;
}

/** `10.0.0.0/8`, `fd00::/8`, or a bare address (a /32 or /128); a message when malformed. */
export function parseCidr(text: string): Cidr | string {
  const slash = text.indexOf('/');
  const ip = slash === -1 ? text : text.slice(0, slash);
  const bytes = ip.includes('%') ? undefined : ipBytes(ip);
  if (!bytes) return `"${text}" is not a CIDR (want e.g. 10.0.0.0/8 or fd00::/8)`;
  const max = bytes.length * 8;
  const prefixText = slash === -1 ? String(max) : text.slice(slash + 1);
  // An IPv4-mapped IPv6 network keeps its IPv6 prefix length: shift it onto the IPv4 bytes.
  const shift = isIP(ip) === 6 && bytes.length === 4 ? 96 : 0;
  const prefix = Number(prefixText) - (slash === -1 ? 0 : shift);
  if (!/^\d{1,3}$/.test(prefixText) || prefix < 0 || prefix > max) return `"${text}" has an invalid prefix length`;
  return { text, bytes, prefix };
}

export function cidrContains(cidr: Cidr, ip: string): boolean {
  const bytes = ipBytes(ip);
  if (!bytes || bytes.length !== cidr.bytes.length) return false;
  const full = cidr.prefix >> 3;
  for (let i = 0; i < full; i++) if (bytes[i] !== cidr.bytes[i]) return false;
  const bits = cidr.prefix & 7;
  if (bits === 0) return true;
  const mask = (0xff << (8 - bits)) & 0xff;
  return (bytes[full]! & mask) === (cidr.bytes[full]! & mask);
}

/** Flag validation for --allowed-cidrs. */
export function cidrsProblem(values: readonly string[]): string | undefined {
  for (const v of values) {
    const parsed = parseCidr(v);
    if (typeof parsed === 'string') return parsed;
  }
  return undefined;
}
