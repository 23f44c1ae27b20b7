// --count-server-leases against the real thing: Go v0.36.0 proxy-servers (what cluster-proxy v0.11 pins)
// with --enable-lease-controller publishing their Leases in a real kube-apiserver, behind one random
// load balancer, each with a stale --server-count=1. The agent runs as its command does, with its own
// identity (a service account user) and the RBAC of manifests/lease-counting. Needs the v0.36 binaries
// (ANP_V036_BIN_DIR, else ~/.cache/spoke-agent/anp-v0.36) and kube-apiserver with etcd (KUBE_BIN_DIR,
// else ~/.cache/spoke-agent/kube); skipped with a note without them. Takes about a minute: a stopped
// server's Lease lasts 30 s.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makePki, type TestPki, agentTlsFlags } from './support/certs.js';
import { anpReleases, GoServer, httpText } from './support/go-proxy-server.js';
import { kubeBinariesMissing, startKubeApiServer, type KubeApiServer } from './support/kube-apiserver.js';
import { repoRoot, runCli, type Child } from './support/processes.js';
import { sampleValue } from './support/promql.js';
import { skipNote } from './support/skips.js';
import { TcpBalancer } from './support/tcp-balancer.js';
import { unusedPort } from './support/targets.js';
import { waitUntilAsync } from './support/wait.js';

const v036 = anpReleases().found.find((r) => r.name === 'v0.36.0');
const missing = [
  v036 ? undefined : anpReleases().missing.find((m) => m.startsWith('v0.36')),
  kubeBinariesMissing(),
].filter(Boolean);
for (const note of missing) skipNote('leases', note!);

const agentUser = 'system:serviceaccount:spoke-agent:spoke-agent';
let kube: KubeApiServer;
let pki: TestPki;
let balancer: TcpBalancer;
const servers: GoServer[] = [];
const agents: Child[] = [];

async function startServer(id: string, extraArgs: string[] = []): Promise<GoServer> {
  const server = await GoServer.create(v036!.dir, 'grpc', 'destHost,default', id);
  await server.start(pki, ['--enable-lease-controller', `--kubeconfig=${kube.kubeconfig('admin')}`, ...extraArgs]);
  servers.push(server);
  return server;
}

/** Whether `server` holds an agent stream now (its default backend manager's count). */
async function holds(server: GoServer): Promise<boolean> {
  return (
    (sampleValue(
      await server.metrics().catch(() => ''),
      'konnectivity_network_proxy_server_ready_backends{proxy_strategy="default"}',
    ) ?? 0) >= 1
  );
}

interface Agent {
  child: Child;
  metric(name: string): Promise<number | undefined>;
  metrics(): Promise<string>;
}

async function startAgent(target: number, flags: string[] = []): Promise<Agent> {
  const health = await unusedPort();
  // prettier-ignore
  const child = runCli([
    `--proxy-server-host=127.0.0.1:${target}`,
    ...agentTlsFlags(pki),
    '--count-server-leases',
    `--kubeconfig=${kube.kubeconfig(agentUser)}`,
    '--sync-interval=500ms',
    '--sync-interval-cap=2s',
    '--health-server-host=127.0.0.1',
    `--health-server-port=${health}`,
    '--debug-auth=false',
    '--log-level=debug',
    ...flags,
  ]);
  agents.push(child);
  const metrics = () => httpText(`http://127.0.0.1:${health}/metrics`).catch(() => '');
  const metric = async (name: string) => sampleValue(await metrics(), name);
  await waitUntilAsync(
    async () => (await httpText(`http://127.0.0.1:${health}/readyz`).catch(() => '')) === 'ok',
    30_000,
    `the agent to be ready\n${child.stdout()}${child.stderr()}`,
  );
  return { child, metric, metrics };
}

const known = 'konnectivity_network_proxy_agent_known_server_count';

describe.skipIf(missing.length > 0)(
  'the server count from Leases, against Go v0.36.0 proxy-servers and a real kube-apiserver',
  () => {
    let agent: Agent;

    beforeAll(async () => {
      pki = makePki();
      kube = await startKubeApiServer();
      for (const id of ['s1', 's2', 's3']) await startServer(id);
      balancer = new TcpBalancer(
        servers.map((s) => s.ports.agent),
        'random',
      );
      await balancer.listen();
    }, 120_000);

    afterAll(async () => {
      for (const a of agents) a.kill('SIGKILL');
      await Promise.all(agents.map((a) => a.exited));
      await balancer?.close();
      await Promise.all(servers.map((s) => s.stop()));
      await kube?.close();
    });

    it("without RBAC for Leases: one warning naming the Role, ready by the header's count; the Leases count once the RoleBinding exists", async () => {
      agent = await startAgent(balancer.port);
      // Ready at once (the Go v0.36 agent blocks on the Lease cache), with the header's count.
      expect(await agent.metric(known)).toBe(1);
      await waitUntilAsync(
        async () =>
          /lease_lists_total\{http_response_code="403",reason="Forbidden"\} [1-9]/.test(await agent.metrics()),
        30_000,
        'a refused Lease list',
      );
      const warnings = () =>
        agent.child
          .stdout()
          .split('\n')
          .filter((l) => l.includes('"level":40') && l.includes('leases'));
      expect(warnings()).toHaveLength(1);
      expect(warnings()[0]).toContain(
        'needs a Role in kube-system granting get, list and watch on leases (apiGroup coordination.k8s.io)',
      );
      expect(warnings()[0]).toContain('manifests/lease-counting');

      const rbac = execFileSync('kubectl', ['kustomize', join(repoRoot, 'manifests/lease-counting')], {
        encoding: 'utf8',
      });
      const r = await kube.kubectl('admin', ['apply', '-f', '-'], rbac);
      expect(r.code, r.stderr).toBe(0);
      // Picked up within seconds (refusals are retried every few seconds however long they went on);
      // the deadline only bounds a failure.
      await waitUntilAsync(
        async () => (await agent.metric(known)) === 3,
        60_000,
        'the Lease count after the RoleBinding',
      );
      await waitUntilAsync(
        async () => (await Promise.all(servers.map(holds))).every(Boolean),
        15_000,
        'every server to hold the agent',
      );
      await waitUntilAsync(
        async () => (await agent.metric('konnectivity_network_proxy_agent_open_server_connections')) === 3,
        5000,
        'three connections held',
      );
      expect(warnings()).toHaveLength(1);
      const m = await agent.metrics();
      expect(
        sampleValue(m, 'konnectivity_network_proxy_agent_lease_lists_total{http_response_code="200",reason=""}'),
      ).toBeGreaterThanOrEqual(1);
      expect(
        sampleValue(m, 'konnectivity_network_proxy_agent_lease_watches_total{http_response_code="200",reason=""}'),
      ).toBeGreaterThanOrEqual(1);
      expect(
        sampleValue(m, 'konnectivity_network_proxy_agent_lease_list_latency_seconds_count{http_response_code="200"}'),
      ).toBeGreaterThanOrEqual(1);
    }, 90_000);

    it('holds a fourth server once its Lease counts it (looked for at once: agent/clientset.test.ts)', async () => {
      const s4 = await startServer('s4');
      balancer.setBackends(servers.map((s) => s.ports.agent));
      await waitUntilAsync(() => holds(s4), 30_000, 'the fourth server to hold the agent', 50);
      expect(await agent.metric(known)).toBe(4);
    }, 60_000);

    it('stops counting a killed server once its Lease expires, and does not dial in a tight loop meanwhile', async () => {
      const [, s2] = servers;
      const attempts = async () => {
        const m = await agent.metrics();
        return ['failed', 'duplicate', 'connected'].reduce(
          (n, r) => n + (sampleValue(m, `spoke_agent_server_connect_attempts_total{result="${r}"}`) ?? 0),
          0,
        );
      };
      const before = await attempts();
      await s2!.kill(); // no graceful stop: its Lease stays until it expires (30 s after its last renewal)
      // Counted while its Lease is valid (30 s after its last renewal): the agent keeps looking for it.
      await waitUntilAsync(async () => (await attempts()) > before, 60_000, 'an attempt to find the fourth server');
      expect(await agent.metric(known)).toBe(4);
      await waitUntilAsync(
        async () => (await agent.metric(known)) === 3,
        90_000,
        "the killed server's Lease to expire",
        200,
      );
      const during = (await attempts()) - before;
      // Behind the balancer the agent looks for the fourth server every 0.75-1.75 s (agent/sync-policy.ts),
      // not in a tight loop. The two waits above end within their deadlines (150 s together), so that pace
      // makes at most 200 attempts, however slow the machine; a tight loop, a TLS handshake after another,
      // makes thousands while a Lease expires. (The schedule itself: agent/clientset.test.ts, on a ManualClock.)
      expect(during).toBeLessThanOrEqual(150_000 / 750);
      expect(await agent.metric('konnectivity_network_proxy_agent_open_server_connections')).toBe(3);
    }, 120_000);

    it('--server-count-source: default takes the Leases alone, max the larger of them and the header', async () => {
      const loud = await startServer('s5', ['--server-count=7']);
      const leases = 4; // s1, s3, s4, s5
      const byDefault = await startAgent(loud.ports.agent);
      const byMax = await startAgent(loud.ports.agent, ['--server-count-source=max']);
      await waitUntilAsync(
        async () => (await byDefault.metric(known)) === leases,
        15_000,
        'the default source to count the Leases',
      );
      await waitUntilAsync(async () => (await byMax.metric(known)) === 7, 15_000, 'the max source to take the header');
    }, 60_000);
  },
);
