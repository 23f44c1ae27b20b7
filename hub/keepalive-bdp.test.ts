// grpc-go clients (the Go agent, the konnectivity-client) send BDP-estimator pings whenever they
// receive data; grpc-go's server never counts them as strikes. Found interop-testing the Go agent and
// test-client against the hub: 50 parallel requests or one 1 MiB download got GOAWAY too_many_pings.
import http2 from 'node:http2';
import { afterEach, describe, expect, it } from 'vitest';
import { ProxyHub } from './proxy-server.js';

const bdpPayload = Buffer.from([2, 4, 16, 16, 9, 14, 7, 7]);
const hubs: ProxyHub[] = [];
const sessions: http2.ClientHttp2Session[] = [];

afterEach(async () => {
  for (const s of sessions.splice(0)) s.destroy();
  await Promise.all(hubs.splice(0).map((h) => h.close()));
});

function ping(session: http2.ClientHttp2Session, payload: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    session.ping(payload, (err) => (err ? reject(err) : resolve()));
  });
}

describe.each(['agent', 'server'] as const)('%s port: grpc-go BDP pings', (port) => {
  it('are never strikes, while other pings that come too soon still get GOAWAY too_many_pings', async () => {
    const hub = await ProxyHub.start({ host: '127.0.0.1', agentPort: 0, serverPort: 0 });
    hubs.push(hub);
    const session = http2.connect(`http://127.0.0.1:${hub.ports[port]}`);
    sessions.push(session);
    const goaways: number[] = [];
    session.on('goaway', (code) => goaways.push(code));
    session.on('error', () => {});
    await new Promise<void>((resolve, reject) => session.once('connect', () => resolve()).once('error', reject));
    // An open call, as while data flows (the hub answers it as it likes; it only has to stay open).
    const path = port === 'agent' ? '/AgentService/Connect' : '/ProxyService/Proxy';
    const stream = session.request(
      { ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', agentid: 'a' },
      { endStream: false },
    );
    stream.on('error', () => {});
    stream.resume();

    for (let i = 0; i < 8; i++) await ping(session, bdpPayload);
    // The hub takes frames in order: a GOAWAY for those pings would come before this SETTINGS' ack.
    await new Promise<void>((resolve) => session.settings({}, () => resolve()));
    expect(goaways).toEqual([]);

    // A keepalive ping (grpc-go's are all zeroes) three times in a row is still too many.
    await ping(session, Buffer.alloc(8)).catch(() => {});
    await ping(session, Buffer.alloc(8)).catch(() => {});
    await ping(session, Buffer.alloc(8)).catch(() => {});
    await new Promise<void>((resolve) => (goaways.length ? resolve() : session.once('goaway', () => resolve())));
    expect(goaways).toEqual([http2.constants.NGHTTP2_ENHANCE_YOUR_CALM]);
  });
});
