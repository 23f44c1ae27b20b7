// cluster-proxy with nothing changed but the image: the agent runs with exactly the args cluster-proxy's
// addon manager renders for the proxy-agent container (chart addon-agent), plus only a health port
// (startPodAgent says why), in an emulated pod (test/support/pod.ts: the service account's token, CA and namespace where the kubelet
// mounts them, /etc/hosts with the pod's hostAliases, /etc/resolv.conf naming the cluster DNS), with
// the hub as cluster-proxy runs it (--proxy-strategies=destHost, mTLS): our hub always, the Go
// proxy-server when its binary is there (test/support/go-proxy-server.ts).
//
// The "cluster" lives on one loopback /24 per run: the API server on :443 (what kubernetes.default.svc
// answers), a Service behind web.default.svc, one no rule exposes (db.default.svc), and the cluster DNS
// on :53. The API server is a real kube-apiserver when its binaries are there (test/support/
// kube-apiserver.ts: RBAC with cluster-proxy's own Role from manifests/cluster-proxy, a ServiceAccount
// token from the TokenRequest API), else test/support/fake-apiserver.ts over TLS, which serves what the
// agent uses (list and watch one ConfigMap with a bearer token) and says so in the scenario titles.
import { Resolver } from 'node:dns/promises';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dialThroughProxy, type DialOptions } from '../client/dial.js';
import { ProxyHub } from '../hub/proxy-server.js';
import { parseFlags } from '../flags/flags.js';
import { defaultRulesConfigmap, kubeFlags } from '../kube/options.js';
import { startKubeSources } from '../kube/sources.js';
import { kubeApiClient } from '../kube/config.js';
import { RuleHolder } from '../rules/holder.js';
import { serviceProxyHost } from '../rules/naming.js';
import { rulesFromFlags } from '../rules/from-flags.js';
import { makePki, type TestPki, hubTls } from './support/certs.js';
import { startTestUpstream, type TestUpstream } from './support/dns-upstream.js';
import { FakeApiServer } from './support/fake-apiserver.js';
import { anpBinDir, GoServer } from './support/go-proxy-server.js';
import { kubeBinariesMissing, startKubeApiServer } from './support/kube-apiserver.js';
import { emulatedPod, podProblem, type Pod } from './support/pod.js';
import { repoRoot, run, type Child } from './support/processes.js';
import { missingBinariesNote } from './support/reference-bins.js';
import { skipNote } from './support/skips.js';
import { startEchoServer, startHttpServer, unusedPort, type Target } from './support/targets.js';
import { waitUntil, waitUntilAsync } from './support/wait.js';

const cluster = 'cluster1';
const namespace = 'open-cluster-management-cluster-proxy';
const proxyHost = serviceProxyHost(cluster);
const identifiers = `host=${proxyHost}&host=${cluster}&host=${cluster}.${namespace}`;
const subnet = `127.${100 + Math.floor(Math.random() * 150)}.${Math.floor(Math.random() * 250)}`;
const ip = { api: `${subnet}.1`, web: `${subnet}.2`, db: `${subnet}.3`, dns: `${subnet}.53` };

const problem = podProblem();
const anp = anpBinDir();

/** The cluster's API server as the test drives it: what the pod's service account holds, and the rules ConfigMap. */
interface ClusterApi {
  token: string;
  caCert: string | Buffer;
  /** Creates or replaces spoke-agent-rules in the agent's namespace; undefined deletes it. */
  setRules(rulesYaml: string | undefined): Promise<void>;
  close(): Promise<void>;
}

const kubeMissing = kubeBinariesMissing();
if (kubeMissing) skipNote('cluster-proxy', `a real kube-apiserver (the fake API server instead): ${kubeMissing}`);

/** A real kube-apiserver on ip.api:443 with cluster-proxy's namespace, ServiceAccount and RBAC (its Role and RoleBinding as rendered). */
async function realApi(): Promise<ClusterApi> {
  const kube = await startKubeApiServer({ host: ip.api, port: 443 });
  const kubectl = async (args: string[], input?: string) => {
    const r = await kube.kubectl('admin', args, input);
    if (r.code !== 0) throw new Error(`kubectl ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  try {
    await kubectl(['create', 'namespace', namespace]);
    await kubectl(['-n', namespace, 'create', 'serviceaccount', 'cluster-proxy']);
    const rendered = readFileSync(join(repoRoot, 'manifests/cluster-proxy/rendered-proxy-agent.yaml'), 'utf8').split(
      /^---$/m,
    );
    await kubectl(
      ['apply', '-f', '-'],
      rendered.filter((doc) => /^kind: (Role|RoleBinding)$/m.test(doc)).join('\n---\n'),
    );
    const token = (await kubectl(['-n', namespace, 'create', 'token', 'cluster-proxy', '--duration=1h'])).trim();
    return {
      token,
      caCert: kube.servingCa.cert,
      setRules: async (rulesYaml) => {
        if (rulesYaml === undefined)
          await kubectl(['-n', namespace, 'delete', 'configmap', 'spoke-agent-rules', '--ignore-not-found']);
        else
          await kubectl([
            '-n',
            namespace,
            'create',
            'configmap',
            'spoke-agent-rules',
            `--from-literal=rules.yaml=${rulesYaml}`,
          ]);
      },
      close: () => kube.close(),
    };
  } catch (err) {
    await kube.close();
    throw err;
  }
}

/** The stand-in, over TLS on ip.api:443 with a certificate for kubernetes.default.svc. */
async function fakeApi(): Promise<ClusterApi> {
  const [cert, key] = pki.issue('kube-apiserver', {
    serverNames: [ip.api, 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local'],
  });
  const fake = await FakeApiServer.start({
    host: ip.api,
    port: 443,
    tls: { cert: readFileSync(cert), key: readFileSync(key) },
  });
  return {
    token: fake.token,
    caCert: readFileSync(pki.caCert),
    setRules: async (rulesYaml) =>
      rulesYaml === undefined
        ? fake.delete('configmaps', namespace, 'spoke-agent-rules')
        : fake.configMap(namespace, 'spoke-agent-rules', { 'rules.yaml': rulesYaml }),
    close: () => fake.close(),
  };
}

/** What the hub side offers a test: where agents connect, and a client dial through it. */
interface Hub {
  agentPort: number;
  dial(address: string): Promise<Duplex>;
  close(): Promise<void>;
}

let pki: TestPki;
let api: ClusterApi;
let upstream: TestUpstream;
let web: Target;
let db: Target;
let serviceProxy: Target;
let pod: Pod;

beforeAll(async () => {
  if (problem) return;
  pki = makePki();
  api = kubeMissing ? await fakeApi() : await realApi();
  upstream = await startTestUpstream(
    {
      'kubernetes.default.svc.cluster.local': [{ type: 1, address: ip.api }],
      'web.default.svc.cluster.local': [{ type: 1, address: ip.web }],
      'db.default.svc.cluster.local': [{ type: 1, address: ip.db }],
    },
    { address: ip.dns, port: 53 },
  );
  [web, db, serviceProxy] = await Promise.all([
    startHttpServer(ip.web),
    startEchoServer(ip.db),
    startHttpServer('127.0.0.1'),
  ]);
  pod = emulatedPod({
    hostAliases: { [proxyHost]: '127.0.0.1' },
    nameserver: ip.dns,
    namespace,
    serviceAccount: { token: api.token, caCert: api.caCert },
    // cluster-proxy's Secret volumes: the hub's CA and the agent's client certificate.
    etcFiles: {
      '/etc/ca/ca.crt': readFileSync(pki.caCert),
      '/etc/tls/tls.crt': readFileSync(pki.clientCert),
      '/etc/tls/tls.key': readFileSync(pki.clientKey),
    },
  });
}, 180_000);

afterAll(async () => {
  pod?.remove();
  await Promise.all([api?.close(), upstream?.close(), web?.close(), db?.close(), serviceProxy?.close()]);
});

/**
 * The agent as cluster-proxy renders its container: command /proxy-agent (the image's; from source
 * here), these args, env ROOT_CA_CERT only (no POD_NAMESPACE), KUBERNETES_SERVICE_* as the kubelet sets.
 * One flag is appended, as ManagedProxyConfiguration spec.proxyAgent.additionalArgs would append it:
 * --health-server-port, because the suite runs the README's `npm start` in parallel, which holds the
 * default 8093 (test/manifests.test.ts checks cluster-proxy's rendering keeps 8093). The DNS server
 * takes its default port; when another process holds 5353 (that same `npm start`'s demo), the agent
 * refuses to start, and the test says so and starts it again with --dns-port.
 */
async function startPodAgent(hub: Hub): Promise<{ agent: Child; healthPort: number; dnsPort: number }> {
  const rendered = [
    `--proxy-server-host=127.0.0.1`,
    `--proxy-server-port=${hub.agentPort}`,
    `--agent-identifiers=${identifiers}`,
    '--ca-cert=/etc/ca/ca.crt',
    '--agent-cert=/etc/tls/tls.crt',
    '--agent-key=/etc/tls/tls.key',
  ];
  const env = {
    PATH: process.env.PATH,
    ROOT_CA_CERT: '/etc/ca/ca.crt',
    KUBERNETES_SERVICE_HOST: ip.api,
    KUBERNETES_SERVICE_PORT: '443',
  };
  const healthPort = await unusedPort();
  for (let dnsPort = 5353; ; dnsPort = await unusedPort()) {
    const additionalArgs = [
      `--health-server-port=${healthPort}`,
      '--health-server-host=127.0.0.1',
      ...(dnsPort === 5353 ? [] : [`--dns-port=${dnsPort}`]),
    ];
    const [command, args] = pod.command([
      process.execPath,
      '--import',
      'tsx',
      'cmd/main.ts',
      ...rendered,
      ...additionalArgs,
    ]);
    const agent = run(command, args, { cwd: repoRoot, env });
    const started = await Promise.race([
      agent.waitFor(/connected to proxy-server/, 60_000).then(() => true),
      agent.exited.then(() => false),
    ]);
    if (started) return { agent, healthPort, dnsPort };
    if (dnsPort !== 5353 || !/DNS server: .*Address already in use/.test(agent.stderr()))
      throw new Error(`the agent exited:\n${agent.stdout()}\n${agent.stderr()}`);
    console.warn(
      'cluster-proxy.test.ts: 127.0.0.1:5353 is taken on this machine: starting the agent again with --dns-port as an additionalArgs entry',
    );
  }
}

/** An HTTP/1.1 GET over an open connection; resolves with the whole response once the server closes. */
function httpGet(conn: Duplex, path: string, headers: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    conn.on('data', (c: Buffer) => (text += c.toString()));
    conn.on('end', () => resolve(text));
    conn.on('close', () => resolve(text));
    conn.on('error', reject);
    const lines = [
      `GET ${path} HTTP/1.1`,
      'Host: x',
      'Connection: close',
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    ];
    conn.write(`${lines.join('\r\n')}\r\n\r\n`);
  });
}

/** TLS to the API server over a tunnelled connection, verified against the cluster's CA as kubernetes.default.svc. */
function tlsToApiServer(conn: Duplex): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ socket: conn, servername: 'kubernetes.default.svc', ca: api.caCert }, () =>
      resolve(socket),
    );
    socket.once('error', reject);
  });
}

async function dialFails(hub: Hub, address: string): Promise<string> {
  try {
    (await hub.dial(address)).destroy();
  } catch (err) {
    return (err as Error).message;
  }
  throw new Error(`dial ${address} unexpectedly succeeded`);
}

function scenario(label: string, skipped: string | undefined, startHub: () => Promise<Hub>) {
  if (skipped !== undefined) skipNote('cluster-proxy', skipped);
  describe.skipIf(skipped !== undefined)(
    skipped === undefined
      ? `${label}, with ${kubeMissing ? `the fake API server (a real one is ${kubeMissing})` : 'a real kube-apiserver'}`
      : `${label} (skipped: ${skipped})`,
    () => {
      let hub: Hub;
      let agent: Child;
      let healthPort = 0;
      let dnsPort = 0;

      beforeAll(async () => {
        await api.setRules(undefined); // absent at start: created below
        hub = await startHub();
        ({ agent, healthPort, dnsPort } = await startPodAgent(hub));
      }, 60_000);

      afterAll(async () => {
        agent?.kill('SIGKILL');
        await hub?.close();
      });

      it('derives the cluster and its namespace from the identifiers, logs why, and is ready', async () => {
        const logs = agent.stdout();
        expect(logs).toMatch(
          new RegExp(
            `"flag":"--cluster-name","value":"${cluster}","from":"--agent-identifiers: host=${cluster} is the cluster whose service-proxy host host=${proxyHost} is listed`,
          ),
        );
        expect(logs).toContain(
          `"flag":"--agent-namespace","value":"${namespace}","from":"--agent-identifiers: host=${cluster}.${namespace} is <cluster>.<namespace>"`,
        );
        expect(logs).toContain(`"configmap":"${namespace}/spoke-agent-rules"`);
        expect((await fetch(`http://127.0.0.1:${healthPort}/readyz`)).status).toBe(200); // what addon-agent polls before renewing its lease
      });

      it('reaches the API server as cluster1:443 and cluster1.<namespace>:443 (no ExternalName Service), over TLS with a token', async () => {
        for (const name of [cluster, `${cluster}.${namespace}`]) {
          const conn = await tlsToApiServer(await hub.dial(`${name}:443`));
          const response = await httpGet(conn, `/api/v1/namespaces/${namespace}/configmaps`, {
            Authorization: `Bearer ${api.token}`,
          });
          expect(response, name).toMatch(/^HTTP\/1.1 200 /);
          expect(response, name).toContain('"kind":"ConfigMapList"');
        }
      });

      it("reaches the service-proxy sidecar by its hostAliases name, through the pod's /etc/hosts", async () => {
        expect(await httpGet(await hub.dial(`${proxyHost}:${serviceProxy.port}`), '/service-proxy')).toContain(
          'hello from /service-proxy',
        );
      });

      it('serves a Service once spoke-agent-rules exposes it: the tunnel, the identifiers, and the DNS server on its default port', async () => {
        const address = `web.default.${cluster}:${web.port}`;
        await dialFails(hub, address);
        await api.setRules('expose: [default/web]\n');
        let reply = '';
        await waitUntilAsync(
          async () => {
            reply = await hub.dial(address).then(
              (c) => httpGet(c, '/exposed'),
              () => '',
            );
            return reply !== '';
          },
          20_000,
          `${address} through the hub`,
        );
        expect(reply).toContain('hello from /exposed');
        const resolver = new Resolver({ timeout: 10_000, tries: 1 });
        resolver.setServers([`127.0.0.1:${dnsPort}`]);
        expect(await resolver.resolve4(`web.default.${cluster}`)).toEqual([ip.web]);
        expect(await resolver.resolve4(cluster)).toEqual([ip.api]);
      });

      it('reaches nothing else: names no rule serves, other Services, addresses', async () => {
        await dialFails(hub, `db.default.${cluster}:${db.port}`);
        await dialFails(hub, `db.default.svc.cluster.local:${db.port}`);
        await dialFails(hub, `${ip.db}:${db.port}`);
        await dialFails(hub, `127.0.0.1:${healthPort}`);
        expect(db.accepted()).toBe(0);
      });

      it('drains on SIGTERM: an open connection finishes, then the agent exits 0 well inside the 40 s grace period', async () => {
        const conn = await hub.dial(`web.default.${cluster}:${web.port}`);
        agent.kill('SIGTERM');
        await agent.waitFor(/draining/, 20_000);
        expect(await httpGet(conn, '/during-drain')).toContain('hello from /during-drain');
        const { code } = await agent.exited;
        const output = agent.stdout() + agent.stderr();
        expect(code, output).toBe(0);
        // It exited once the connection finished, not at --drain-timeout (30 s, inside the 40 s grace).
        expect(output).not.toMatch(/retirement timed out/);
      });
    },
  );
}

const serverTls = () => hubTls(pki);
const clientTls = (): Pick<DialOptions, 'ca' | 'cert' | 'key'> => ({
  ca: readFileSync(pki.caCert),
  cert: readFileSync(pki.clientCert),
  key: readFileSync(pki.clientKey),
});

scenario('in an emulated cluster-proxy pod, behind our hub (destHost)', problem, async () => {
  const hub = await ProxyHub.start({
    agentPort: 0,
    serverPort: 0,
    proxyStrategies: ['destHost'],
    agentTls: serverTls(),
    frontendTls: serverTls(),
  });
  return {
    agentPort: hub.ports.agent,
    dial: (address) =>
      dialThroughProxy({
        mode: 'grpc',
        proxyHost: '127.0.0.1',
        proxyPort: hub.ports.server!,
        address,
        timeoutMs: 5000,
        ...clientTls(),
      }),
    close: () => hub.close(),
  };
});

scenario(
  'in an emulated cluster-proxy pod, behind the Go proxy-server (--proxy-strategies=destHost)',
  problem ?? (anp === undefined ? missingBinariesNote('ANP_BIN_DIR', 'anp', ['proxy-server']) : undefined),
  async () => {
    const server = await GoServer.create(anp!, 'grpc', 'destHost', 'cluster-proxy-hub');
    await server.start(pki);
    return {
      agentPort: server.ports.agent,
      dial: (address) =>
        dialThroughProxy({
          mode: 'grpc',
          proxyHost: '127.0.0.1',
          proxyPort: server.ports.server,
          address,
          timeoutMs: 5000,
          ...clientTls(),
        }),
      close: () => server.stop(),
    };
  },
);

describe('the rules ConfigMap with no flag', () => {
  it("is spoke-agent-rules in the agent's namespace, in a pod with rules only", () => {
    const pod = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };
    expect(defaultRulesConfigmap({ clusterName: 'c1', agentNamespace: 'ns' }, pod)).toBe('ns/spoke-agent-rules');
    expect(defaultRulesConfigmap({ clusterName: 'c1', agentNamespace: 'ns' }, {})).toBe('');
    expect(defaultRulesConfigmap({ clusterName: '', agentNamespace: 'ns' }, pod)).toBe('');
    expect(defaultRulesConfigmap({ clusterName: 'c1', agentNamespace: '' }, pod)).toBe('');
  });

  it('forbidden: one clear warning, the agent carries on, and picks the rules up once RBAC allows', async () => {
    const fake = await FakeApiServer.start();
    const lines: Array<{ level: number; msg: string }> = [];
    const log = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const path = '/api/v1/namespaces/ns/configmaps';
    fake.forbidden.add(path);
    const ruleFlags = {
      clusterName: 'c1',
      agentNamespace: 'ns',
      clusterDomain: 'cluster.local',
      expose: [],
      rulesFile: '',
      nodeName: '',
      nodeIps: [],
    };
    const initial = rulesFromFlags(ruleFlags);
    if (!initial.ok) throw new Error(initial.errors.join());
    const holder = new RuleHolder(initial.value);
    const { values } = parseFlags(kubeFlags, [
      `--kubeconfig=${fake.kubeconfigPath}`,
      '--rules-configmap=ns/spoke-agent-rules',
    ]);
    const stop = startKubeSources({
      kube: values,
      ruleFlags,
      holder,
      log,
      registry: new Registry(),
      client: await kubeApiClient(fake.kubeconfigPath),
      backoff: { initialMs: 20, capMs: 50 },
    });
    try {
      await waitUntil(
        () => fake.requests.filter((r) => r.startsWith(`GET ${path}`)).length >= 5,
        10_000,
        'five refused lists',
      );
      const warnings = lines.filter((l) => l.level >= 40);
      expect(warnings.map((w) => w.msg)).toEqual([
        expect.stringMatching(
          /^forbidden to list and watch \/api\/v1\/namespaces\/ns\/configmaps: carrying on without it/,
        ),
      ]);
      expect(holder.current.hosts()).toEqual(['c1', 'c1.ns']); // still serving
      fake.forbidden.delete(path);
      fake.configMap('ns', 'spoke-agent-rules', { 'rules.yaml': 'expose: [default/web]' });
      await waitUntil(() => holder.current.match('web.default.c1') !== undefined, 10_000, 'the rules once allowed');
    } finally {
      stop();
      await fake.close();
    }
  });
});
