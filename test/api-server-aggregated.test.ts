// The dns.spoke-agent.io API behind a real kube-apiserver's aggregation layer, all on loopback: the
// agent (the real command) serves the API, the manifests' component (APIService, RBAC) is applied
// to the API server with its Service made an ExternalName for 127.0.0.1, and kubectl reaches the
// agent through the aggregator as users with and without the ClusterRole. Skipped, with a note,
// where the kube-apiserver and etcd binaries are absent (README.md, "Tests against a real
// kube-apiserver"). One API server for the whole file.
import { writeFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { group, version } from '../apiserver/discovery.js';
import { createCa } from '../hub/ephemeral-pki.js';
import { startExplainedDns, type ExplainedDns } from './support/explained-dns.js';
import { kubeBinariesMissing, startKubeApiServer, type KubeApiServer } from './support/kube-apiserver.js';
import { renderWithComponent, type Obj } from './support/kustomize.js';
import { runCli, type Child } from './support/processes.js';
import { unusedPort } from './support/targets.js';
import { createLogger } from '../observability/log.js';

const missing = kubeBinariesMissing();
if (missing) console.warn(`api-server-aggregated: ${missing}`);

const base = `/apis/${group}/${version}`;
const apiServiceName = `${version}.${group}`;
let kube: KubeApiServer;
let dnsStack: ExplainedDns;
let agent: Child | undefined;
let apiPort = 0;
const servingCa = createCa('spoke-agent-api-ca');

describe.skipIf(missing)('dns.spoke-agent.io through a real kube-apiserver\'s aggregator', () => {
  beforeAll(async () => {
    kube = await startKubeApiServer();
    dnsStack = await startExplainedDns(createLogger('silent'));
    apiPort = await unusedPort();
    // What the component declares, pointed at the agent on loopback: the Service becomes an
    // ExternalName (the aggregator dials <externalName>:<APIService port>), the CA bundle is ours.
    const objects = renderWithComponent('dns-api')
      .filter((o) => ['Namespace', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'RoleBinding', 'Role', 'APIService'].includes(o.kind) || o.metadata.name === 'spoke-agent-api')
      .map((o) => {
        if (o.kind === 'APIService') return { ...o, spec: { ...o.spec, caBundle: Buffer.from(servingCa.cert).toString('base64'), service: { ...o.spec.service, port: apiPort } } };
        if (o.kind === 'Service') return { ...o, spec: { type: 'ExternalName', externalName: '127.0.0.1' } };
        return o;
      });
    const applied = await kube.kubectl('admin', ['apply', '-f', '-'], objects.map((o) => stringify(o)).join('---\n'));
    expect(applied.code, applied.stderr).toBe(0);
    const bound = await kube.kubectl('admin', ['create', 'clusterrolebinding', 'alice-dns', '--clusterrole=spoke-agent-dns-debugger', '--user=alice']);
    expect(bound.code, bound.stderr).toBe(0);

    const serving = servingCa.issue('spoke-agent-api', { serverNames: ['spoke-agent-api.spoke-agent.svc', '127.0.0.1'] });
    const cert = join(kube.dir, 'api.crt');
    const key = join(kube.dir, 'api.key');
    writeFileSync(cert, serving.cert);
    writeFileSync(key, serving.key, { mode: 0o600 });
    agent = runCli([
      '--cluster-name=cluster1',
      '--cluster-domain=cluster.test',
      '--expose=default/kubernetes',
      `--dns-upstream=127.0.0.1:${dnsStack.upstream.port}`,
      '--dns-port=0',
      '--health-server-port=0',
      `--kubeconfig=${kube.kubeconfig('system:serviceaccount:spoke-agent:spoke-agent')}`,
      '--debug-auth=false',
      '--log-format=json',
      '--log-level=debug', // each API request is logged with its user and how it was authenticated
      `--api-server-port=${apiPort}`,
      '--api-server-bind-address=127.0.0.1',
      `--api-tls-cert-file=${cert}`,
      `--api-tls-private-key-file=${key}`,
    ]);
    await agent.waitFor(/aggregated API listening/, 30_000);
    // The aggregator checks availability about every 30 s, sooner after a change to the APIService.
    const deadline = Date.now() + 90_000;
    for (;;) {
      const r = await kube.kubectl('admin', ['get', 'apiservice', apiServiceName, '-o', 'jsonpath={.status.conditions[?(@.type=="Available")].status} {.status.conditions[?(@.type=="Available")].message}']);
      if (r.stdout.startsWith('True')) break;
      if (Date.now() > deadline) throw new Error(`APIService not Available within 90 s: ${r.stdout} ${r.stderr}\nagent:\n${agent.stdout().slice(-2000)}`);
      await new Promise((res) => setTimeout(res, 500));
    }
  }, 180_000);

  afterAll(async () => {
    agent?.kill();
    await agent?.exited;
    await dnsStack?.close();
    await kube?.close();
  }, 30_000);

  it('kubectl get --raw of a resolution answers for a user with the ClusterRole', async () => {
    const r = await kube.kubectl('alice', ['get', '--raw', `${base}/resolutions/kubernetes.default.cluster1`]);
    expect(r.code, r.stderr).toBe(0);
    const resolution = JSON.parse(r.stdout) as Obj;
    expect(resolution).toMatchObject({ apiVersion: `${group}/${version}`, kind: 'Resolution', metadata: { name: 'kubernetes.default.cluster1' } });
    expect(resolution.status).toMatchObject({ action: 'rule', rcode: 'NOERROR', addresses: ['127.0.0.1'], cnameChain: ['kubernetes.default.cluster1 -> kubernetes.default.svc.cluster.test'] });
    const aaaa = await kube.kubectl('alice', ['get', '--raw', `${base}/resolutions/cluster1?type=AAAA`]);
    expect(JSON.parse(aaaa.stdout)).toMatchObject({ spec: { type: 'AAAA' } });
    // The agent saw alice, named by the aggregator over its front-proxy certificate.
    const seen = agent!.stdout().split('\n').filter((l) => l.includes('"msg":"API request"')).map((l) => JSON.parse(l) as Obj);
    expect(seen).toContainEqual(expect.objectContaining({ user: 'alice', authentication: 'front-proxy', code: 200, url: `${base}/resolutions/kubernetes.default.cluster1` }));
  });

  it('is 403 for a user without it', async () => {
    const r = await kube.kubectl('bob', ['get', '--raw', `${base}/resolutions/kubernetes.default.cluster1`]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/forbidden/i);
  });

  it('kubectl api-resources lists the group, and kubectl get reads the resources', async () => {
    const r = await kube.kubectl('alice', ['api-resources', `--api-group=${group}`, '-o', 'name']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n').sort()).toEqual([`resolutions.${group}`, `rules.${group}`]);
    const rules = await kube.kubectl('alice', ['get', `rules.${group}`, '-o', 'name']);
    expect(rules.code, rules.stderr).toBe(0);
    expect(rules.stdout).toContain(`rule.${group}/cluster1`);
    const rcode = await kube.kubectl('alice', ['get', `resolutions.${group}`, 'cluster1', '-o', 'jsonpath={.status.rcode} {.status.reason}']);
    expect(rcode.stdout).toMatch(/^NOERROR rule /);
  });

  it('the APIService reports Available', async () => {
    const r = await kube.kubectl('admin', ['get', 'apiservice', apiServiceName, '-o', 'json']);
    const conditions = (JSON.parse(r.stdout) as Obj).status.conditions as Obj[];
    expect(conditions.find((c) => c.type === 'Available')).toMatchObject({ status: 'True' });
  });

  it('on its own port, judges bearer tokens with the real TokenReview and SubjectAccessReview, and trusts no forged header', async () => {
    const call = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const req = https.get({ host: '127.0.0.1', port: apiPort, path: `${base}/resolutions/cluster1`, ca: servingCa.cert, servername: 'spoke-agent-api.spoke-agent.svc', headers, agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        });
        req.on('error', reject);
      });
    expect(await call({ authorization: `Bearer ${kube.token('alice')}` })).toBe(200);
    expect(await call({ authorization: `Bearer ${kube.token('bob')}` })).toBe(403);
    expect(await call({ authorization: 'Bearer not-a-token' })).toBe(401);
    expect(await call({ 'X-Remote-User': 'admin', 'X-Remote-Group': 'system:masters' })).toBe(401);
    // A client certificate from the API server's client CA is a user too (CN, O).
    const admin = kube.clientCa.issue('carol', { client: true, organizations: ['system:masters'] });
    const asCarol = await new Promise<number>((resolve, reject) => {
      const req = https.get({ host: '127.0.0.1', port: apiPort, path: base, ca: servingCa.cert, cert: admin.cert, key: admin.key, agent: false }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      });
      req.on('error', reject);
    });
    expect(asCarol).toBe(200);
  });
});

