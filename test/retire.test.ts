// Retiring a stream without losing a dial, against our hub (destHost, which like the Go v0.36 server
// routes a name to a draining stream only when no other holds it): the stream of a rule gone sends DRAIN
// and stays open while the hub still routes dials to it, serving each; it closes a quiet second after the
// last one, and never while a connection through it is open. The agent's waits run on a ManualClock:
// the quiet second passes when the test says so, whatever the machine's load.
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dialThroughProxy } from '../client/dial.js';
import { ProxyHub, type ProxyHubOptions } from '../hub/proxy-server.js';
import { PacketType } from '../proto/packet-types.js';
import { startAgent, type StartedAgent } from './support/agent.js';
import { makePki, hubTls, agentTlsFlags } from './support/certs.js';
import { ManualClock } from './support/manual-clock.js';
import { echoRoundTrip, sha256, startEchoServer, type Target } from './support/targets.js';
import { waitUntil } from './support/wait.js';

let hub: ProxyHub;
let echo: Target;
let agent: StartedAgent;
const clock = new ManualClock();

beforeAll(async () => {
  const pki = makePki();
  echo = await startEchoServer();
  hub = await ProxyHub.start({
    agentPort: 0,
    serverPort: 0,
    proxyStrategies: ['destHost'],
    agentTls: hubTls(pki),
  });
  agent = startAgent(
    [`localhost:${hub.ports.agent}`],
    [...agentTlsFlags(pki), '--agent-id=retiring', '--drain-timeout=20s'],
    {
      identifiers: { own: 'host=own.cluster1', groups: ['host=old.cluster1'] },
      resolve: async () => ({ addresses: ['127.0.0.1'] }),
      clock,
    },
  );
  await agent.ready(1, 30_000);
  await waitUntil(() => hub.agents().length === 2, 30_000, 'both streams');
});

afterAll(async () => {
  agent?.stop();
  await hub?.close();
  await echo?.close();
});

const open = () => agent.agent.clients.connections().reduce((n, c) => n + c.connectionCount, 0);

async function echoThrough(host: string): Promise<void> {
  const before = open();
  const conn = await dialThroughProxy({
    mode: 'grpc',
    proxyHost: '127.0.0.1',
    proxyPort: hub.ports.server!,
    address: `${host}:${echo.port}`,
    timeoutMs: 30_000,
  });
  try {
    expect(await echoRoundTrip(conn, Buffer.from(host))).toBe(sha256(host));
  } finally {
    conn.destroy();
  }
  // The agent has closed its side too: the stream is idle again.
  await waitUntil(() => open() === before, 30_000, 'the connection to close');
}

const holding = (name: string) => hub.agents().some((a) => a.identifiers.host.includes(name));

describe('a retired stream', () => {
  it('serves the dials routed to it after its DRAIN, and closes a quiet second after the last, not before its connection ends', async () => {
    const held = await dialThroughProxy({
      mode: 'grpc',
      proxyHost: '127.0.0.1',
      proxyPort: hub.ports.server!,
      address: `old.cluster1:${echo.port}`,
      timeoutMs: 30_000,
    });
    const drained = hub.waitForPacket(PacketType.DRAIN, 'retiring');
    agent.agent.clients.setIdentifierGroups(['host=new.cluster1']);
    await drained;
    await waitUntil(() => holding('new.cluster1'), 30_000, 'the new group');
    // The only stream with the old name drains but is still routed to: every dial is served.
    for (let i = 0; i < 3; i++) await echoThrough('old.cluster1');
    expect(hub.agents().find((a) => a.identifiers.host.includes('old.cluster1'))?.draining).toBe(true);
    // The connection through it keeps it open however quiet it gets (the drain timeout is 20 s).
    await clock.advance(10_000);
    expect(holding('old.cluster1')).toBe(true);
    expect(await echoRoundTrip(held, Buffer.from('still'))).toBe(sha256('still'));
    // Quiet for long enough already: it closes as soon as the connection ends.
    held.destroy();
    await waitUntil(() => !holding('old.cluster1'), 30_000, 'the retired stream to close');
    await expect(echoThrough('old.cluster1')).rejects.toThrow(/No agent available/);

    // A stream retired while dials keep coming: open until a quiet second after the last.
    agent.agent.clients.setIdentifierGroups(['host=newer.cluster1']);
    await waitUntil(() => holding('newer.cluster1'), 30_000, 'the newer group');
    await echoThrough('new.cluster1');
    await clock.advance(900);
    expect(holding('new.cluster1')).toBe(true);
    await echoThrough('new.cluster1');
    await clock.advance(900);
    expect(holding('new.cluster1'), '900 ms after the last dial').toBe(true);
    await clock.advance(100);
    await waitUntil(() => !holding('new.cluster1'), 30_000, 'the second retired stream to close');
    await echoThrough('newer.cluster1');
    await echoThrough('own.cluster1');
    // No name changed streams, so nothing like the Go server's "should not happen".
    expect(hub.counters.firstStreamRemovedBeforeOthers).toBe(0);
  }, 120_000);

  /** A second agent, with a stream per rule and its own clock, on a hub of its own; a connection held through the rule's stream. */
  async function drainingWithConnection(strategies: ProxyHubOptions['proxyStrategies']) {
    const pki = makePki();
    const both = await ProxyHub.start({
      agentPort: 0,
      serverPort: 0,
      proxyStrategies: strategies,
      agentTls: hubTls(pki),
    });
    const drainClock = new ManualClock();
    const lines: Array<Record<string, unknown>> = [];
    const draining = startAgent([`localhost:${both.ports.agent}`], [...agentTlsFlags(pki), '--agent-id=draining'], {
      identifiers: { own: 'host=own.cluster2', groups: ['host=rule.cluster2'] },
      resolve: async () => ({ addresses: ['127.0.0.1'] }),
      clock: drainClock,
      log: pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) }),
    });
    await draining.ready(1, 30_000);
    await waitUntil(() => both.agents().length === 2, 30_000, 'both streams');
    const held = await dialThroughProxy({
      mode: 'grpc',
      proxyHost: '127.0.0.1',
      proxyPort: both.ports.server!,
      address: `rule.cluster2:${echo.port}`,
      timeoutMs: 30_000,
    });
    const stop = async () => {
      held.destroy();
      draining.stop();
      await both.close();
    };
    return { both, drainClock, lines, draining, held, stop };
  }

  it("when the agent drains, a connection on a rule's stream keeps the connection open, and the first stream retires last", async () => {
    // The default strategy too: it keys every stream by agentID, so the first stream must go last.
    const { both, drainClock, draining, held, stop } = await drainingWithConnection(['destHost', 'default']);
    try {
      let done = false;
      const drained = draining.agent.clients.drain(20_000).then(() => (done = true));
      // Both streams sent DRAIN at once, the idle first one's too.
      await waitUntil(() => both.agents().every((a) => a.draining), 30_000, 'DRAIN on both streams');
      // Well past the quiet second: the first stream, with no connection of its own, still waits.
      await drainClock.advance(5000);
      expect(both.agents()).toHaveLength(2);
      expect(done).toBe(false);
      expect(await echoRoundTrip(held, Buffer.from('after'))).toBe(sha256('after'));
      // Quiet for long enough: once the connection ends, the rule's stream and then the first one go.
      held.destroy();
      await drained;
      expect(both.agents()).toEqual([]);
      expect(both.counters.firstStreamRemovedBeforeOthers).toBe(0);
    } finally {
      await stop();
    }
  });

  it('closes a stream whose connection outlasts the drain timeout, and says so', async () => {
    const { both, drainClock, lines, draining, held, stop } = await drainingWithConnection(['destHost']);
    // The hub's client is told its connection was cut (CLOSE_RSP with an error), never a clean end.
    const cut = new Promise<Error>((resolve) => held.once('error', resolve));
    try {
      const drained = draining.agent.clients.drain(20_000);
      await waitUntil(() => both.agents().every((a) => a.draining), 30_000, 'DRAIN on both streams');
      await drainClock.advance(20_000);
      await drained;
      expect(lines).toContainEqual(
        expect.objectContaining({
          msg: 'retirement timed out: closing the stream with connections still open',
          identifiers: 'host=rule.cluster2',
          connections: 1,
        }),
      );
      expect((await cut).message).toMatch(
        /^connection cut by the agent: the agent closed its stream with this connection open/,
      );
    } finally {
      await stop();
    }
  });
});
