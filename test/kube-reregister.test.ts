// Re-registration under load: the local hub routes only by identifier (destHost), the real Agent
// re-registers each time the served names change, and a stream of dials through the client library
// keeps succeeding across 20 changes, each made after a few dials of the load. Every new name becomes
// dialable once registered.
import type { Duplex } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dialThroughProxy } from '../client/dial.js';
import { ProxyHub } from '../hub/proxy-server.js';
import { createLogger } from '../observability/log.js';
import { parseRules, type RuleSet } from '../rules/rule-set.js';
import { makePki, hubTls, agentTlsFlags } from './support/certs.js';
import { startRulesAgent, type RulesAgent } from './support/rules-agent.js';
import { dialLoad, startEchoServer, type Target } from './support/targets.js';
import { waitUntil } from './support/wait.js';

const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
const naming = { cluster: 'cluster1', agentNamespace: '', clusterDomain: 'cluster.test' };

function rules(generation: number): RuleSet {
  const r = parseRules({
    naming,
    file: {
      origin: 'cm',
      content: `static: [{name: stable.cluster1, target: 127.0.0.1}, {name: gen${generation}.cluster1, target: 127.0.0.1}]`,
    },
  });
  if (!r.ok) throw new Error(r.errors.join());
  return r.value;
}

let hub: ProxyHub;
let echo: Target;
let spoke: RulesAgent;

beforeAll(async () => {
  echo = await startEchoServer('127.0.0.1');
  const pki = makePki();
  hub = await ProxyHub.start({
    agentPort: 0,
    serverPort: 0,
    proxyStrategies: ['destHost'],
    agentTls: hubTls(pki),
    log,
  });
  const tls = [...agentTlsFlags(pki)];
  spoke = startRulesAgent(
    `localhost:${hub.ports.agent}`,
    [...tls, '--agent-id=spoke-1', '--drain-timeout=5s', '--sync-interval=100ms'],
    rules(0),
  );
  await spoke.agent.ready(1, 20_000); // generous: a busy machine
});

afterAll(async () => {
  spoke?.stop();
  await hub?.close();
  await echo?.close();
});

async function echoThrough(host: string): Promise<void> {
  const conn: Duplex = await dialThroughProxy({
    mode: 'grpc',
    proxyHost: '127.0.0.1',
    proxyPort: hub.ports.server!,
    address: `${host}:${echo.port}`,
    timeoutMs: 5000,
  });
  try {
    await new Promise<void>((resolve, reject) => {
      conn.once('data', (b: Buffer) =>
        b.toString() === 'ping' ? resolve() : reject(new Error(`echo said ${b.toString()}`)),
      );
      conn.once('error', reject);
      conn.write('ping');
    });
  } finally {
    conn.destroy();
  }
}

describe('re-registration', () => {
  it('keeps a stream of dials succeeding while the rule names change 20 times, registering each on the same connection', async () => {
    const load = dialLoad(4, () => echoThrough('stable.cluster1'));
    const [conn] = spoke.agent.agent.clients.connections();
    for (let g = 1; g <= 20; g++) {
      // a few dials of the load between edits, however fast the machine is
      await load.succeeded(3 * g);
      spoke.holder.replace(rules(g));
      // the new name routes once the agent has registered it
      await waitUntil(
        () => hub.agents().some((a) => !a.draining && a.identifiers.host.includes(`gen${g}.cluster1`)),
        20_000,
        `gen${g} registered`,
      );
      await echoThrough(`gen${g}.cluster1`);
    }
    const { failures } = await load.stop();
    expect(failures).toEqual([]);
    // one connection all along; the streams of the names gone drained and closed: the agent's own,
    // stable.cluster1's and gen20's are left
    expect(spoke.agent.agent.clients.connections()).toEqual([conn]);
    await waitUntil(() => hub.agents().length === 3, 20_000, 'old streams to close');
    expect(
      hub
        .agents()
        .map((a) => a.identifiers.host)
        .sort(),
    ).toEqual([['cluster1'], ['gen20.cluster1'], ['stable.cluster1']]);
    // no name was handed from one stream to another (the Go server's "should not happen")
    expect(hub.counters.firstStreamRemovedBeforeOthers).toBe(0);
    await expect(echoThrough('gen19.cluster1')).rejects.toThrow(/No agent available/);
  }, 60_000);
});
