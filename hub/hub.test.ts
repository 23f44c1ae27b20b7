// End to end on loopback: a minimal fake agent (a grpc-js client on AgentService/Connect that dials
// local TCP targets) reached through both frontends with the client library.
import { once } from 'node:events';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { dialThroughProxy, DialError, type DialOptions } from '../client/dial.js';
import { AgentService, PacketType, ProxyService, type OutPacket, type Packet } from '../proto/packets.js';
import { startEchoServer, type Target } from '../test/support/targets.js';
import { waitUntil } from '../test/support/wait.js';
import { ManualClock } from '../test/support/manual-clock.js';
import { createEphemeralPki, type EphemeralPki } from './ephemeral-pki.js';
import { ProxyHub, type ProxyHubOptions } from './proxy-server.js';

interface FakeAgent {
  call: grpc.ClientDuplexStream<OutPacket, Packet>;
  headers: Promise<grpc.Metadata>;
  status: Promise<grpc.StatusObject>;
  received: Packet[];
  send(pkt: OutPacket): void;
  close(): void;
}

interface FakeAgentOptions {
  agentID?: string | string[];
  identifiers?: string;
  creds?: grpc.ChannelCredentials;
  /** Leave DIAL_REQ unanswered. */
  silent?: boolean;
  channelOptions?: grpc.ChannelOptions;
}

/** Answers DIAL_REQ by dialing the address on loopback, with the Go agent's packets and IDs from 1. */
function startFakeAgent(port: number, opts: FakeAgentOptions = {}): FakeAgent {
  const client = new AgentService(`localhost:${port}`, opts.creds ?? grpc.credentials.createInsecure(), {
    'grpc.use_local_subchannel_pool': 1,
    ...opts.channelOptions,
  });
  const md = new grpc.Metadata();
  const ids = opts.agentID ?? 'agent-1';
  for (const id of Array.isArray(ids) ? ids : [ids]) md.add('agentID', id);
  if (opts.identifiers) md.set('agentIdentifiers', opts.identifiers);
  const call = (client as unknown as { Connect(md: grpc.Metadata): FakeAgent['call'] }).Connect(md);
  const received: Packet[] = [];
  const conns = new Map<string, net.Socket>();
  let nextID = 1;
  const send = (pkt: OutPacket) => call.write(pkt);
  const headers = new Promise<grpc.Metadata>((resolve, reject) => {
    call.once('metadata', resolve);
    call.once('error', reject);
  });
  headers.catch(() => {});
  const status = new Promise<grpc.StatusObject>((resolve) => call.once('status', resolve));
  call.on('error', () => {});
  call.on('status', () => client.close());
  call.on('data', (pkt: Packet) => {
    received.push(pkt);
    if (pkt.type === PacketType.DIAL_REQ && !opts.silent) {
      const { address, random } = pkt.dialRequest!;
      const colon = address.lastIndexOf(':');
      const socket = net.connect({
        host: address.slice(0, colon).replace(/^\[|\]$/g, ''),
        port: Number(address.slice(colon + 1)),
      });
      const connectID = String(nextID++);
      socket.once('connect', () => {
        conns.set(connectID, socket);
        send({ type: PacketType.DIAL_RSP, dialResponse: { random, connectID } });
        socket.on('data', (data: Buffer) => {
          if (!call.write({ type: PacketType.DATA, data: { connectID, data } })) {
            socket.pause();
            call.once('drain', () => socket.resume());
          }
        });
        socket.once('close', () => {
          if (conns.delete(connectID)) send({ type: PacketType.CLOSE_RSP, closeResponse: { connectID } });
        });
      });
      socket.once('error', (err) => {
        if (!conns.has(connectID))
          send({ type: PacketType.DIAL_RSP, dialResponse: { random, error: `dial tcp ${address}: ${err.message}` } });
      });
    } else if (pkt.type === PacketType.DATA) {
      const socket = conns.get(pkt.data!.connectID);
      if (socket && !socket.write(pkt.data!.data)) {
        call.pause();
        socket.once('drain', () => call.resume());
      }
    } else if (pkt.type === PacketType.CLOSE_REQ) {
      const socket = conns.get(pkt.closeRequest!.connectID);
      if (socket) socket.destroy();
      else
        send({
          type: PacketType.CLOSE_RSP,
          closeResponse: { connectID: pkt.closeRequest!.connectID, error: 'Unknown connectID' },
        });
    }
  });
  return { call, headers, status, received, send, close: () => call.cancel() };
}

/** Writes `payload`, reads the same number of bytes back. */
async function echo(stream: Duplex, payload: Buffer): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let got = 0;
  const done = new Promise<void>((resolve, reject) => {
    stream.on('data', (c: Buffer) => {
      chunks.push(c);
      got += c.length;
      if (got >= payload.length) resolve();
    });
    stream.once('error', reject);
    stream.once('end', () => reject(new Error(`ended after ${got} bytes`)));
  });
  stream.write(payload);
  await done;
  return Buffer.concat(chunks);
}

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function startHub(opts: ProxyHubOptions = {}): Promise<ProxyHub> {
  const hub = await ProxyHub.start({ agentPort: 0, serverPort: 0, httpConnectPort: 0, ...opts });
  cleanups.push(() => hub.close());
  return hub;
}
async function startEcho(): Promise<Target> {
  const t = await startEchoServer();
  cleanups.push(() => t.close());
  return t;
}
function agentOn(hub: ProxyHub, opts: FakeAgentOptions = {}): FakeAgent {
  const a = startFakeAgent(hub.ports.agent, opts);
  cleanups.push(() => a.close());
  return a;
}
const modes = ['grpc', 'http-connect'] as const;
const dialOpts = (hub: ProxyHub, mode: (typeof modes)[number], address: string): DialOptions => ({
  mode,
  proxyHost: '127.0.0.1',
  proxyPort: mode === 'grpc' ? hub.ports.server! : hub.ports.httpConnect!,
  address,
});

describe('agent port', () => {
  it('sends serverID and serverCount headers and lists the agent', async () => {
    const hub = await startHub({ serverID: 'hub-a', serverCount: 3 });
    const agent = agentOn(hub, { agentID: 'spoke-1', identifiers: 'host=db.svc&default-route=true' });
    const headers = await agent.headers;
    expect(headers.get('serverid')).toEqual(['hub-a']);
    expect(headers.get('servercount')).toEqual(['3']);
    const info = await hub.waitForAgent('spoke-1');
    expect(info).toMatchObject({
      agentID: 'spoke-1',
      serverID: 'hub-a',
      draining: false,
      identifiers: { host: ['db.svc'], defaultRoute: true },
    });
  });

  it.each([
    [[], 'expected one agent ID in the context, got []'],
    [['a', 'b'], 'expected one agent ID in the context, got [a b]'],
  ])('refuses agentID %j with Go text', async (ids, text) => {
    const hub = await startHub();
    const agent = agentOn(hub, { agentID: ids });
    const status = await agent.status;
    expect(status.code).toBe(grpc.status.UNKNOWN);
    expect(status.details).toBe(text);
    expect(hub.agents()).toEqual([]);
  });

  it('records DRAIN and prefers agents that are not draining', async () => {
    const hub = await startHub();
    const echoTarget = await startEcho();
    const a = agentOn(hub, { agentID: 'a' });
    await hub.waitForAgent('a');
    const drained = hub.waitForPacket(PacketType.DRAIN, 'a');
    a.send({ type: PacketType.DRAIN, drain: {} });
    const [info] = await drained;
    expect(info.agentID).toBe('a');
    expect(hub.agents()[0]!.draining).toBe(true);

    const b = agentOn(hub, { agentID: 'b' });
    await hub.waitForAgent('b');
    for (let i = 0; i < 4; i++) {
      const s = await dialThroughProxy(dialOpts(hub, 'grpc', echoTarget.address));
      s.destroy();
    }
    expect(a.received.filter((p) => p.type === PacketType.DIAL_REQ)).toHaveLength(0);
    expect(b.received.filter((p) => p.type === PacketType.DIAL_REQ)).toHaveLength(4);
  });

  it('answers GOAWAY too_many_pings to an agent pinging more often than every 30 s', async () => {
    const hub = await startHub();
    const agent = agentOn(hub, {
      channelOptions: { 'grpc.keepalive_time_ms': 50, 'grpc.keepalive_permit_without_calls': 1 },
    });
    await agent.headers;
    const status = await agent.status;
    // grpc-js reports the ENHANCE_YOUR_CALM teardown as one or the other.
    expect([grpc.status.UNAVAILABLE, grpc.status.RESOURCE_EXHAUSTED]).toContain(status.code);
    await waitUntil(() => hub.agents().length === 0, 20_000, 'hub.agents().length === 0');
  });

  it('disconnectAgent ends the stream with OK and established frontends get CLOSE_RSP', async () => {
    const hub = await startHub();
    const target = await startEcho();
    const agent = agentOn(hub);
    await hub.waitForAgent();
    const stream = await dialThroughProxy(dialOpts(hub, 'grpc', target.address));
    stream.resume();
    const ended = once(stream, 'end');
    expect(hub.disconnectAgent('agent-1')).toBe(1);
    await ended;
    expect((await agent.status).code).toBe(grpc.status.OK);
    expect(hub.agents()).toEqual([]);
  });
});

describe.each(modes)('%s frontend', (mode) => {
  it('carries bytes both ways and closes with CLOSE_REQ/CLOSE_RSP', async () => {
    const hub = await startHub();
    const target = await startEcho();
    const agent = agentOn(hub);
    await hub.waitForAgent();
    const stream = await dialThroughProxy(dialOpts(hub, mode, target.address));
    const payload = Buffer.alloc(3 * 1024 * 1024 + 7);
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 31) & 0xff;
    const back = await echo(stream, payload);
    expect(back.equals(payload)).toBe(true);
    stream.end();
    await waitUntil(
      () => agent.received.some((p) => p.type === PacketType.CLOSE_REQ && p.closeRequest!.connectID === '1'),
      20_000,
      'agent.received.some((p) => p.type === PacketType.CLOSE_REQ && p.closeRequest!.connectID === "1")',
    );
    // Both frontends split what they forward (Go's http-connect reads 32 KiB at a time).
    const sizes = agent.received.filter((p) => p.type === PacketType.DATA).map((p) => p.data!.data.length);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(mode === 'grpc' ? 64 * 1024 : 32 * 1024);
  });

  it('refuses with "No agent available" when no agent is connected', async () => {
    const hub = await startHub();
    const err = await dialThroughProxy(dialOpts(hub, mode, '127.0.0.1:1')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DialError);
    if (mode === 'grpc') expect((err as DialError).message).toBe('No agent available');
    else {
      expect((err as DialError).httpStatus).toBe(500);
      expect((err as DialError).message).toBe('currently no tunnels available: No agent available');
    }
    expect(hub.counters.dialFailures.no_agent).toBe(1);
  });

  it("passes the agent's dial error on", async () => {
    const hub = await startHub();
    agentOn(hub);
    await hub.waitForAgent();
    const closed = net.createServer();
    closed.listen(0, '127.0.0.1');
    await once(closed, 'listening');
    const port = (closed.address() as net.AddressInfo).port;
    closed.close();
    const err = (await dialThroughProxy(dialOpts(hub, mode, `127.0.0.1:${port}`)).catch(
      (e: unknown) => e,
    )) as DialError;
    expect(err.message).toBe(`dial tcp 127.0.0.1:${port}: connect ECONNREFUSED 127.0.0.1:${port}`);
    if (mode === 'http-connect') expect(err.httpStatus).toBe(502);
    expect(hub.counters.dialFailures.error_response).toBe(1);
  });

  it('closes established connections when the agent stream dies', async () => {
    const hub = await startHub();
    const target = await startEcho();
    const agent = agentOn(hub);
    await hub.waitForAgent();
    const stream = await dialThroughProxy(dialOpts(hub, mode, target.address));
    stream.resume();
    const closed = once(stream, 'close');
    agent.close();
    await closed;
  });

  it('times out a dial the agent never answers (--backend-dial-timeout)', async () => {
    const clock = new ManualClock();
    const hub = await startHub({ backendDialTimeoutMs: 200, clock });
    const agent = agentOn(hub, { silent: true });
    await hub.waitForAgent();
    const dial = dialThroughProxy(dialOpts(hub, mode, '127.0.0.1:9')).catch((e: unknown) => e);
    await waitUntil(() => agent.received.some((p) => p.type === PacketType.DIAL_REQ), 20_000, 'the DIAL_REQ');
    await clock.advance(200);
    const err = (await dial) as DialError;
    if (mode === 'grpc') expect(err.message).toBe('timed out waiting for backend dial');
    else {
      expect(err.httpStatus).toBe(504);
      expect(err.message).toBe('Backend dial timeout: timed out waiting for backend dial');
    }
  });
});

describe('gRPC frontend packets', () => {
  /** A bare frontend stream, to send exactly the packets a test wants. */
  const rawFrontend = (hub: ProxyHub) => {
    const client = new ProxyService(`127.0.0.1:${hub.ports.server}`, grpc.credentials.createInsecure(), {
      'grpc.use_local_subchannel_pool': 1,
    });
    const call = (client as unknown as { Proxy(): grpc.ClientDuplexStream<OutPacket, Packet> }).Proxy();
    const received: Packet[] = [];
    call.on('data', (p: Packet) => received.push(p));
    call.on('error', () => {});
    call.on('status', () => client.close());
    cleanups.push(() => call.cancel());
    return { call, received };
  };

  it('sends DIAL_CLS to the agent when a frontend stream dies with its dial pending', async () => {
    const hub = await startHub();
    const agent = agentOn(hub, { silent: true });
    await hub.waitForAgent();
    const { call } = rawFrontend(hub);
    call.write({ type: PacketType.DIAL_REQ, dialRequest: { protocol: 'tcp', address: '127.0.0.1:9', random: '4242' } });
    await waitUntil(
      () => agent.received.some((p) => p.type === PacketType.DIAL_REQ),
      20_000,
      'agent.received.some((p) => p.type === PacketType.DIAL_REQ)',
    );
    call.cancel();
    await waitUntil(
      () => agent.received.some((p) => p.type === PacketType.DIAL_CLS),
      20_000,
      'agent.received.some((p) => p.type === PacketType.DIAL_CLS)',
    );
    expect(agent.received.find((p) => p.type === PacketType.DIAL_CLS)!.closeDial!.random).toBe('4242');
  });

  it('drops a dial the frontend cancels with DIAL_CLS without telling the agent, then closes its late answer', async () => {
    const hub = await startHub();
    const agent = agentOn(hub, { silent: true });
    await hub.waitForAgent();
    const { call, received } = rawFrontend(hub);
    call.write({ type: PacketType.DIAL_REQ, dialRequest: { protocol: 'tcp', address: '127.0.0.1:9', random: '99' } });
    await waitUntil(
      () => agent.received.some((p) => p.type === PacketType.DIAL_REQ),
      20_000,
      'agent.received.some((p) => p.type === PacketType.DIAL_REQ)',
    );
    call.write({ type: PacketType.DIAL_CLS, closeDial: { random: '99' } });
    await waitUntil(
      () => hub.counters.dialFailures.frontend_close === 1,
      20_000,
      'hub.counters.dialFailures.frontend_close === 1',
    );
    agent.send({ type: PacketType.DIAL_RSP, dialResponse: { random: '99', connectID: '5' } });
    await waitUntil(
      () => agent.received.some((p) => p.type === PacketType.CLOSE_REQ),
      20_000,
      'agent.received.some((p) => p.type === PacketType.CLOSE_REQ)',
    );
    expect(agent.received.map((p) => p.type)).toEqual([PacketType.DIAL_REQ, PacketType.CLOSE_REQ]);
    expect(received).toEqual([]);
  });

  it('answers CLOSE_REQ before any dial with CLOSE_RSP "backend uninitialized"', async () => {
    const hub = await startHub();
    const { call, received } = rawFrontend(hub);
    call.write({ type: PacketType.CLOSE_REQ, closeRequest: { connectID: '3' } });
    await waitUntil(() => received.length === 1, 20_000, 'received.length === 1');
    expect(received[0]).toMatchObject({
      type: PacketType.CLOSE_RSP,
      closeResponse: { connectID: '3', error: 'backend uninitialized' },
    });
  });

  it('answers a DIAL_RSP for an unknown random with CLOSE_REQ to the agent, and counts it', async () => {
    const hub = await startHub();
    const agent = agentOn(hub);
    await hub.waitForAgent();
    agent.send({ type: PacketType.DIAL_RSP, dialResponse: { random: '12345', connectID: '77' } });
    agent.send({ type: PacketType.DATA, data: { connectID: '78', data: Buffer.from('x') } });
    await waitUntil(
      () => agent.received.filter((p) => p.type === PacketType.CLOSE_REQ).length === 2,
      20_000,
      'agent.received.filter((p) => p.type === PacketType.CLOSE_REQ).length === 2',
    );
    expect(agent.received.map((p) => p.closeRequest?.connectID)).toEqual(['77', '78']);
    expect(hub.counters.dialFailures.unrecognized_response).toBe(1);
    // The DATA, and the agent's two CLOSE_RSP "Unknown connectID" answers.
    await waitUntil(() => hub.counters.unknownConnectID === 3, 20_000, 'hub.counters.unknownConnectID === 3');
  });

  it('keeps the random as a 63-bit decimal string end to end', async () => {
    const hub = await startHub();
    const target = await startEcho();
    const agent = agentOn(hub);
    await hub.waitForAgent();
    const s = await dialThroughProxy(dialOpts(hub, 'grpc', target.address));
    s.destroy();
    const random = agent.received.find((p) => p.type === PacketType.DIAL_REQ)!.dialRequest!.random;
    expect(random).toMatch(/^\d+$/);
    expect(BigInt(random) < 2n ** 63n).toBe(true);
  });
});

describe('mTLS', () => {
  let pki: EphemeralPki;
  const tlsHub = async () => {
    pki ??= createEphemeralPki();
    const material = { cert: pki.server.cert, key: pki.server.key, ca: pki.ca.cert };
    return startHub({ agentTls: material, frontendTls: material });
  };

  it('serves agents and frontends that present certificates from the CA', async () => {
    const hub = await tlsHub();
    const target = await startEcho();
    agentOn(hub, {
      creds: grpc.credentials.createSsl(
        Buffer.from(pki.ca.cert),
        Buffer.from(pki.client.key),
        Buffer.from(pki.client.cert),
      ),
    });
    await hub.waitForAgent();
    for (const mode of modes) {
      const s = await dialThroughProxy({
        ...dialOpts(hub, mode, target.address),
        proxyHost: 'localhost',
        ca: pki.ca.cert,
        cert: pki.client.cert,
        key: pki.client.key,
      });
      expect((await echo(s, Buffer.from('hello'))).toString()).toBe('hello');
      s.destroy();
    }
  });

  it('refuses an agent without a client certificate', async () => {
    const hub = await tlsHub();
    const agent = agentOn(hub, { creds: grpc.credentials.createSsl(Buffer.from(pki.ca.cert)) });
    expect((await agent.status).code).toBe(grpc.status.UNAVAILABLE);
    expect(hub.agents()).toEqual([]);
  });

  it.each(modes)('refuses a %s frontend without a client certificate', async (mode) => {
    const hub = await tlsHub();
    const err = await dialThroughProxy({
      ...dialOpts(hub, mode, '127.0.0.1:9'),
      proxyHost: 'localhost',
      ca: pki.ca.cert,
      timeoutMs: 5000,
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DialError);
    expect((err as Error).message).not.toMatch(/No agent available|timeout/);
  });
});
