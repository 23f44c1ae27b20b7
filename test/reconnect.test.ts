// A proxy-server that restarts, as on an operator's worst day: exactly one TCP connection per server
// afterwards (counted in the kernel's table, not in the agent's bookkeeping), and a server that stays
// down gets one TCP connection per attempt, no more. Against our hub, and against the Go proxy-server
// when its binary is at hand (ANP_BIN_DIR, else the refs helper's cache). How soon and how often the
// agent tries is agent/clientset.test.ts's (on a ManualClock) and the bench's (bench/reconnect.ts, fleet.ts).
import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ProxyHub } from '../hub/proxy-server.js';
import { startAgent, type StartedAgent } from './support/agent.js';
import { makePki, hubTls, agentTlsFlags } from './support/certs.js';
import { anpBinDir, GoServer } from './support/go-proxy-server.js';
import { missingBinariesNote } from './support/reference-bins.js';
import { skipNote } from './support/skips.js';
import { establishedConnections } from './support/sockets.js';
import { unusedPort } from './support/targets.js';
import { waitUntil, waitUntilAsync } from './support/wait.js';

const pki = makePki();
const tls = hubTls(pki);
const agentFlags = [...agentTlsFlags(pki), '--agent-identifiers=host=localhost'];

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** Attempts the agent counted with this result so far. */
async function attempts(agent: StartedAgent, result: string): Promise<number> {
  return (
    (await agent.agent.metrics.serverConnectAttempts.get()).values.find((v) => v.labels.result === result)?.value ?? 0
  );
}

/** A server on a fixed agent port that can be stopped and started again. */
interface Restartable {
  port: number;
  start(): Promise<void>;
  stop(): Promise<void>;
}

async function ourHub(): Promise<Restartable> {
  const port = await unusedPort();
  let hub: ProxyHub | undefined;
  const server = {
    port,
    start: async () => {
      hub = await ProxyHub.start({ agentPort: port, serverPort: null, agentTls: tls });
    },
    stop: async () => hub?.close(),
  };
  cleanups.push(() => server.stop());
  return server;
}

async function goServer(): Promise<Restartable> {
  const go = await GoServer.create(anpBinDir()!, 'grpc', 'default', 'go-restarting');
  cleanups.push(() => go.stop());
  return { port: go.ports.agent, start: () => go.start(pki), stop: () => go.stop() };
}

/** The agent's TCP connections to the server, the server's from the agent, and the agent's gauge. */
async function transports(agent: StartedAgent, port: number) {
  const gauge = (await agent.agent.metrics.openServerConnections.get()).values[0]?.value;
  return {
    agentSide: establishedConnections(port, 'remote'),
    serverSide: establishedConnections(port, 'local'),
    gauge,
  };
}

if (anpBinDir() === undefined)
  skipNote('reconnect', `the Go proxy-server case ${missingBinariesNote('ANP_BIN_DIR', 'anp', ['proxy-server'])}`);

describe.each([
  ['our hub', ourHub, true],
  ['the Go proxy-server', goServer, anpBinDir() !== undefined],
] as const)('restarting %s', (_name, makeServer, available) => {
  it.skipIf(!available)(
    'leaves exactly one transport per server after every restart, refused retries included',
    async () => {
      const server = await makeServer();
      await server.start();
      const agent = startAgent([`localhost:${server.port}`], agentFlags, {
        resolve: async () => ({ addresses: ['127.0.0.1'] }),
      });
      cleanups.push(() => agent.stop());
      await agent.ready(1);
      // Down until 1, 2, then 3 more attempts were refused.
      for (const refusals of [1, 2, 3]) {
        await server.stop();
        await waitUntil(() => agent.agent.clients.healthyCount === 0, 30_000, 'the agent to notice');
        const before = await attempts(agent, 'failed');
        await waitUntilAsync(
          async () => (await attempts(agent, 'failed')) >= before + refusals,
          60_000,
          `${refusals} refused attempt(s)`,
        );
        await server.start();
        await agent.ready(1, 60_000);
        // Exactly one on both sides once it settles (a second one, or a leftover, keeps this from holding).
        await waitUntilAsync(
          async () =>
            JSON.stringify(await transports(agent, server.port)) ===
            JSON.stringify({ agentSide: 1, serverSide: 1, gauge: 1 }),
          30_000,
          `one transport after ${refusals} refusal(s)`,
        );
      }
      expect(await attempts(agent, 'failed')).toBeGreaterThanOrEqual(6);
    },
    240_000,
  );
});

describe('a server that stays down', () => {
  it('gets one TCP connection per attempt the agent counts, and no other', async () => {
    // Accepts and drops every connection: each attempt fails its handshake and shows up here once.
    let accepted = 0;
    const sink = net.createServer((s) => {
      accepted++;
      s.destroy();
    });
    await new Promise<void>((r) => sink.listen(0, '127.0.0.1', () => r()));
    cleanups.push(() => new Promise((r) => sink.close(r)));
    const agent = startAgent(
      [`localhost:${(sink.address() as net.AddressInfo).port}`],
      [...agentFlags, '--sync-interval=100ms', '--sync-interval-cap=200ms'],
      { resolve: async () => ({ addresses: ['127.0.0.1'] }) },
    );
    cleanups.push(() => agent.stop());
    await waitUntilAsync(async () => (await attempts(agent, 'failed')) >= 5, 60_000, 'five refused attempts');
    agent.stop();
    // An attempt under way when it stopped is counted when it fails: wait for the two counts to agree.
    // A connection beyond the agent's own attempts (a released subchannel reconnecting) keeps them apart.
    await waitUntilAsync(
      async () => accepted === (await attempts(agent, 'failed')),
      30_000,
      'one connection per attempt',
    );
  }, 90_000);
});
