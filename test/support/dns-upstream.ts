// A small authoritative-looking DNS server on loopback that plays the cluster DNS in tests: UDP and
// TCP on one port, records from a table, TC over the requester's UDP budget, NXDOMAIN with an SOA.
// `silent` makes it swallow queries (an upstream that is down).
import dgram from 'node:dgram';
import net from 'node:net';
import { decodeMessage, type DnsRecord, encodeMessage, type Message } from '../../dns/dns2.js';
import { RCODE, TYPE, typeName } from '../../dns/wire.js';

/** A record of the zone: its owner is the zone's key, its class IN, its TTL 30 s unless given. */
export type TestRecord = DnsRecord extends infer R
  ? R extends DnsRecord
    ? Omit<R, 'name' | 'class' | 'ttl'> & { ttl?: number }
    : never
  : never;

export interface TestUpstream {
  port: number;
  address: string;
  /** Queries seen, as "name TYPE". */
  queries: string[];
  silent: boolean;
  close(): Promise<void>;
}

/** On 127.0.0.1 and a free port unless `at` says where (port 53 of a loopback address plays a pod's nameserver). */
export async function startTestUpstream(
  zone: Record<string, TestRecord[]>,
  at: { address?: string; port?: number } = {},
  attempts = 5,
): Promise<TestUpstream> {
  const address = at.address ?? '127.0.0.1';
  const sockets = new Set<net.Socket>();
  const tcp = net.createServer((socket) => serveTcp(socket));
  // TCP picks the port and UDP follows: a TCP port chosen by UDP may be held by one of the many
  // TIME_WAIT connections a bench leaves, which TCP's own choice skips.
  await new Promise<void>((resolve, reject) => tcp.once('error', reject).listen(at.port ?? 0, address, resolve));
  const port = (tcp.address() as net.AddressInfo).port;
  const udp = dgram.createSocket('udp4');
  try {
    await new Promise<void>((resolve, reject) => udp.once('error', reject).bind(port, address, resolve));
  } catch (err) {
    // Something else holds UDP on it. Try another.
    await new Promise((r) => tcp.close(r));
    if (attempts <= 1 || at.port !== undefined) throw err;
    return startTestUpstream(zone, at, attempts - 1);
  }
  const state: TestUpstream = {
    port,
    address,
    queries: [],
    silent: false,
    close: async () => {
      for (const s of sockets) s.destroy();
      await Promise.all([
        new Promise((r) => udp.close(() => r(undefined))),
        new Promise((r) => tcp.close(() => r(undefined))),
      ]);
    },
  };

  const soa: DnsRecord = {
    name: 'test',
    type: TYPE.SOA,
    class: 1,
    ttl: 60,
    primary: 'ns.test',
    admin: 'hostmaster.test',
    serial: 1,
    refresh: 60,
    retry: 60,
    expiration: 60,
    minimum: 30,
  };
  const answer = (msg: Buffer, viaUdp: boolean): Buffer | undefined => {
    let query: Message;
    try {
      query = decodeMessage(msg);
    } catch {
      return undefined; // garbage forwarded by a fuzz test
    }
    const q = query.questions[0];
    if (!q) return undefined;
    state.queries.push(`${q.name.toLowerCase()} ${typeName(q.type)}`);
    if (state.silent) return undefined;
    const records = zone[q.name.toLowerCase()];
    const answers: DnsRecord[] = [];
    let name = q.name;
    // Follow a CNAME inside the table, as a recursive resolver does.
    for (let chain = records; chain; ) {
      const cname = chain.find((r) => r.type === TYPE.CNAME);
      for (const r of chain)
        if (r.type === q.type || r.type === TYPE.CNAME) answers.push({ name, class: 1, ttl: 30, ...r });
      if (!cname || !('domain' in cname) || q.type === TYPE.CNAME) break;
      name = cname.domain;
      chain = zone[name]!;
    }
    const opt = query.additionals.find((r) => r.type === TYPE.OPT);
    const { id, opcode, rd } = query.header;
    const response = {
      header: { id, opcode, rd, qr: 1, ra: 1, rcode: records ? RCODE.NOERROR : RCODE.NXDOMAIN },
      questions: query.questions,
      answers,
      authorities: answers.length === 0 ? [soa] : [],
      additionals: opt ? [{ name: '', type: TYPE.OPT, class: 1232, ttl: 0 }] : [],
    } as const;
    const bytes = encodeMessage(response);
    const budget = opt ? Math.max(512, opt.class) : 512;
    if (viaUdp && bytes.length > budget)
      return encodeMessage({ ...response, header: { ...response.header, tc: 1 }, answers: [], authorities: [] });
    return bytes;
  };

  udp.on('message', (msg, rinfo) => {
    const out = answer(msg, true);
    if (out) udp.send(out, rinfo.port, rinfo.address);
  });
  function serveTcp(socket: net.Socket): void {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    let buffered = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      buffered = Buffer.concat([buffered, chunk]);
      while (buffered.length >= 2 && buffered.length >= 2 + buffered.readUInt16BE(0)) {
        const msg = buffered.subarray(2, 2 + buffered.readUInt16BE(0));
        buffered = buffered.subarray(2 + msg.length);
        const out = answer(msg, false);
        if (!out) continue;
        const len = Buffer.alloc(2);
        len.writeUInt16BE(out.length);
        socket.write(Buffer.concat([len, out]));
      }
    });
    socket.on('error', () => undefined);
  }
  return state;
}
