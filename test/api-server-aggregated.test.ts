// The dns.spoke-agent.io API behind a real kube-apiserver's aggregation layer, all on loopback: the
// agent (the real command) serves the API, the manifests' component (APIService, RBAC) is applied
// to the API server with its Service made an ExternalName for 127.0.0.1, and kubectl reaches the
// agent through the aggregator as users with and without the ClusterRoles: kubectl explain (OpenAPI
// v3 and v2 as the aggregator merges them), kubectl get's columns, a dig showing up in a running
// kubectl get --watch, and a UID header reaching the real SubjectAccessReview (seen in the API
// server's audit log). Skipped, with a note, where the kube-apiserver and etcd binaries are absent
// (CONTRIBUTING.md, "Reference peers"). One API server for the whole file.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import https from 'node:https';
import { promisify } from 'node:util';
import { Registry } from 'prom-client';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parseAuthenticationConfig } from '../apiserver/authentication.js';
import { group, version } from '../apiserver/discovery.js';
import { ApiServer } from '../apiserver/server.js';
import { kubeApiClient } from '../kube/config.js';
import { apiReviewer } from '../kube/delegated-auth.js';
import { createCa } from '../hub/ephemeral-pki.js';
import { startExplainedDns, type ExplainedDns } from './support/explained-dns.js';
import { kubeBinariesMissing, startKubeApiServer, type KubeApiServer } from './support/kube-apiserver.js';
import { renderWithComponent, type Obj } from './support/kustomize.js';
import { runCli, type Child } from './support/processes.js';
import { skipNote } from './support/skips.js';
import { requestUntilClose, unusedPort } from './support/targets.js';
import { waitUntilAsync } from './support/wait.js';
import { createLogger } from '../observability/log.js';
import { dialThroughProxy } from '../client/dial.js';

const missing = kubeBinariesMissing();
if (missing) skipNote('api-server-aggregated', missing);

const base = `/apis/${group}/${version}`;
const apiServiceName = `${version}.${group}`;
let kube: KubeApiServer;
let dnsStack: ExplainedDns;
let agent: Child | undefined;
let apiPort = 0;
let dnsPort = 0;
let servingFiles: { cert: string; key: string };
const servingCa = createCa('spoke-agent-api-ca');
const agentAccount = 'system:serviceaccount:spoke-agent:spoke-agent';
const log = createLogger('silent');

/** A query from dig to the agent's DNS server, as an operator's or a pod's would be. */
const dig = async (name: string, type: string) =>
  (await promisify(execFile)('dig', ['@127.0.0.1', '-p', String(dnsPort), '+tries=1', '+time=2', name, type])).stdout;

/** The agent's "API request" log lines: what reached it, as whom. */
const agentSaw = () =>
  agent!
    .stdout()
    .split('\n')
    .filter((l) => l.includes('"msg":"API request"'))
    .map((l) => JSON.parse(l) as Obj);

/** Columns of kubectl's table output: the header's, and each row's cells (split where the header's columns start). */
function columns(text: string): { header: string[]; rows: string[][] } {
  const [head = '', ...lines] = text.split('\n').filter((l) => l.trim() !== '');
  const starts = [...head.matchAll(/\S+(?: \S+)*/g)].map((m) => m.index!);
  const cut = (line: string) => starts.map((at, i) => line.slice(at, starts[i + 1]).trim());
  return { header: cut(head), rows: lines.map(cut) };
}

describe.skipIf(missing)("dns.spoke-agent.io through a real kube-apiserver's aggregator", () => {
  beforeAll(async () => {
    kube = await startKubeApiServer();
    dnsStack = await startExplainedDns(createLogger('silent'));
    apiPort = await unusedPort();
    // What the component declares, pointed at the agent on loopback: the Service becomes an
    // ExternalName (the aggregator dials <externalName>:<APIService port>), the CA bundle is ours.
    const objects = renderWithComponent('dns-api')
      .filter(
        (o) =>
          [
            'Namespace',
            'ServiceAccount',
            'ClusterRole',
            'ClusterRoleBinding',
            'RoleBinding',
            'Role',
            'APIService',
          ].includes(o.kind) || o.metadata.name === 'spoke-agent-api',
      )
      .map((o) => {
        if (o.kind === 'APIService')
          return {
            ...o,
            spec: {
              ...o.spec,
              caBundle: Buffer.from(servingCa.cert).toString('base64'),
              service: { ...o.spec.service, port: apiPort },
            },
          };
        if (o.kind === 'Service') return { ...o, spec: { type: 'ExternalName', externalName: '127.0.0.1' } };
        return o;
      });
    const applied = await kube.kubectl('admin', ['apply', '-f', '-'], objects.map((o) => stringify(o)).join('---\n'));
    expect(applied.code, applied.stderr).toBe(0);
    // alice may debug resolutions and rules, carol only read the query log, dave the dial log: separate permissions.
    for (const [name, role, user] of [
      ['alice-dns', 'spoke-agent-dns-debugger', 'alice'],
      ['carol-queries', 'spoke-agent-dns-query-reader', 'carol'],
      ['dave-dials', 'spoke-agent-dial-reader', 'dave'],
    ]) {
      const bound = await kube.kubectl('admin', [
        'create',
        'clusterrolebinding',
        name!,
        `--clusterrole=${role}`,
        `--user=${user}`,
      ]);
      expect(bound.code, bound.stderr).toBe(0);
    }

    const serving = servingCa.issue('spoke-agent-api', {
      serverNames: ['spoke-agent-api.spoke-agent.svc', '127.0.0.1'],
    });
    const cert = join(kube.dir, 'api.crt');
    const key = join(kube.dir, 'api.key');
    writeFileSync(cert, serving.cert);
    writeFileSync(key, serving.key, { mode: 0o600 });
    servingFiles = { cert, key };
    agent = runCli([
      '--cluster-name=cluster1',
      '--cluster-domain=cluster.test',
      '--expose=default/kubernetes',
      `--dns-upstream=127.0.0.1:${dnsStack.upstream.port}`,
      '--dns-port=0',
      '--health-server-port=0',
      `--kubeconfig=${kube.kubeconfig(agentAccount)}`,
      '--debug-auth=false',
      '--log-format=json',
      '--log-level=debug', // each API request is logged with its user and how it was authenticated
      `--api-server-port=${apiPort}`,
      '--api-server-bind-address=127.0.0.1',
      `--api-tls-cert-file=${cert}`,
      `--api-tls-private-key-file=${key}`,
    ]);
    await agent.waitFor(/aggregated API listening/, 30_000);
    dnsPort = Number((await agent.waitFor(/"port":(\d+)[^\n]*DNS server listening/))[1]);
    // The aggregator checks availability about every 30 s, sooner after a change to the APIService.
    const started = agent;
    let last = '';
    await waitUntilAsync(
      async () => {
        const r = await kube.kubectl('admin', [
          'get',
          'apiservice',
          apiServiceName,
          '-o',
          'jsonpath={.status.conditions[?(@.type=="Available")].status} {.status.conditions[?(@.type=="Available")].message}',
        ]);
        last = `${r.stdout} ${r.stderr}`;
        return r.stdout.startsWith('True');
      },
      90_000,
      () => `the APIService to be Available: ${last}\nagent:\n${started.stdout().slice(-2000)}`,
      500,
    );
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
    expect(resolution).toMatchObject({
      apiVersion: `${group}/${version}`,
      kind: 'Resolution',
      metadata: { name: 'kubernetes.default.cluster1' },
    });
    expect(resolution.status).toMatchObject({
      action: 'rule',
      rcode: 'NOERROR',
      addresses: ['127.0.0.1'],
      cnameChain: ['kubernetes.default.cluster1 -> kubernetes.default.svc.cluster.test'],
    });
    const aaaa = await kube.kubectl('alice', ['get', '--raw', `${base}/resolutions/cluster1?type=AAAA`]);
    expect(JSON.parse(aaaa.stdout)).toMatchObject({ spec: { type: 'AAAA' } });
    // The agent saw alice, named by the aggregator over its front-proxy certificate.
    const seen = agent!
      .stdout()
      .split('\n')
      .filter((l) => l.includes('"msg":"API request"'))
      .map((l) => JSON.parse(l) as Obj);
    expect(seen).toContainEqual(
      expect.objectContaining({
        user: 'alice',
        authentication: 'front-proxy',
        code: 200,
        url: `${base}/resolutions/kubernetes.default.cluster1`,
      }),
    );
  });

  it('is 403 for a user without it', async () => {
    const r = await kube.kubectl('bob', ['get', '--raw', `${base}/resolutions/kubernetes.default.cluster1`]);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/forbidden/i);
  });

  it('kubectl api-resources lists the group, and kubectl get reads the resources', async () => {
    const r = await kube.kubectl('alice', ['api-resources', `--api-group=${group}`, '-o', 'name']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim().split('\n').sort()).toEqual([
      `dials.${group}`,
      `queries.${group}`,
      `resolutions.${group}`,
      `rules.${group}`,
    ]);
    const rules = await kube.kubectl('alice', ['get', `rules.${group}`, '-o', 'name']);
    expect(rules.code, rules.stderr).toBe(0);
    expect(rules.stdout).toContain(`rule.${group}/cluster1`);
    const rcode = await kube.kubectl('alice', [
      'get',
      `resolutions.${group}`,
      'cluster1',
      '-o',
      'jsonpath={.status.rcode} {.status.reason}',
    ]);
    expect(rcode.stdout).toMatch(/^NOERROR rule /);
  });

  it('kubectl explain prints every field with its description, from the OpenAPI v3 the aggregator merges, and from v2', async () => {
    // The aggregator fetches a backend's /openapi/v3 when the APIService is added and every minute after.
    let explained = { code: 1, stdout: '', stderr: '' };
    await waitUntilAsync(
      async () => {
        explained = await kube.kubectl('alice', ['explain', `resolutions.${group}`]);
        return explained.code === 0;
      },
      90_000,
      'kubectl explain to find the resource',
    );
    expect(explained.stdout).toMatch(/^GROUP:\s+dns\.spoke-agent\.io$/m);
    expect(explained.stdout).toMatch(/^KIND:\s+Resolution$/m);
    expect(explained.stdout).toMatch(/What the DNS server answers for a name, and why/);
    for (const field of ['apiVersion', 'kind', 'metadata', 'spec', 'status'])
      expect(explained.stdout).toMatch(new RegExp(`^  ${field}\\t<`, 'm'));
    const status = await kube.kubectl('alice', ['explain', `resolutions.${group}.status`]);
    expect(status.code, status.stderr).toBe(0);
    for (const field of ['action', 'addresses', 'cnameChain', 'rcode', 'reason', 'rule', 'target'])
      expect(status.stdout).toMatch(new RegExp(`^  ${field}\\t<`, 'm'));
    expect(status.stdout).toMatch(/What the server does with the name: rule/);
    const rcode = await kube.kubectl('carol', ['explain', `queries.${group}.status.rcode`]);
    expect(rcode.stdout).toMatch(/FIELD: rcode <string>/);
    expect(rcode.stdout).toMatch(/The response code: NOERROR, NXDOMAIN/);
    expect((await kube.kubectl('alice', ['explain', `rules.${group}.spec.target`])).stdout).toMatch(
      /An in-cluster FQDN \(answered as a CNAME/,
    );
    // The merged v2 (kubectl's plaintext-openapiv2 renderer, and older tools).
    let v2 = { code: 1, stdout: '', stderr: '' };
    await waitUntilAsync(
      async () => {
        v2 = await kube.kubectl('alice', ['explain', `queries.${group}.spec`, '--output=plaintext-openapiv2']);
        return v2.code === 0;
      },
      90_000,
      'the merged OpenAPI v2 to have the group',
    );
    expect(v2.stdout).toMatch(/client\s+<string>/);
    expect(v2.stdout).toMatch(/The address the query came from/);
    // The aggregator asked for both: its v3 aggregation reads /openapi/v3, its v2 merge /openapi/v2.
    for (const url of ['/openapi/v3', '/openapi/v2'])
      expect(agentSaw()).toContainEqual(
        expect.objectContaining({ user: 'system:aggregator', url, code: 200, authentication: 'front-proxy' }),
      );
    // kubectl's request for the group-version's document came through as alice.
    expect(agentSaw()).toContainEqual(
      expect.objectContaining({
        user: 'alice',
        url: expect.stringMatching(/^\/openapi\/v3\/apis\/dns\.spoke-agent\.io\/v1alpha1\?hash=/),
        code: 200,
      }),
    );
  }, 200_000);

  it("kubectl get prints the columns, more with -o wide, and a rule's age", async () => {
    const one = await kube.kubectl('alice', ['get', `resolutions.${group}`, 'kubernetes.default.cluster1']);
    expect(one.code, one.stderr).toBe(0);
    expect(columns(one.stdout)).toEqual({
      header: ['NAME', 'TYPE', 'ACTION', 'RULE', 'TARGET', 'RCODE', 'ADDRESSES'],
      rows: [
        [
          'kubernetes.default.cluster1',
          'A',
          'rule',
          '--expose=default/kubernetes',
          'kubernetes.default.svc.cluster.test',
          'NOERROR',
          '127.0.0.1',
        ],
      ],
    });
    const wide = columns(
      (await kube.kubectl('alice', ['get', `resolutions.${group}`, 'cluster1', '-o', 'wide'])).stdout,
    );
    expect(wide.header).toEqual([
      'NAME',
      'TYPE',
      'ACTION',
      'RULE',
      'TARGET',
      'RCODE',
      'ADDRESSES',
      'CNAME CHAIN',
      'FLAGS',
      'LATENCY',
      'REASON',
    ]);
    expect(wide.rows[0]![7]).toBe('cluster1 -> kubernetes.default.svc.cluster.test');
    const rules = columns((await kube.kubectl('alice', ['get', `rules.${group}`])).stdout);
    expect(rules.header).toEqual(['NAME', 'KIND', 'NAMES', 'TARGET', 'SOURCE', 'AGE']);
    expect(rules.rows.map((r) => [r[0], r[1], r[4]])).toEqual([
      ['cluster1', 'cluster', '--cluster-name'],
      ['kubernetes.default.cluster1', 'service', '--expose=default/kubernetes'],
    ]);
    for (const row of rules.rows) expect(row[5]).toMatch(/^\d+(s|m\d*s?)$/); // not <unknown>: rules have a creationTimestamp
  });

  // How soon is the live log's flush (live-log/live-log.ts flushMs, on fake timers in dns/query-log.test.ts);
  // here, that the line arrives through the real aggregator, without a wall-clock limit a busy machine breaks.
  it('a dig shows up in a running kubectl get --watch', async () => {
    const tag = Date.now();
    await dig(`before-${tag}.cluster1`, 'TXT'); // so the watch's first list has a row to print
    const watch = kube.kubectlProcess('carol', ['get', `queries.${group}`, '--watch', '--field-selector', 'type=TXT']);
    try {
      await watch.waitFor(new RegExp(`before-${tag}\\.cluster1`), 30_000);
      await dig(`watched-${tag}.cluster1`, 'TXT');
      await watch.waitFor(new RegExp(`watched-${tag}\\.cluster1.*\\n`), 20_000);
      const table = columns(watch.stdout());
      expect(table.header).toEqual(['NAME', 'QUERY', 'TYPE', 'CLIENT', 'RCODE', 'RULE', 'LATENCY', 'AGE']);
      expect(table.rows.find((r) => r[1] === `watched-${tag}.cluster1`)).toEqual([
        expect.stringMatching(/^[0-9a-f]{8}-\d+$/),
        `watched-${tag}.cluster1`,
        'TXT',
        '127.0.0.1',
        'NXDOMAIN',
        '<none>',
        expect.stringMatching(/ms$/),
        expect.stringMatching(/^\d+s$/),
      ]);
    } finally {
      watch.kill();
      await watch.exited;
    }
    const wide = columns(
      (
        await kube.kubectl('carol', [
          'get',
          `queries.${group}`,
          '-o',
          'wide',
          '--field-selector',
          `name=watched-${tag}.cluster1`,
        ])
      ).stdout,
    );
    expect(wide.header.slice(8)).toEqual(['TRANSPORT', 'SOURCE', 'TARGET', 'ANSWER', 'TIME']);
    expect(wide.rows[0]!.slice(8, 10)).toEqual(['udp', 'zone']);
  }, 60_000);

  it('a user without the query-log permission gets 403 while still reading resolutions, and the other way round', async () => {
    const refused = await kube.kubectl('alice', ['get', `queries.${group}`]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(
      /queries\.dns\.spoke-agent\.io is forbidden: User "alice" cannot list resource "queries"/,
    );
    expect((await kube.kubectl('alice', ['get', `resolutions.${group}`, 'cluster1'])).code).toBe(0);
    const carol = await kube.kubectl('carol', ['get', `resolutions.${group}`, 'cluster1']);
    expect(carol.stderr).toMatch(/forbidden: User "carol" cannot get resource "resolutions"/);
    // The agent refuses too when reached directly (its own SubjectAccessReview).
    const direct = await new Promise<number>((resolve, reject) => {
      const req = https.get(
        {
          host: '127.0.0.1',
          port: apiPort,
          path: `${base}/queries?watch=true`,
          ca: servingCa.cert,
          servername: 'spoke-agent-api.spoke-agent.svc',
          headers: { authorization: `Bearer ${kube.token('alice')}` },
          agent: false,
        },
        (res) => {
          res.resume();
          resolve(res.statusCode!);
        },
      );
      req.on('error', reject);
    });
    expect(direct).toBe(403);
  });

  it('a request through the hub shows in a running kubectl get dials --watch, then its bytes and duration once it closes; denials by field selector; 403 without the dial role', async () => {
    // The agent runs its own hub (no --proxy-server-host); its gRPC frontend takes dials as a hub client's would.
    const grpcPort = Number((await agent!.waitFor(/gRPC frontend (\d+)/))[1]);
    const healthPort = Number((await agent!.waitFor(/"port":(\d+)[^\n]*health server listening/))[1]);
    const through = (address: string) =>
      dialThroughProxy({ mode: 'grpc', proxyHost: '127.0.0.1', proxyPort: grpcPort, address });
    // No rule resolves to 127.0.0.2: denied by the dial policy (and the watch's first list has a row).
    await expect(through('127.0.0.2:80')).rejects.toThrow(/not allowed/);
    const watch = kube.kubectlProcess('dave', ['get', `dials.${group}`, '--watch']);
    try {
      await watch.waitFor(/127\.0\.0\.2:80 +<none> +127\.0\.0\.2 +denied/, 30_000);
      // The rule's name, to the agent's own health port on loopback (what the rule's target resolves to).
      const destination = `kubernetes.default.cluster1:${healthPort}`;
      const conn = await through(destination);
      await watch.waitFor(new RegExp(`${destination} +--expose=default/kubernetes +127\\.0\\.0\\.1 +open`), 10_000);
      expect(await requestUntilClose(conn, 'GET /healthz HTTP/1.0\r\n\r\n')).toMatch(/^HTTP\/1\.[01] 200/);
      // Each watch event is printed with its own widths: read the closed row by its shape.
      const closed = await watch.waitFor(
        new RegExp(`${destination} +--expose=default/kubernetes +127\\.0\\.0\\.1 +connected +(\\d+)/(\\d+) +[\\d.]+ms`),
        10_000,
      );
      expect(watch.stdout().split('\n')[0]).toMatch(/^NAME +DESTINATION +RULE +ADDRESS +RESULT +BYTES +DURATION +AGE$/);
      expect(Number(closed[1])).toBe('GET /healthz HTTP/1.0\r\n\r\n'.length);
      expect(Number(closed[2])).toBeGreaterThan(0);
    } finally {
      watch.kill();
      await watch.exited;
    }
    const denials = columns(
      (await kube.kubectl('dave', ['get', `dials.${group}`, '--field-selector', 'result=denied', '-o', 'wide'])).stdout,
    );
    expect(denials.rows.map((r) => [r[1], r[4]])).toEqual([['127.0.0.2:80', 'denied']]);
    expect(denials.header.slice(8)).toEqual(['SERVER', 'CONNECTID', 'TARGET', 'DIAL', 'REASON']);
    // alice reads resolutions but not the dial log.
    const refused = await kube.kubectl('alice', ['get', `dials.${group}`]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(
      /dials\.dns\.spoke-agent\.io is forbidden: User "alice" cannot list resource "dials"/,
    );
    expect((await kube.kubectl('alice', ['get', `resolutions.${group}`, 'cluster1'])).code).toBe(0);
    const status = await kube.kubectl('dave', ['explain', `dials.${group}.status.result`]);
    expect(status.stdout).toMatch(/connected, denied \(by the dial policy/);
  }, 90_000);

  it('passes the UID from requestheader-uid-headers to the SubjectAccessReview when the ConfigMap names them', async () => {
    // v1.28 has no --requestheader-uid-headers: what 1.33 publishes is added to what this API server
    // published, and a request is made as the front proxy would make it.
    const cm = await kube.kubectl('admin', [
      '-n',
      'kube-system',
      'get',
      'configmap',
      'extension-apiserver-authentication',
      '-o',
      'json',
    ]);
    const published = (JSON.parse(cm.stdout) as Obj).data as Record<string, string>;
    expect(published['requestheader-uid-headers']).toBeUndefined();
    const withUid = new ApiServer({
      host: '127.0.0.1',
      port: 0,
      certFile: servingFiles.cert,
      keyFile: servingFiles.key,
      authentication: parseAuthenticationConfig({ ...published, 'requestheader-uid-headers': '["X-Remote-Uid"]' })
        .config,
      reviewer: apiReviewer((await kubeApiClient(kube.kubeconfig(agentAccount)))!),
      routes: { resolver: dnsStack.dns.resolver, holder: dnsStack.holder },
      log,
      registry: new Registry(),
    });
    const frontProxy = kube.frontProxyCa.issue('front-proxy-client', { client: true });
    const asFrontProxy = (port: number, user: string, uid: string) =>
      new Promise<number>((resolve, reject) => {
        const headers = { 'X-Remote-User': user, 'X-Remote-Uid': uid, 'X-Remote-Group': 'system:authenticated' };
        const req = https.get(
          {
            host: '127.0.0.1',
            port,
            path: `${base}/resolutions/cluster1`,
            ca: servingCa.cert,
            servername: 'spoke-agent-api.spoke-agent.svc',
            cert: frontProxy.cert,
            key: frontProxy.key,
            headers,
            agent: false,
          },
          (res) => {
            res.resume();
            resolve(res.statusCode!);
          },
        );
        req.on('error', reject);
      });
    const { port } = await withUid.listen();
    try {
      expect(await asFrontProxy(port, 'alice', 'alice-uid-42')).toBe(200);
    } finally {
      await withUid.close();
    }
    // The running agent read the ConfigMap as published (no UID headers): the header is not trusted there.
    expect(await asFrontProxy(apiPort, 'bob', 'bob-uid-7')).toBe(403);
    const reviews = () =>
      kube
        .auditEvents()
        .filter(
          (e) =>
            (e.objectRef as Obj | undefined)?.resource === 'subjectaccessreviews' && e.stage === 'ResponseComplete',
        )
        .map((e) => (e.requestObject as Obj).spec as Obj);
    await waitUntilAsync(
      async () => reviews().some((r) => r.user === 'bob'),
      10_000,
      'the audit log to show the reviews',
    );
    expect(reviews()).toContainEqual(
      expect.objectContaining({
        user: 'alice',
        uid: 'alice-uid-42',
        resourceAttributes: expect.objectContaining({ verb: 'get', resource: 'resolutions', name: 'cluster1' }),
      }),
    );
    const bob = reviews().filter((r) => r.user === 'bob');
    expect(bob.length).toBeGreaterThan(0);
    for (const r of bob) expect(r.uid).toBeUndefined();
  });

  it('the APIService reports Available', async () => {
    const r = await kube.kubectl('admin', ['get', 'apiservice', apiServiceName, '-o', 'json']);
    const conditions = (JSON.parse(r.stdout) as Obj).status.conditions as Obj[];
    expect(conditions.find((c) => c.type === 'Available')).toMatchObject({ status: 'True' });
  });

  it('on its own port, judges bearer tokens with the real TokenReview and SubjectAccessReview, and trusts no forged header', async () => {
    const call = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const req = https.get(
          {
            host: '127.0.0.1',
            port: apiPort,
            path: `${base}/resolutions/cluster1`,
            ca: servingCa.cert,
            servername: 'spoke-agent-api.spoke-agent.svc',
            headers,
            agent: false,
          },
          (res) => {
            res.resume();
            resolve(res.statusCode!);
          },
        );
        req.on('error', reject);
      });
    expect(await call({ authorization: `Bearer ${kube.token('alice')}` })).toBe(200);
    expect(await call({ authorization: `Bearer ${kube.token('bob')}` })).toBe(403);
    expect(await call({ authorization: 'Bearer not-a-token' })).toBe(401);
    expect(await call({ 'X-Remote-User': 'admin', 'X-Remote-Group': 'system:masters' })).toBe(401);
    // A client certificate from the API server's client CA is a user too (CN, O).
    const admin = kube.clientCa.issue('carol', { client: true, organizations: ['system:masters'] });
    const asCarol = await new Promise<number>((resolve, reject) => {
      const req = https.get(
        {
          host: '127.0.0.1',
          port: apiPort,
          path: base,
          ca: servingCa.cert,
          cert: admin.cert,
          key: admin.key,
          agent: false,
        },
        (res) => {
          res.resume();
          resolve(res.statusCode!);
        },
      );
      req.on('error', reject);
    });
    expect(asCarol).toBe(200);
  });
});
