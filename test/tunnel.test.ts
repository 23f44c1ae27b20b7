// End to end through real sockets on loopback: hub client -> local hub (gRPC and HTTP CONNECT
// frontends) -> agent over mTLS -> real TCP and HTTP targets.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dialThroughProxy, type DialOptions } from '../client/dial.js';
import { ProxyHub } from '../hub/proxy-server.js';
import * as grpc from '@grpc/grpc-js';
import { PacketType, ProxyService } from '../proto/packets.js';
import { startAgent, type StartedAgent } from './support/agent.js';
import { makePki, type TestPki, hubTls, agentTlsFlags } from './support/certs.js';
import { echoRoundTrip, pattern, sha256, startEchoServer, startHttpServer, type Target } from './support/targets.js';
import { waitUntil, waitUntilAsync } from './support/wait.js';

let pki: TestPki;
let hub: ProxyHub;
let agent: StartedAgent;
let echo: Target;
let web: Target;
const tokens: string[] = [];
const names: Record<string, string> = {};

const modes = ['grpc', 'http-connect'] as const;

function dial(mode: DialOptions['mode'], address: string, timeoutMs?: number): Promise<Duplex> {
  return dialThroughProxy({
    mode,
    proxyHost: '127.0.0.1',
    proxyPort: mode === 'grpc' ? hub.ports.server! : hub.ports.httpConnect!,
    address,
    timeoutMs,
  });
}

function httpGet(conn: Duplex, path: string, host = 'web'): Promise<{ head: string; body: Buffer }> {
  return new Promise((resolve, reject) => {
    let head: string | undefined;
    let length = -1;
    let pending = Buffer.alloc(0);
    const body: Buffer[] = [];
    let got = 0;
    conn.on('data', (c: Buffer) => {
      if (head === undefined) {
        pending = Buffer.concat([pending, c]);
        const split = pending.indexOf('\r\n\r\n');
        if (split === -1) return;
        head = pending.subarray(0, split).toString();
        length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? -1);
        c = pending.subarray(split + 4);
      }
      body.push(c);
      got += c.length;
      if (got >= length) resolve({ head, body: Buffer.concat(body) });
    });
    conn.on('error', reject);
    conn.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\nConnection: keep-alive\r\n\r\n`);
  });
}

beforeAll(async () => {
  pki = makePki();
  echo = await startEchoServer();
  web = await startHttpServer();
  names['echo.cluster1'] = '127.0.0.1';
  names['web.prod.cluster1'] = '127.0.0.1';
  names['forbidden.cluster1'] = '127.0.0.1';
  hub = await ProxyHub.start({
    agentPort: 0,
    serverPort: 0,
    httpConnectPort: 0,
    proxyStrategies: ['destHost'],
    agentTls: hubTls(pki),
    validateAgentToken: async (token) => {
      tokens.push(token);
    },
  });
  const tokenFile = join(pki.dir, 'token');
  writeFileSync(tokenFile, 'first-token\n');
  agent = startAgent(
    [`localhost:${hub.ports.agent}`],
    [
      ...agentTlsFlags(pki),
      `--service-account-token-path=${tokenFile}`,
      '--agent-identifiers=host=echo.cluster1&host=web.prod.cluster1&host=127.0.0.1&host=nosuch.cluster1&host=slow.cluster1&host=forbidden.cluster1',
      '--dial-timeout=400ms',
    ],
    {
      resolve: async (host) => {
        if (host === 'slow.cluster1') return new Promise(() => {});
        const ip = names[host];
        if (!ip) throw new Error('not found');
        return host === 'web.prod.cluster1'
          ? { addresses: [ip], route: { rule: '--expose=prod/web' } }
          : { addresses: [ip] };
      },
      authorize: (host) =>
        host === 'forbidden.cluster1' ? 'not allowed: no rule serves "forbidden.cluster1"' : undefined,
    },
  );
  await agent.ready();
});

afterAll(async () => {
  agent?.stop();
  await hub?.close();
  await echo?.close();
  await web?.close();
});

describe.each(modes)('through the %s frontend', (mode) => {
  it('echoes 1 MiB byte-identical, by identifier', async () => {
    const conn = await dial(mode, `echo.cluster1:${echo.port}`);
    const payload = pattern(1 << 20, 7);
    expect(await echoRoundTrip(conn, payload)).toBe(sha256(payload));
    conn.destroy();
  });

  it('carries 100 MiB each way through the echo target intact', async () => {
    const conn = await dial(mode, `echo.cluster1:${echo.port}`);
    const payload = pattern(100 << 20, 11);
    expect(await echoRoundTrip(conn, payload)).toBe(sha256(payload));
    conn.destroy();
  }, 120_000);

  it('serves an HTTP download of 100 MiB and an upload, with checksums', async () => {
    const conn = await dial(mode, `web.prod.cluster1:${web.port}`);
    const { head, body } = await httpGet(conn, `/bytes/${100 << 20}`);
    expect(body.length).toBe(100 << 20);
    expect(sha256(body)).toBe(/x-sha256: (\w+)/.exec(head)?.[1]);
    conn.destroy();
    const upload = await dial(mode, `web.prod.cluster1:${web.port}`);
    const payload = pattern(1 << 20, 3);
    const answer = new Promise<string>((resolve) => upload.on('data', (c: Buffer) => resolve(c.toString())));
    upload.write(`POST /sha256 HTTP/1.1\r\nHost: web\r\nContent-Length: ${payload.length}\r\n\r\n`);
    upload.write(payload);
    expect(await answer).toContain(sha256(payload));
    upload.destroy();
  }, 120_000);

  it('holds 200 concurrent connections', async () => {
    const conns = await Promise.all(Array.from({ length: 200 }, () => dial(mode, `echo.cluster1:${echo.port}`)));
    const sums = await Promise.all(conns.map((c, i) => echoRoundTrip(c, pattern(4096, i + 1))));
    sums.forEach((s, i) => {
      expect(s).toBe(sha256(pattern(4096, i + 1)));
    });
    for (const c of conns) c.destroy();
    await waitUntil(() => agent.agent.clients.connections()[0]!.connectionCount === 0, 20_000, 'connections to close');
  }, 60_000);

  it('returns dial failures as errors and keeps serving', async () => {
    const closed = await startEchoServer();
    await closed.close();
    await expect(dial(mode, `127.0.0.1:${closed.port}`)).rejects.toThrow(
      mode === 'grpc' ? `dial tcp 127.0.0.1:${closed.port}: connect: connection refused` : /50[24]|refused/,
    );
    await expect(dial(mode, 'nosuch.cluster1:80')).rejects.toThrow(
      mode === 'grpc' ? 'dial tcp: lookup nosuch.cluster1: no such host' : /50[24]|no such host/,
    );
    await expect(dial(mode, 'slow.cluster1:80')).rejects.toThrow(
      mode === 'grpc' ? 'dial tcp: lookup slow.cluster1: i/o timeout' : /50[24]|timeout/,
    );
    await expect(dial(mode, 'unknown.cluster2:80')).rejects.toThrow(
      mode === 'grpc' ? 'No agent available' : /500|No agent/,
    );
    const conn = await dial(mode, `echo.cluster1:${echo.port}`);
    expect(await echoRoundTrip(conn, Buffer.from('still serving'))).toBe(sha256('still serving'));
    conn.destroy();
  });
});

describe('agent behaviour seen by the hub', () => {
  it('records each dial in the dial log: the server, the rule, bytes and duration once closed, denials with their reason', async () => {
    const log = agent.agent.dialLog!;
    const from = log.last;
    const conn = await dial('grpc', `web.prod.cluster1:${web.port}`);
    const { body } = await httpGet(conn, '/bytes/1000');
    expect(body.length).toBe(1000);
    const mine = () => log.current().find((e) => e.destination === `web.prod.cluster1:${web.port}` && e.id > from);
    expect(mine()).toMatchObject({ server: hub.serverID, rule: '--expose=prod/web', address: '127.0.0.1', open: true });
    conn.destroy();
    await waitUntil(() => mine()?.open === false, 5000, 'the close in the dial log');
    expect(mine()).toMatchObject({ result: 'connected', bytesFromTarget: expect.any(Number), closedBy: 'CLOSE_REQ' });
    expect(mine()!.bytesToTarget).toBeGreaterThan(0);
    expect(mine()!.bytesFromTarget).toBeGreaterThan(1000);
    await expect(dial('grpc', 'forbidden.cluster1:80')).rejects.toThrow(/not allowed/);
    expect(log.current().at(-1)).toMatchObject({
      destination: 'forbidden.cluster1:80',
      result: 'denied',
      reason: 'dial tcp forbidden.cluster1:80: not allowed: no rule serves "forbidden.cluster1"',
      server: hub.serverID,
    });
  });

  it('cancels a pending dial when the frontend stream dies (the hub sends DIAL_CLS)', async () => {
    const cancelled = () => agent.agent.metrics.dialCancellations.get().then((m) => m.values[0]?.value ?? 0);
    const before = await cancelled();
    // The Go server tells the agent only when the frontend stream ends with the dial pending.
    const client = new ProxyService(`127.0.0.1:${hub.ports.server}`, grpc.credentials.createInsecure());
    const call = (client as unknown as { Proxy(): grpc.ClientDuplexStream<unknown, unknown> }).Proxy();
    call.on('error', () => {});
    call.write({
      type: PacketType.DIAL_REQ,
      dialRequest: { protocol: 'tcp', address: 'slow.cluster1:80', random: '4242' },
    });
    await waitUntil(
      () => agent.agent.clients.connections()[0]!.pendingDialCount === 1,
      2000,
      'the dial to reach the agent',
    );
    call.cancel();
    client.close();
    await waitUntil(
      () => agent.agent.clients.connections()[0]!.pendingDialCount === 0,
      2000,
      'the pending dial to be cancelled',
    );
    expect(await cancelled()).toBe(before + 1);
  });

  it('sent the bearer token from the file, and re-reads it on the next connect', async () => {
    expect(tokens[0]).toBe('first-token');
    writeFileSync(join(pki.dir, 'token'), 'second-token');
    hub.disconnectAgent(agent.agent.agentID);
    await waitUntil(() => tokens.length >= 2, 10_000, 'a reconnect');
    expect(tokens.at(-1)).toBe('second-token');
    await agent.ready();
  });

  it('a burst of 300 downloads on one stream: each arrives whole, and connections took turns on the stream', async () => {
    const turns = async () =>
      (await agent.agent.metrics.turnWait.get()).values.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0;
    const before = await turns();
    const size = 1 << 20;
    const results = await Promise.all(
      Array.from({ length: 300 }, async (_, i) => {
        const conn = await dial(i % 2 ? 'grpc' : 'http-connect', `web.prod.cluster1:${web.port}`);
        const { head, body } = await httpGet(conn, `/bytes/${size}`);
        conn.destroy();
        return body.length === size && sha256(body) === /x-sha256: (\w+)/.exec(head)?.[1];
      }),
    );
    expect(results.filter((whole) => !whole)).toEqual([]);
    // 300 MiB through one stream whose limit is 1 MiB: targets read in turns.
    expect(await turns()).toBeGreaterThan(before);
  }, 120_000);

  it('answers DATA for an unknown connectID with the Go agent error and stays up', async () => {
    const [, rsp] = await Promise.all([
      (async () => {
        // A frontend that sends DATA for a connection it never dialed: the hub has nothing to
        // route, so drive the agent directly through the hub's agent stream API instead.
        const conn = agent.agent.clients.connections()[0]!;
        conn.streams()[0]!.table.handle({
          type: PacketType.DATA,
          data: { connectID: '987654321', data: Buffer.from('junk'), error: '' },
        });
      })(),
      // Matched by its connectID: the closes of the connections before it may still be on their way.
      hub.waitForPacket(PacketType.CLOSE_RSP, agent.agent.agentID, (p) => p.closeResponse?.connectID === '987654321'),
    ]);
    expect(rsp[1].closeResponse).toMatchObject({ connectID: '987654321', error: 'unrecognized connectID' });
  });
});

describe('mTLS', () => {
  it('an agent without a client certificate is refused; with one it is served', async () => {
    const refused = startAgent(
      [`localhost:${hub.ports.agent}`],
      [`--ca-cert=${pki.caCert}`, '--sync-interval=100ms', '--sync-interval-cap=200ms'],
    );
    try {
      const failed = async () =>
        (await refused.agent.metrics.serverConnectAttempts.get()).values.find((v) => v.labels.result === 'failed')
          ?.value ?? 0;
      await waitUntilAsync(async () => (await failed()) > 0, 20_000, 'a refused attempt');
      expect(refused.agent.clients.healthyCount).toBe(0);
      expect(hub.agents().some((a) => a.agentID === refused.agent.agentID)).toBe(false);
    } finally {
      refused.stop();
    }
    expect(hub.agents().some((a) => a.agentID === agent.agent.agentID)).toBe(true);
  });
});
