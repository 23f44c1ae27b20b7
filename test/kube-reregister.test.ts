// Re-registration under load: the local hub routes only by identifier (destHost), the real Agent
// re-registers each time the served names change, and a stream of dials through the client library
// keeps succeeding across 20 changes. Every new name is dialable soon after it appears.
import { readFileSync } from 'node:fs';
import type { Duplex } from 'node:stream';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DialAllowlist } from '../dial-policy/allowlist.js';
import { dialThroughProxy } from '../client/dial.js';
import { resolveForDial } from '../dial-policy/resolve.js';
import { createResolver } from '../dns/setup.js';
import { ProxyHub } from '../hub/proxy-server.js';
import { followRuleIdentifiers } from '../kube/reregister.js';
import { createLogger } from '../observability/log.js';
import { RuleHolder } from '../rules/holder.js';
import { agentIdentifiers } from '../rules/identifiers.js';
import { parseRules, type RuleSet } from '../rules/rule-set.js';
import { startAgent, type StartedAgent } from './support/agent.js';
import { makePki } from './support/certs.js';
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
let agent: StartedAgent;
let holder: RuleHolder;
let stopFollowing: () => void;

beforeAll(async () => {
  echo = await startEchoServer('127.0.0.1');
  const pki = makePki();
  hub = await ProxyHub.start({
    agentPort: 0,
    serverPort: 0,
    proxyStrategies: ['destHost'],
    agentTls: { cert: readFileSync(pki.serverCert), key: readFileSync(pki.serverKey), ca: readFileSync(pki.caCert) },
    log,
  });
  holder = new RuleHolder(rules(0));
  const registry = new Registry();
  const resolver = createResolver(
    {
      dnsBindAddress: '127.0.0.1',
      dnsPort: 0,
      dnsUpstream: '127.0.0.1:9',
      dnsBatchedUdp: true,
      dnsForward: false,
      dnsTtl: 1000,
      dnsCacheSize: 100,
      dnsUpstreamTimeout: 500,
      dnsQueryLogSize: 0,
    },
    holder,
    registry,
    log,
  );
  const allowlist = new DialAllowlist({
    resolveForDial: (host) => resolveForDial(resolver, host),
    cidrs: [],
    registry,
  });
  holder.onChange((next) => void allowlist.refresh(next));
  const tls = [`--ca-cert=${pki.caCert}`, `--agent-cert=${pki.clientCert}`, `--agent-key=${pki.clientKey}`];
  agent = startAgent(
    [`localhost:${hub.ports.agent}`],
    [...tls, '--agent-id=spoke-1', '--drain-timeout=5s', '--sync-interval=100ms'],
    {
      registry,
      resolve: allowlist.resolve,
      authorize: allowlist.authorize,
      identifiers: agentIdentifiers('', holder.current),
    },
  );
  stopFollowing = followRuleIdentifiers({ holder, clients: agent.agent.clients, extra: '', log });
  await agent.ready(1, 20_000); // generous: a busy machine
});

afterAll(async () => {
  stopFollowing?.();
  agent?.stop();
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
  it('keeps a stream of dials succeeding while the rule names change 20 times, registering each at once on the same connection', async () => {
    const load = dialLoad(4, () => echoThrough('stable.cluster1'));
    const [conn] = agent.agent.clients.connections();
    const registeredIn: number[] = [];
    for (let g = 1; g <= 20; g++) {
      const t = performance.now();
      holder.replace(rules(g));
      // the new name routes once the agent has registered it
      await waitUntil(
        () => hub.agents().some((a) => !a.draining && a.identifiers.host.includes(`gen${g}.cluster1`)),
        5000,
        `gen${g} registered`,
      );
      registeredIn.push(performance.now() - t);
      await echoThrough(`gen${g}.cluster1`);
    }
    const { ok, failures } = await load.stop();
    expect(failures).toEqual([]);
    expect(ok).toBeGreaterThan(40);
    expect(Math.max(...registeredIn)).toBeLessThan(1000);
    // one connection all along; the streams of the names gone drained and closed: the agent's own,
    // stable.cluster1's and gen20's are left
    expect(agent.agent.clients.connections()).toEqual([conn]);
    await waitUntil(() => hub.agents().length === 3, 10_000, 'old streams to close');
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
