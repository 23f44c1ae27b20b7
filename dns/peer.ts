// Who sent a query, as each transport knows it: the batched UDP helper hands over the kernel's
// sockaddr bytes, dgram and TCP an address and a port. Kept as given on the query path (nothing is
// decoded there) and turned into text only when the query log is read. Pure.

export type Peer = Buffer | { readonly address: string; readonly port: number };

const AF_INET_LEN = 16; // sizeof(struct sockaddr_in)
const AF_INET6_LEN = 28; // sizeof(struct sockaddr_in6)

/** RFC 5952 text of 16 bytes: lower-case hex, the longest run of two or more zero groups as `::`. */
function ipv6Text(b: Uint8Array): string {
  const groups = Array.from({ length: 8 }, (_, i) => (b[2 * i]! << 8) | b[2 * i + 1]!);
  let best = { at: -1, len: 1 };
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > best.len) best = { at: i, len: j - i };
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best.at === -1) return hex.join(':');
  return `${hex.slice(0, best.at).join(':')}::${hex.slice(best.at + best.len).join(':')}`;
}

/** `::ffff:10.0.0.1` (an IPv4 client of a socket bound to `::`) is the IPv4 address it carries. */
function unmapped(address: string): string {
  return /^::ffff:\d+\.\d+\.\d+\.\d+$/i.test(address) ? address.slice(7) : address;
}

/** The client's address (IPv4-mapped IPv6 as IPv4) and port. */
export function peerAddress(peer: Peer): { address: string; port: number } {
  if (!Buffer.isBuffer(peer)) return { address: unmapped(peer.address), port: peer.port };
  const port = peer.readUInt16BE(2);
  if (peer.length === AF_INET_LEN) return { address: `${peer[4]}.${peer[5]}.${peer[6]}.${peer[7]}`, port };
  if (peer.length === AF_INET6_LEN) {
    const bytes = peer.subarray(8, 24);
    const mapped = bytes.subarray(0, 10).every((x) => x === 0) && bytes[10] === 0xff && bytes[11] === 0xff;
    return { address: mapped ? `${bytes[12]}.${bytes[13]}.${bytes[14]}.${bytes[15]}` : ipv6Text(bytes), port };
  }
  return { address: '', port: 0 };
}
