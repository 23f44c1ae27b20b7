// /debug and /metrics behind delegated authentication, with the fake API server answering
// TokenReview and SubjectAccessReview; and `spoke-agent resolve` beside such an agent, which explains
// its answers through the agent's local socket without a token.
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseFlags } from '../flags/flags.js';
import { kubeFlags } from '../kube/options.js';
import { authGuards } from '../kube/sources.js';
import { kubeApiClient } from '../kube/config.js';
import { HealthServer } from '../observability/health-server.js';
import { createLogger } from '../observability/log.js';
import { FakeApiServer } from './support/fake-apiserver.js';
import { runCli, type Child } from './support/processes.js';
import { unusedPort } from './support/targets.js';

const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
let api: FakeApiServer;
let health: HealthServer;
let base = '';

beforeAll(async () => {
  api = await FakeApiServer.start();
  api.users.set('alice-token', { username: 'alice', groups: ['ops'] });
  api.users.set('bob-token', { username: 'bob' });
  api.users.set('prom-token', { username: 'system:serviceaccount:monitoring:prometheus' });
  api.users.set('carol-token', { username: 'carol' });
  api.allowed.add('alice get /debug/spoke-agent');
  api.allowed.add('carol get /debug/spoke-agent/queries');
  api.users.set('dave-token', { username: 'dave' });
  api.allowed.add('dave get /debug/spoke-agent/dials');
  api.allowed.add('system:serviceaccount:monitoring:prometheus get /metrics');
  const registry = new Registry();
  const { values } = parseFlags(kubeFlags, [
    `--kubeconfig=${api.kubeconfigPath}`,
    '--debug-auth=true',
    '--metrics-auth',
  ]);
  const guards = authGuards({ kube: values, log, registry, client: await kubeApiClient(api.kubeconfigPath), env: {} });
  health = new HealthServer({ host: '127.0.0.1', port: 0, registry, log });
  health.addRoute('/debug/rules', (_req, res) => void res.writeHead(200).end('rules'), guards.debug);
  health.addRoute('/debug/queries', (_req, res) => void res.writeHead(200).end('queries'), guards.queries);
  health.addRoute('/debug/dials', (_req, res) => void res.writeHead(200).end('dials'), guards.dials);
  if (guards.metrics) health.protectMetrics(guards.metrics);
  base = `http://127.0.0.1:${(await health.listen()).port}`;
});

afterAll(async () => {
  await health?.close();
  await api?.close();
});

const get = async (path: string, token?: string) => {
  const res = await fetch(`${base}${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  return { status: res.status, body: await res.text(), challenge: res.headers.get('www-authenticate') };
};

describe('delegated authentication of /debug and /metrics', () => {
  it('answers 401 without a token or with one the API server rejects', async () => {
    expect(await get('/debug/rules')).toMatchObject({ status: 401, challenge: 'Bearer realm="spoke-agent"' });
    expect((await get('/debug/rules', 'forged')).status).toBe(401);
  });

  it('answers 403 to a user without get on --debug-auth-path, 200 to one with it', async () => {
    const bob = await get('/debug/rules', 'bob-token');
    expect(bob.status).toBe(403);
    expect(bob.body).toMatch(/forbidden: User "bob" cannot get path "\/debug\/spoke-agent"/);
    expect(await get('/debug/rules', 'alice-token')).toMatchObject({ status: 200, body: 'rules' });
    const sar = api.requests.filter((r) => r.startsWith('POST /apis/authorization.k8s.io/v1/subjectaccessreviews'));
    expect(sar.length).toBe(2);
    // cached: no new reviews for a repeat
    await get('/debug/rules', 'alice-token');
    expect(
      api.requests.filter((r) => r.startsWith('POST /apis/authorization.k8s.io/v1/subjectaccessreviews')).length,
    ).toBe(2);
  });

  it('guards /debug/queries with a permission of its own: get on --debug-auth-path + /queries', async () => {
    const alice = await get('/debug/queries', 'alice-token');
    expect(alice.status).toBe(403);
    expect(alice.body).toMatch(/forbidden: User "alice" cannot get path "\/debug\/spoke-agent\/queries"/);
    expect(await get('/debug/queries', 'carol-token')).toMatchObject({ status: 200, body: 'queries' });
    expect((await get('/debug/rules', 'carol-token')).status).toBe(403);
    expect((await get('/debug/queries')).status).toBe(401);
  });

  it('guards /debug/dials with a permission of its own too: get on --debug-auth-path + /dials', async () => {
    const carol = await get('/debug/dials', 'carol-token');
    expect(carol.status).toBe(403);
    expect(carol.body).toMatch(/forbidden: User "carol" cannot get path "\/debug\/spoke-agent\/dials"/);
    expect(await get('/debug/dials', 'dave-token')).toMatchObject({ status: 200, body: 'dials' });
    expect((await get('/debug/queries', 'dave-token')).status).toBe(403);
    expect((await get('/debug/dials', 'alice-token')).status).toBe(403);
  });

  it('protects /metrics with get on the non-resource URL /metrics; health probes stay open', async () => {
    expect((await get('/metrics')).status).toBe(401);
    expect((await get('/metrics', 'alice-token')).status).toBe(403);
    const prom = await get('/metrics', 'prom-token');
    expect(prom.status).toBe(200);
    expect(prom.body).toContain('spoke_agent_kube_auth_decisions_total{result="allowed"');
    expect((await get('/healthz')).status).toBe(200);
  });

  it('is off with --debug-auth=auto outside a cluster, and refuses to start when asked for without an API server', () => {
    const auto = parseFlags(kubeFlags, []).values;
    expect(authGuards({ kube: auto, log, registry: new Registry(), client: undefined, env: {} })).toEqual({});
    const forced = parseFlags(kubeFlags, ['--debug-auth=true']).values;
    expect(() => authGuards({ kube: forced, log, registry: new Registry(), client: undefined, env: {} })).toThrow(
      /--debug-auth=true needs --kubeconfig/,
    );
  });
});

describe.runIf(process.platform === 'linux')(
  '`spoke-agent resolve` beside an agent whose /debug needs a token (as in a pod)',
  () => {
    const agents: Child[] = [];
    afterAll(() => {
      for (const a of agents) a.kill('SIGKILL');
    });

    /** The agent CLI with --debug-auth=true (a cluster's default), no hub to reach, and its ports. */
    async function agent(extra: string[]) {
      const [health, dns] = [await unusedPort(), await unusedPort()];
      // prettier-ignore
      const child = runCli([
        '--cluster-name=cluster1',
        '--proxy-server-host=127.0.0.1',
        `--proxy-server-port=${await unusedPort()}`,
        `--kubeconfig=${api.kubeconfigPath}`,
        '--debug-auth=true',
        '--rules-configmap=',
        '--dns-upstream=127.0.0.1:9',
        '--dns-upstream-timeout=200ms',
        `--dns-port=${dns}`,
        `--health-server-port=${health}`,
        '--health-server-host=127.0.0.1',
        '--log-format=json',
        ...extra,
      ]);
      agents.push(child);
      await child.waitFor(/"msg":"spoke-agent started"/, 60_000);
      return { child, health, dns };
    }
    const resolve = async (a: { health: number; dns: number }) => {
      const r = runCli(['resolve', 'cluster1', `--dns-port=${a.dns}`, `--health-server-port=${a.health}`]);
      await r.exited;
      return r.stdout();
    };

    it('explains the answer over the local socket, while /debug over TCP still answers 401 without a token', async () => {
      const a = await agent([]);
      expect(a.child.stdout()).toMatch(
        /"socket":"@spoke-agent-health-\d+".*"msg":"health server also on a local socket/,
      );
      expect(await resolve(a)).toMatch(
        /^;; explanation from the agent's socket @spoke-agent-health-\d+: rule --cluster-name \(cluster\) -> kubernetes\.default\.svc\.cluster\.local$/m,
      );
      expect((await fetch(`http://127.0.0.1:${a.health}/debug/resolve?name=cluster1`)).status).toBe(401);
    });

    it('with --debug-socket=false, says that /debug wants a token and where to run resolve instead', async () => {
      const a = await agent(['--debug-socket=false']);
      expect(await resolve(a)).toMatch(
        /^;; no explanation: http:\/\/127\.0\.0\.1:\d+\/debug\/resolve\?name=cluster1&type=A answered 401: Unauthorized: send a bearer token .*\(run resolve inside the agent's pod/m,
      );
    });
  },
);
