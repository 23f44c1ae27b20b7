// Rules edits under load behind the real Go proxy-server (destHost, as cluster-proxy runs it), once per
// ANP release found (release-0.30, v0.36.0: test/support/go-proxy-server.ts): a DIAL_REQ every few ms
// to a stable name while the rules change, each edit adding a name and retiring the one added ten edits
// before. No dial may fail or go unanswered, every new name must route to the agent once registered,
// and the Go server must not log "This should not happen": its storage keeps each
// name's streams in a list and expects the first to go last, so the agent never hands a name from one
// stream to another. Skipped with a note without the binaries.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dialThroughProxy } from '../client/dial.js';
import { parseRules, type RuleSet } from '../rules/rule-set.js';
import { makePki, type TestPki } from './support/certs.js';
import { startRulesAgent, type RulesAgent } from './support/rules-agent.js';
import { anpReleases, GoServer, type AnpRelease } from './support/go-proxy-server.js';
import { skipNote } from './support/skips.js';
import { dialLoad, echoRoundTrip, sha256, startEchoServer, type Target } from './support/targets.js';
import { waitUntilAsync } from './support/wait.js';

const { found, missing } = anpReleases();
for (const note of missing) skipNote('reregister-go', note);
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
    let spoke: RulesAgent;

    beforeAll(async () => {
      pki = makePki();
      echo = await startEchoServer();
      // The frontend on a Unix socket (plaintext, as kube-apiserver's egress reaches it): no TLS
      // handshake per dial, so a few clients make a DIAL_REQ every few milliseconds.
      udsDir = mkdtempSync(join(tmpdir(), 'spoke-edits-'));
      server = await GoServer.create(release.dir, 'grpc', 'destHost', 'go-edits', { uds: join(udsDir, 'proxy.sock') });
      await server.start(pki);
      const [cert, key] = pki.issue('edits-agent', { client: true });
      spoke = startRulesAgent(
        `127.0.0.1:${server.ports.agent}`,
        [`--ca-cert=${pki.caCert}`, `--agent-cert=${cert}`, `--agent-key=${key}`, '--agent-id=spoke-edits'],
        rules(0),
      );
      await spoke.agent.ready(1, 20_000);
    });

    afterAll(async () => {
      spoke?.stop();
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

    it('loses no dial, leaves none unanswered, routes each new name once registered, and the server never sees a name change streams', async () => {
      const from = server.log.length;
      const load = dialLoad(12, () => echoThrough('stable.cluster1'));
      const probes: Promise<void>[] = [];
      for (let g = 1; g <= 30; g++) {
        // Paced by events, not the clock: a few dials of the load between edits, and at most two edits
        // in flight (each name lives ten edits, so it is registered well before it is retired).
        await load.succeeded(15 * g);
        if (g > 2) await probes[g - 3];
        spoke.holder.replace(rules(g));
        // Each new name, dialled until it routes to the agent ("No agent available" until then).
        probes.push(
          waitUntilAsync(
            async () => {
              try {
                await echoThrough(`gen${g}.cluster1`, 2000);
                return true;
              } catch (err) {
                if (!/No agent available/.test((err as Error).message)) throw err;
                return false;
              }
            },
            30_000,
            `gen${g}.cluster1 to route to the agent`,
            0,
          ),
        );
      }
      await Promise.all(probes);
      const { failures } = await load.stop();
      expect(failures).toEqual([]);
      expect(server.lines(/should not happen/, from)).toEqual([]);
      // A DIAL_RSP after the frontend gave up on it would mean a dial answered too late.
      expect(server.lines(/DIAL_RSP not recognized/, from)).toEqual([]);
      // the streams of the names gone close once the server stops routing to them
      const streams = () => spoke.agent.agent.clients.connections()[0]!.streams().length;
      await expect.poll(streams, { timeout: 10_000 }).toBe(1 + 11); // the agent's own, stable, gen21..gen30
      await expect(echoThrough('gen20.cluster1', 2000)).rejects.toThrow(/No agent available/);
    }, 60_000);
  });
}

for (const release of found) suite(release);
if (found.length === 0)
  describe.skip('rules edits under load behind the Go proxy-server (binaries not found)', () =>
    it('needs the ANP binaries', () => {}));
