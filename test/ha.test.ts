// High availability against several hub replicas behind one loopback balancer: one stream per
// replica, failover, reconnect after a replica returns, and a hub that is down at start.
import { afterEach, describe, expect, it } from 'vitest';
import { dialThroughProxy } from '../client/dial.js';
import { ProxyHub, type ProxyHubOptions } from '../hub/proxy-server.js';
import { startAgent, type StartedAgent } from './support/agent.js';
import { makePki, hubTls, agentTlsFlags } from './support/certs.js';
import { pattern, sha256, startEchoServer, unusedPort, type Target } from './support/targets.js';
import { TcpBalancer } from './support/tcp-balancer.js';
import { waitUntil, waitUntilAsync } from './support/wait.js';

const pki = makePki();
const tls = hubTls(pki);
const agentFlags = [...agentTlsFlags(pki), '--agent-identifiers=host=echo.cluster1'];
const resolve = async () => ({ addresses: ['127.0.0.1'] });

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function startHub(opts: Partial<ProxyHubOptions>): Promise<ProxyHub> {
  return ProxyHub.start({ agentPort: 0, serverPort: 0, proxyStrategies: ['destHost'], agentTls: tls, ...opts });
}

async function echoThrough(hub: ProxyHub, echo: Target): Promise<void> {
  const conn = await dialThroughProxy({
    mode: 'grpc',
    proxyHost: '127.0.0.1',
    proxyPort: hub.ports.server!,
    address: `echo.cluster1:${echo.port}`,
    timeoutMs: 5000,
  });
  const payload = pattern(256 << 10, hub.ports.server);
  const sum = await new Promise<string>((done, fail) => {
    const chunks: Buffer[] = [];
    let got = 0;
    conn.on('data', (c: Buffer) => {
      chunks.push(c);
      got += c.length;
      if (got >= payload.length) done(sha256(Buffer.concat(chunks)));
    });
    conn.on('error', fail);
    conn.write(payload);
  });
  conn.destroy();
  expect(sum).toBe(sha256(payload));
}

describe.each(['round-robin', 'random'] as const)('three replicas behind a %s balancer', (policy) => {
  it('holds one stream per replica quickly, fails over, and reconnects a replica that returns', async () => {
    const echo = await startEchoServer();
    cleanups.push(() => echo.close());
    const hubs = await Promise.all(['a', 'b', 'c'].map((id) => startHub({ serverID: `server-${id}`, serverCount: 3 })));
    cleanups.push(() => Promise.all(hubs.map((h) => h.close())));
    const lb = new TcpBalancer(
      hubs.map((h) => h.ports.agent),
      policy,
    );
    await lb.listen();
    cleanups.push(() => lb.close());

    // How soon is the bench's business (bench/README.md, "Fleet"); the deadline here only bounds a failure.
    const agent: StartedAgent = startAgent([`localhost:${lb.port}`], agentFlags, { resolve });
    cleanups.push(() => agent.stop());
    await agent.ready(3, 30_000);
    expect(new Set(agent.agent.clients.serverIDs())).toEqual(new Set(['server-a', 'server-b', 'server-c']));
    for (const hub of hubs) await echoThrough(hub, echo);

    // Replica b dies: its stream goes, the others keep serving, readiness stays green.
    const bPort = hubs[1]!.ports.agent;
    lb.setBackends([hubs[0]!.ports.agent, hubs[2]!.ports.agent]);
    await hubs[1]!.close();
    await waitUntil(() => !agent.agent.clients.serverIDs().includes('server-b'), 20_000, 'the stream to b to close');
    expect(agent.agent.readiness.check()).toBeUndefined();
    await echoThrough(hubs[0]!, echo);
    await echoThrough(hubs[2]!, echo);
    await waitUntil(
      () => agent.agent.clients.connections().every((c) => c.connectionCount === 0),
      5000,
      'every tunnelled connection to close',
    );

    // b comes back on the same port: the agent reconnects to it.
    hubs[1] = await startHub({ serverID: 'server-b', serverCount: 3, agentPort: bPort });
    lb.setBackends(hubs.map((h) => h.ports.agent));
    await waitUntil(() => agent.agent.clients.serverIDs().includes('server-b'), 30_000, 'a stream to b again');
    await echoThrough(hubs[1]!, echo);
    const attempts = await agent.agent.metrics.serverConnectAttempts.get();
    expect(attempts.values.find((v) => v.labels.result === 'connected')?.value).toBe(4);
  }, 40_000);
});

describe('hub lifecycle', () => {
  it('an agent started while the hub is down keeps trying and is ready once the hub comes up', async () => {
    const port = await unusedPort();
    const agent = startAgent(
      [`localhost:${port}`],
      [...agentFlags, '--sync-interval=500ms', '--sync-interval-cap=2s'],
      { resolve },
    );
    cleanups.push(() => agent.stop());
    // Three refused attempts (the backoff's schedule itself: agent/clientset.test.ts, on a ManualClock).
    const failed = async () =>
      (await agent.agent.metrics.serverConnectAttempts.get()).values.find((v) => v.labels.result === 'failed')?.value ??
      0;
    await waitUntilAsync(async () => (await failed()) >= 3, 30_000, 'three refused attempts');
    expect(agent.agent.readiness.check()).toBe('no servers connected');
    const hub = await startHub({ agentPort: port });
    cleanups.push(() => hub.close());
    await agent.ready(1, 30_000);
  }, 60_000);

  it('follows a serverCount that grows with --sync-forever', async () => {
    const a = await startHub({ serverID: 'a', serverCount: 1 });
    cleanups.push(() => a.close());
    const lb = new TcpBalancer([a.ports.agent]);
    await lb.listen();
    cleanups.push(() => lb.close());
    const agent = startAgent(
      [`localhost:${lb.port}`],
      [...agentFlags, '--sync-forever', '--sync-interval=100ms', '--sync-interval-cap=500ms'],
      { resolve },
    );
    cleanups.push(() => agent.stop());
    await agent.ready(1);
    const b = await startHub({ serverID: 'b', serverCount: 2 });
    cleanups.push(() => b.close());
    lb.setBackends([a.ports.agent, b.ports.agent]);
    await waitUntil(() => agent.agent.clients.serverIDs().includes('b'), 30_000, 'the new replica');
    expect(new Set(agent.agent.clients.serverIDs())).toEqual(new Set(['a', 'b']));
  });

  it('a replica lost while the agent backs off from duplicates is found again when it returns', async () => {
    // serverCount 3 with two replicas: the agent keeps dialling the balancer and meets only replicas it
    // holds (duplicates, told apart by their resumed TLS sessions). When and how often: agent/clientset.test.ts.
    const a = await startHub({ serverID: 'a', serverCount: 3 });
    let b = await startHub({ serverID: 'b', serverCount: 3 });
    cleanups.push(() => Promise.all([a.close(), b.close()]));
    const bPort = b.ports.agent;
    const lb = new TcpBalancer([a.ports.agent, bPort]);
    await lb.listen();
    cleanups.push(() => lb.close());
    const agent = startAgent(
      [`localhost:${lb.port}`],
      [...agentFlags, '--sync-interval=200ms', '--sync-interval-cap=1s'],
      { resolve },
    );
    cleanups.push(() => agent.stop());
    await agent.ready(2, 30_000);
    const duplicates = async () =>
      (await agent.agent.metrics.serverConnectAttempts.get()).values.find((v) => v.labels.result === 'duplicate')
        ?.value ?? 0;
    await waitUntilAsync(async () => (await duplicates()) >= 2, 30_000, 'two duplicates');
    await b.close();
    await waitUntil(() => !agent.agent.clients.serverIDs().includes('b'), 30_000, 'the stream to b to close');
    b = await startHub({ serverID: 'b', serverCount: 3, agentPort: bPort });
    await waitUntil(() => agent.agent.clients.serverIDs().includes('b'), 30_000, 'b held again');
  }, 90_000);

  it('keeps every address of several --proxy-server-host values connected', async () => {
    const a = await startHub({ serverID: 'a' });
    const b = await startHub({ serverID: 'b' });
    cleanups.push(() => Promise.all([a.close(), b.close()]));
    const agent = startAgent([`localhost:${a.ports.agent}`, `localhost:${b.ports.agent}`], agentFlags, { resolve });
    cleanups.push(() => agent.stop());
    await agent.ready(2, 20_000);
    expect(new Set(agent.agent.clients.serverIDs())).toEqual(new Set(['a', 'b']));
  });
});
