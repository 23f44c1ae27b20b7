// IP address text to bytes, for the dial allowlist's CIDR matching and the DNS answers' A/AAAA records.
import { isIPv4 } from 'node:net';

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
