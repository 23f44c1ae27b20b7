// The UDP transports' own drops, with real sockets on loopback: a query whose handling throws, a
// datagram too large to read whole, an answer the kernel will not take. Each is counted
// (spoke_agent_dns_udp_dropped_total) and logged, and the queries around it are still answered.
import dgram from 'node:dgram';
import { once } from 'node:events';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { RuleHolder } from '../rules/holder.js';
import { parseRules } from '../rules/rule-set.js';
import { DnsServer } from './server.js';
import { createResolver } from './setup.js';
import { udpBatch } from './udp-batch.js';
import { encodeQuery, questionName, TYPE } from './wire.js';
import { testDnsValues } from '../test/support/dns-values.js';

const naming = { cluster: 'cluster1', agentNamespace: 'agent-ns', clusterDomain: 'cluster.test' };
const rules = parseRules({
  naming,
  expose: [],
  file: { origin: 'rules.yaml', content: 'static:\n  - {name: echo.cluster1, target: 127.0.0.1}\n' },
});
if (!rules.ok) throw new Error(rules.errors.join('\n'));
const ruleSet = rules.value;
const batched = udpBatch() !== undefined;

const closers: Array<() => unknown> = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** A DNS server whose resolver throws for names starting with "boom", with its metrics and log lines. */
async function start(batchedUdp: boolean) {
  const registry = new Registry();
  const lines: Array<{ level: number; msg: string; dropped?: Record<string, number>; err?: { message: string } }> = [];
  const log = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  const resolver = createResolver(
    // port 9 never asked: the names here are static rules or fail first
    testDnsValues('127.0.0.1:9', { dnsBatchedUdp: batchedUdp, dnsTtl: 5000, dnsUpstreamTimeout: 1000 }),
    new RuleHolder(ruleSet),
    registry,
    log,
  );
  const handle = resolver.handle.bind(resolver);
  resolver.handle = (msg, proto, reply, peer) => {
    if (questionName(msg).startsWith('boom')) throw new Error(`cannot handle ${questionName(msg)}`);
    return handle(msg, proto, reply, peer);
  };
  const server = new DnsServer({ address: '127.0.0.1', port: 0, resolver, log, batchedUdp });
  const { port } = await server.start();
  closers.push(() => server.stop());
  const dropped = async (reason: string) =>
    (await registry.getSingleMetric('spoke_agent_dns_udp_dropped_total')!.get()).values.find(
      (v) => v.labels.reason === reason,
    )?.value ?? 0;
  return { server, port, lines, dropped };
}

/** A client socket that sends `datagrams` back to back and collects the IDs of the answers. */
async function client(port: number, datagrams: Buffer[], answers: number) {
  const socket = dgram.createSocket('udp4');
  closers.push(() => socket.close());
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  const ids: number[] = [];
  const all = new Promise<void>((resolve) =>
    socket.on('message', (msg) => {
      ids.push(msg.readUInt16BE(0));
      if (ids.length === answers) resolve();
    }),
  );
  for (const d of datagrams) socket.send(d, port, '127.0.0.1');
  await all;
  return ids.sort((a, b) => a - b);
}

const query = (name: string, id: number) => {
  const msg = encodeQuery(name, TYPE.A);
  msg.writeUInt16BE(id, 0);
  return msg;
};

describe.each([
  ...(batched ? [{ transport: 'batched', batchedUdp: true }] : []),
  { transport: 'dgram', batchedUdp: false },
])('UDP drops on $transport', ({ transport, batchedUdp }) => {
  it('drops a query whose handling throws, counts and logs it, and answers the rest of its batch', async () => {
    const s = await start(batchedUdp);
    expect(s.server.udpKind).toBe(transport);
    // Sent back to back, they reach the batched socket together: one recvmmsg, one batch.
    const burst = [query('echo.cluster1', 1), query('boom.cluster1', 2), query('echo.cluster1', 3)];
    expect(await client(s.port, burst, 2)).toEqual([1, 3]);
    expect(await s.dropped('failed')).toBe(1);
    expect(s.lines.filter((l) => l.msg === 'DNS UDP queries dropped')).toEqual([
      expect.objectContaining({
        level: 50,
        dropped: { truncated: 0, failed: 1, unsent: 0 },
        err: expect.objectContaining({ message: 'cannot handle boom.cluster1' }),
      }),
    ]);
  });
});

describe.skipIf(!batched)('batched UDP', () => {
  it('counts a datagram too large to read whole as truncated and answers the next one', async () => {
    const s = await start(true);
    expect(await client(s.port, [Buffer.alloc(5000, 7), query('echo.cluster1', 7)], 1)).toEqual([7]);
    expect(await s.dropped('truncated')).toBe(1);
    expect(s.lines.find((l) => l.msg === 'DNS UDP queries dropped')).toMatchObject({
      level: 40,
      dropped: { truncated: 1, failed: 0, unsent: 0 },
    });
  });

  it('says how many answers the kernel took, so the rest are counted as unsent', async () => {
    const helper = udpBatch()!;
    const [handle] = helper.open('127.0.0.1', 0, () => {});
    closers.push(() => helper.close(handle));
    const receiver = dgram.createSocket('udp4');
    closers.push(() => receiver.close());
    await new Promise<void>((resolve) => receiver.bind(0, '127.0.0.1', resolve));
    const got = once(receiver, 'message');
    // struct sockaddr_in for the receiver, and a sockaddr_in6 an IPv4 socket cannot send to.
    const v4 = Buffer.alloc(16);
    v4.writeUInt16LE(2, 0);
    v4.writeUInt16BE(receiver.address().port, 2);
    Buffer.from([127, 0, 0, 1]).copy(v4, 4);
    const v6 = Buffer.alloc(28);
    v6.writeUInt16LE(10, 0);
    v6.writeUInt16BE(receiver.address().port, 2);
    v6[23] = 1; // ::1
    expect(helper.send(handle, [Buffer.from('a'), Buffer.from('b')], [v6, v4])).toBe(1);
    expect(String((await got)[0])).toBe('b');
    helper.close(handle);
    expect(helper.send(handle, [Buffer.from('c')], [v4])).toBe(0); // closed: nothing goes out
  });
});
