// IP address text to bytes and back, for the dial policy's CIDR matching and the DNS answers' A/AAAA records.
import { isIP, isIPv4 } from 'node:net';

/**
 * The 4 bytes of an IPv4 address or the 16 of an IPv6 one, as written on the wire (an embedded dotted
 * quad and a `%zone` are allowed). The text must already have passed net.isIP.
 */
export function ipAddressBytes(address: string): Uint8Array {
  if (isIPv4(address)) return Uint8Array.from(address.split('.').map(Number));
  const zone = address.indexOf('%');
  let text = zone === -1 ? address : address.slice(0, zone);
  let tail: number[] = [];
  const lastColon = text.lastIndexOf(':');
  if (text.slice(lastColon + 1).includes('.')) {
    tail = text
      .slice(lastColon + 1)
      .split('.')
      .map(Number);
    text = `${text.slice(0, lastColon + 1)}0:0`;
  }
  const [head, rest] = text.split('::') as [string, string | undefined];
  const groups = (s: string | undefined) => (s ? s.split(':').map((g) => parseInt(g, 16)) : []);
  const left = groups(head);
  const right = groups(rest);
  const all =
    rest === undefined ? left : [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
  const bytes = new Uint8Array(16);
  all.forEach((g, i) => {
    bytes[2 * i] = g >> 8;
    bytes[2 * i + 1] = g & 0xff;
  });
  if (tail.length) bytes.set(tail, 12);
  return bytes;
}

/** 4 bytes for IPv4 (also for IPv4-mapped IPv6, so `::ffff:10.0.0.1` is the IPv4 address), 16 for IPv6. */
export function ipBytes(ip: string): Uint8Array | undefined {
  const zone = ip.indexOf('%');
  const addr = zone === -1 ? ip : ip.slice(0, zone);
  if (!isIP(addr)) return undefined;
  const bytes = ipAddressBytes(addr);
  const mapped =
    bytes.length === 16 && bytes.subarray(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
  return mapped ? bytes.slice(12) : bytes;
}

/** One spelling per address, so `::FFFF:10.0.0.1`, `::ffff:a00:1` and `10.0.0.1` compare equal. */
export function canonicalIp(ip: string): string {
  const bytes = ipBytes(ip);
  if (!bytes) return ip;
  if (bytes.length === 4) return bytes.join('.');
  return Array.from({ length: 8 }, (_, i) => ((bytes[2 * i]! << 8) | bytes[2 * i + 1]!).toString(16)).join(':');
}
