// The agent's connection and its Connect streams against a scripted HTTP/2 server over real TLS on
// loopback: what a gRPC server may answer (trailers-only refusals, a non-gRPC endpoint, messages cut
// anywhere, trailers), what the agent must refuse (an oversized message, no answer), several streams
// on one connection, and keepalive.
import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import { connect as connectTcp, type AddressInfo, type Socket } from 'node:net';
import { createSecureContext, createServer as createTlsServer } from 'node:tls';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { makePki } from '../test/support/certs.js';
import { ManualClock } from '../test/support/manual-clock.js';
import { TcpBalancer } from '../test/support/tcp-balancer.js';
import { waitUntil } from '../test/support/wait.js';
import { systemClock } from '../clock/clock.js';
import { AgentSession, type LossCause, type AgentSessionOptions } from './agent-session.js';
import { GrpcStatus, type ConnectCallOptions, type CallStatus } from './connect-call.js';
import { ServerTls } from './server-tls.js';

const pki = makePki();
type Handler = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => void;
let handler: Handler = () => {};
const server = http2.createSecureServer({
  key: readFileSync(pki.serverKey),
  cert: readFileSync(pki.serverCert),
  ca: readFileSync(pki.caCert),
  requestCert: true,
  allowHTTP1: false,
});
server.on('stream', (stream, headers) => handler(stream, headers));
const port = await new Promise<number>((resolve) =>
  server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
);
const open: AgentSession[] = [];
afterEach(() => {
  for (const s of open.splice(0)) s.close();
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const tlsOptions = {
  secureContext: createSecureContext({
    ca: readFileSync(pki.caCert),
    cert: readFileSync(pki.clientCert),
    key: readFileSync(pki.clientKey),
  }),
  server: `127.0.0.1:${port}`,
  host: '127.0.0.1',
  alpn: [],
  caCert: pki.caCert,
  agentCert: pki.clientCert,
};
const tls = new ServerTls(tlsOptions);

function frame(body: string): Buffer {
  const out = Buffer.alloc(5 + Buffer.byteLength(body));
  out.writeUInt32BE(Buffer.byteLength(body), 1);
  out.write(body, 5);
  return out;
}

type Overrides = Partial<
  Pick<ConnectCallOptions, 'timeoutMs' | 'metadata'> &
    Pick<AgentSessionOptions, 'address' | 'keepaliveMs' | 'keepaliveTimeoutMs' | 'clock'>
>;

async function session(overrides: Overrides = {}) {
  let resolveClose!: (s: CallStatus) => void;
  const closed = new Promise<CallStatus>((r) => (resolveClose = r));
  let resolveCause!: (c: LossCause) => void;
  const cause = new Promise<LossCause>((r) => (resolveCause = r));
  const s = await AgentSession.open({
    address: overrides.address ?? `127.0.0.1:${port}`,
    secure: (socket) => tls.handshake(socket),
    timeoutMs: 20_000, // bounds a failure only
    windowBytes: 1 << 20,
    keepaliveMs: overrides.keepaliveMs ?? 0,
    keepaliveTimeoutMs: overrides.keepaliveTimeoutMs ?? 1000,
    clock: overrides.clock ?? systemClock,
    tcp: { keepaliveMs: 0, userTimeoutMs: 0, congestionControl: '' },
    onClose: (status, why) => {
      resolveCause(why);
      resolveClose(status);
    },
  });
  open.push(s);
  return { session: s, closed, cause };
}

async function streamOn(s: AgentSession, overrides: Overrides = {}) {
  const messages: string[] = [];
  let resolveEnd!: (s: CallStatus) => void;
  const ended = new Promise<CallStatus>((r) => (resolveEnd = r));
  const stream = await s.openCall({
    metadata: overrides.metadata ?? { agentid: 'a1', agentidentifiers: 'host=c1' },
    timeoutMs: overrides.timeoutMs ?? 20_000,
    maxMessageBytes: 1000,
    onMessage: (m) => messages.push(m.toString()),
    onEnd: resolveEnd,
  });
  return { stream, messages, ended };
}

async function connect(overrides: Overrides = {}) {
  const { session: s, closed, cause } = await session(overrides);
  return { ...(await streamOn(s, overrides)), session: s, closed, cause };
}

const grpcHeaders = { ':status': 200, 'content-type': 'application/grpc', serverid: 's1', servercount: '2' };

describe('ConnectCall', () => {
  it('sends gRPC request headers with the metadata, and reads the response headers', async () => {
    let seen: http2.IncomingHttpHeaders = {};
    handler = (stream, headers) => {
      seen = headers;
      stream.respond(grpcHeaders);
    };
    const { stream } = await connect();
    expect(seen).toMatchObject({
      ':method': 'POST',
      ':path': '/AgentService/Connect',
      'content-type': 'application/grpc',
      te: 'trailers',
      agentid: 'a1',
      agentidentifiers: 'host=c1',
    });
    expect(stream.responseHeaders).toMatchObject({ serverid: 's1', servercount: '2' });
    expect(stream.open).toBe(true);
  });

  it("delivers messages cut anywhere, both ways, then the server's status from its trailers", async () => {
    handler = (stream) => {
      stream.respond(grpcHeaders, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      let got = Buffer.alloc(0);
      stream.on('data', (c: Buffer) => {
        got = Buffer.concat([got, c]);
        if (got.length < 2 * 9) return;
        const all = Buffer.concat([frame('one'), frame(''), frame('three'), got]);
        for (let at = 0; at < all.length; at += 3) stream.write(all.subarray(at, at + 3));
        stream.end();
      });
    };
    const { stream, messages, ended } = await connect();
    stream.write(frame('ping'));
    stream.write(frame('pong'));
    expect(await ended).toEqual({ code: GrpcStatus.OK, details: '' });
    expect(messages).toEqual(['one', '', 'three', 'ping', 'pong']);
    expect(stream.open).toBe(false);
  });

  it('reports a trailers-only refusal in gRPC terms, message decoded', async () => {
    handler = (stream) =>
      stream.respond(
        { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '16', 'grpc-message': 'bad%20token' },
        { endStream: true },
      );
    await expect(connect()).rejects.toThrow('UNAUTHENTICATED: bad token');
  });

  it('says so when the endpoint is not gRPC', async () => {
    handler = (stream) => stream.respond({ ':status': 404, 'content-type': 'text/plain' }, { endStream: true });
    await expect(connect()).rejects.toThrow(/HTTP status 404/);
  });

  it('gives up on a server that never answers, at the timeout on its clock', async () => {
    handler = () => {};
    const clock = new ManualClock();
    let settled = false;
    const opening = connect({ timeoutMs: 300, clock });
    opening.catch(() => {}).finally(() => (settled = true));
    // Connected (the connection's own timeout gone): the wait for the response headers is what is left.
    await waitUntil(() => clock.nextDue() === 300, 20_000, 'the wait for response headers');
    await clock.advance(299);
    expect(settled).toBe(false);
    await clock.advance(1);
    await expect(opening).rejects.toThrow(`no response headers from 127.0.0.1:${port} within 300ms`);
  });

  it('ends the stream on an oversized message, with RESOURCE_EXHAUSTED, not a buffer', async () => {
    let reset!: Promise<number>;
    handler = (stream) => {
      stream.respond(grpcHeaders);
      stream.write(frame('fine'));
      stream.write(frame('x'.repeat(1001)));
      reset = new Promise((resolve) => stream.on('close', () => resolve(stream.rstCode)));
    };
    const { messages, ended } = await connect();
    const status = await ended;
    expect(status.code).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
    expect(status.details).toMatch(/exceeds the limit of 1000/);
    expect(messages).toEqual(['fine']);
    expect(await reset).toBe(http2.constants.NGHTTP2_CANCEL);
  });

  it('a stream the server gives up without trailers ends in an error status, and is over', async () => {
    handler = (stream) => {
      stream.respond(grpcHeaders);
      stream.on('error', () => {});
      // once the client, having opened the stream, sends on it
      stream.once('data', () => stream.close(http2.constants.NGHTTP2_REFUSED_STREAM));
    };
    const { stream, ended, session: s } = await connect();
    stream.write(frame('hello'));
    expect((await ended).code).not.toBe(GrpcStatus.OK);
    expect(stream.open).toBe(false);
    expect(s.ready).toBe(true); // the connection stays for the agent's other streams
  });

  it('a stream refused before it was answered fails the open with the reset', async () => {
    handler = (stream) => {
      stream.on('error', () => {});
      stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
    };
    await expect(connect()).rejects.toThrow(/NGHTTP2_REFUSED_STREAM/);
  });

  it('half-closes on end(): what was written arrives, then the server ends the call', async () => {
    let received = '';
    handler = (stream) => {
      stream.respond(grpcHeaders, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.on('data', (c: Buffer) => (received += c.subarray(5).toString()));
      stream.on('end', () => stream.end());
    };
    const { stream, ended } = await connect();
    stream.write(frame('last words'));
    stream.end();
    expect((await ended).code).toBe(GrpcStatus.OK);
    expect(received).toBe('last words');
  });

  it('carries several streams on one connection, each with its own metadata; one that ends leaves the others', async () => {
    const seen: string[] = [];
    handler = (stream, headers) => {
      seen.push(String(headers.agentidentifiers));
      stream.respond(grpcHeaders, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.on('data', (c: Buffer) => stream.write(c));
      stream.on('end', () => stream.end());
    };
    const { session: s, closed } = await session();
    const a = await streamOn(s, { metadata: { agentid: 'a1', agentidentifiers: 'host=a' } });
    const b = await streamOn(s, { metadata: { agentid: 'a1', agentidentifiers: 'host=b' } });
    expect(seen).toEqual(['host=a', 'host=b']);
    a.stream.end();
    expect((await a.ended).code).toBe(GrpcStatus.OK);
    b.stream.write(frame('still here'));
    await expect.poll(() => b.messages).toEqual(['still here']);
    expect(s.ready).toBe(true);
    s.close();
    expect((await b.ended).code).toBe(GrpcStatus.UNAVAILABLE);
    expect((await closed).code).toBe(GrpcStatus.UNAVAILABLE);
  });

  it('offers --alpn-proto before h2 in the TLS handshake', async () => {
    let offered: string[] = [];
    const tlsServer = createTlsServer(
      {
        key: readFileSync(pki.serverKey),
        cert: readFileSync(pki.serverCert),
        ALPNCallback: ({ protocols }) => {
          offered = protocols;
          return 'h2';
        },
      },
      (s) => s.destroy(),
    );
    const tlsPort = await new Promise<number>((resolve) =>
      tlsServer.listen(0, '127.0.0.1', () => resolve((tlsServer.address() as AddressInfo).port)),
    );
    const withAlpn = new ServerTls({ ...tlsOptions, server: `127.0.0.1:${tlsPort}`, alpn: ['konnectivity', 'h2'] });
    const socket = await new Promise<Socket>((resolve) => {
      const s = connectTcp(tlsPort, '127.0.0.1', () => resolve(s));
    });
    (await withAlpn.handshake(socket)).destroy();
    tlsServer.close();
    expect(offered).toEqual(['konnectivity', 'h2']);
  });

  it('keeps a quiet connection with PINGs, and drops one whose PINGs go unanswered', async () => {
    handler = (stream) => stream.respond(grpcHeaders);
    const relay = new TcpBalancer([port]);
    const relayPort = await relay.listen();
    try {
      const clock = new ManualClock();
      const {
        session: s,
        ended,
        closed,
        cause,
      } = await connect({ address: `127.0.0.1:${relayPort}`, keepaliveMs: 100, keepaliveTimeoutMs: 300, clock });
      // Three rounds: the PING goes out, and its answer (the next PING scheduled, its timeout cancelled)
      // comes before the clock is moved on.
      for (let i = 0; i < 3; i++) {
        await clock.advance(100);
        expect(clock.nextDue()).toBe(clock.now() + 300);
        await waitUntil(() => clock.nextDue() === clock.now() + 100, 20_000, 'the PING to be answered');
      }
      expect(s.ready).toBe(true);
      relay.freeze();
      await clock.advance(100);
      await clock.advance(300);
      expect(await ended).toEqual({ code: GrpcStatus.UNAVAILABLE, details: 'keepalive ping unanswered for 300ms' });
      expect(await closed).toEqual({ code: GrpcStatus.UNAVAILABLE, details: 'keepalive ping unanswered for 300ms' });
      expect(await cause).toBe('ping');
    } finally {
      await relay.close();
    }
  });

  it('says why a connection went: a RST is a close (Node HTTP/2 reports no reset)', async () => {
    handler = (stream) => stream.respond(grpcHeaders);
    const relay = new TcpBalancer([port]);
    const relayPort = await relay.listen();
    try {
      const { closed, cause } = await connect({ address: `127.0.0.1:${relayPort}` });
      relay.reset();
      expect((await closed).code).toBe(GrpcStatus.UNAVAILABLE);
      expect(await cause).toBe('closed');
    } finally {
      await relay.close();
    }
  });
});
