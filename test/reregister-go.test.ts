// Rules edits under load behind the real Go proxy-server (destHost, as cluster-proxy runs it), once per
// ANP release found (release-0.30, v0.36.0: test/support/go-proxy-server.ts): a DIAL_REQ every few ms
// to a stable name while the rules change every 100 ms, each edit adding a name and retiring the one
// added a second before. No dial may fail or go unanswered, every new name must route to the agent
// within a second, and the Go server must not log "This should not happen": its storage keeps each
// name's streams in a list and expects the first to go last, so the agent never hands a name from one
// stream to another. Skipped with a note without the binaries.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DialAllowlist } from '../dial-policy/allowlist.js';
import { dialThroughProxy } from '../client/dial.js';
import { resolveForDial } from '../dial-policy/resolve.js';
import { createResolver } from '../dns/setup.js';
import { followRuleIdentifiers } from '../kube/reregister.js';
import { createLogger } from '../observability/log.js';
import { RuleHolder } from '../rules/holder.js';
import { agentIdentifiers } from '../rules/identifiers.js';
import { parseRules, type RuleSet } from '../rules/rule-set.js';
import { startAgent, type StartedAgent } from './support/agent.js';
import { makePki, type TestPki } from './support/certs.js';
import { anpReleases, GoServer, type AnpRelease } from './support/go-proxy-server.js';
import { dialLoad, echoRoundTrip, sha256, startEchoServer, type Target } from './support/targets.js';

const { found, missing } = anpReleases();
for (const note of missing) console.warn(`reregister-go: ${note}`);
const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
const naming = { cluster: 'cluster1', agentNamespace: '', clusterDomain: 'cluster.test' };

/** The stable name and the names of edits g-9..g: each lives a second at one edit per 100 ms. */
function rules(g: number): RuleSet {
  const names = ['stable.cluster1', ...Array.from({ length: Math.min(g, 10) }, (_, i) => `gen${g - i}.cluster1`)];
  const r = parseRules({
    naming,
    file: { origin: 'cm', content: `static: [${names.map((n) => `{name: ${n}, target: 127.0.0.1}`).join(', ')}]` },
  });
  if (!r.ok) throw new Error(r.errors.join());
  return r.value;
}

function suite(release: AnpRelease): void {
  describe(`rules edits under load behind the Go proxy-server ${release.name}`, () => {
    let pki: TestPki;
    let server: GoServer;
    let udsDir: string;
    let echo: Target;
    let agent: StartedAgent;
    let holder: RuleHolder;
    let stopFollowing: () => void;

    beforeAll(async () => {
      pki = makePki();
      echo = await startEchoServer();
      // The frontend on a Unix socket (plaintext, as kube-apiserver's egress reaches it): no TLS
      // handshake per dial, so a few clients make a DIAL_REQ every few milliseconds.
      udsDir = mkdtempSync(join(tmpdir(), 'spoke-edits-'));
      server = await GoServer.create(release.dir, 'grpc', 'destHost', 'go-edits', { uds: join(udsDir, 'proxy.sock') });
      await server.start(pki);
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
      const [cert, key] = pki.issue('edits-agent', { client: true });
      agent = startAgent(
        [`127.0.0.1:${server.ports.agent}`],
        [`--ca-cert=${pki.caCert}`, `--agent-cert=${cert}`, `--agent-key=${key}`, '--agent-id=spoke-edits'],
        {
          registry,
          resolve: allowlist.resolve,
          authorize: allowlist.authorize,
          identifiers: agentIdentifiers('', holder.current),
        },
      );
      stopFollowing = followRuleIdentifiers({ holder, clients: agent.agent.clients, extra: '', log });
      await agent.ready(1, 20_000);
    });

    afterAll(async () => {
      stopFollowing?.();
      agent?.stop();
      await server?.stop();
      await echo?.close();
      rmSync(udsDir, { recursive: true, force: true });
    });

    const echoThrough = async (host: string, timeoutMs = 10_000) => {
      const conn = await dialThroughProxy({
        mode: 'grpc',
        proxyHost: '',
        proxyPort: 0,
        proxyUds: server.uds,
        address: `${host}:${echo.port}`,
        timeoutMs,
      });
      try {
        expect(await echoRoundTrip(conn, Buffer.from(host))).toBe(sha256(host));
      } finally {
        conn.destroy();
      }
    };

    it('loses no dial, leaves none unanswered, registers each edit within 1 s, and the server never sees a name change streams', async () => {
      const from = server.log.length;
      const load = dialLoad(12, () => echoThrough('stable.cluster1'));
      const registeredIn: number[] = [];
      const probes: Promise<void>[] = [];
      const started = performance.now();
      for (let g = 1; g <= 30; g++) {
        const editedAt = performance.now();
        holder.replace(rules(g));
        // Each new name, dialled until it routes to the agent ("No agent available" until then).
        probes.push(
          (async () => {
            for (;;) {
              try {
                await echoThrough(`gen${g}.cluster1`, 2000);
                registeredIn.push(performance.now() - editedAt);
                return;
              } catch (err) {
                if (!/No agent available/.test((err as Error).message) || performance.now() - editedAt > 1000)
                  throw err;
              }
            }
          })(),
        );
        await new Promise((r) => setTimeout(r, Math.max(0, started + g * 100 - performance.now())));
      }
      await Promise.all(probes);
      const { ok, failures } = await load.stop();
      const seconds = (performance.now() - started) / 1000;
      expect(failures).toEqual([]);
      console.log(
        `reregister-go ${release.name}: ${ok} dials in ${seconds.toFixed(1)} s (${(ok / seconds).toFixed(0)}/s), new names routed after ${Math.min(...registeredIn).toFixed(0)}-${Math.max(...registeredIn).toFixed(0)} ms`,
      );
      expect(ok / seconds).toBeGreaterThan(50); // a DIAL_REQ every few ms here (140-180 a second), every 20 ms at worst on a loaded machine
      expect(registeredIn).toHaveLength(30);
      expect(Math.max(...registeredIn)).toBeLessThan(1000);
      expect(server.lines(/should not happen/, from)).toEqual([]);
      // A DIAL_RSP after the frontend gave up on it would mean a dial answered too late.
      expect(server.lines(/DIAL_RSP not recognized/, from)).toEqual([]);
      // the streams of the names gone close once the server stops routing to them
      const streams = () => agent.agent.clients.connections()[0]!.registrations().length;
      await expect.poll(streams, { timeout: 10_000 }).toBe(1 + 11); // the agent's own, stable, gen21..gen30
      await expect(echoThrough('gen20.cluster1', 2000)).rejects.toThrow(/No agent available/);
    }, 60_000);
  });
}

for (const release of found) suite(release);
if (found.length === 0)
  describe.skip('rules edits under load behind the Go proxy-server (binaries not found)', () =>
    it('needs the ANP binaries', () => {}));
