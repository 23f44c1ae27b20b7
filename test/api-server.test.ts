// The dns.spoke-agent.io API called directly on its port (not through an aggregator), with the fake
// API server publishing extension-apiserver-authentication and answering TokenReview and
// SubjectAccessReview: who is trusted with which credentials, and what they get.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Resolver as NodeResolver } from 'node:dns/promises';
import type http from 'node:http';
import https from 'node:https';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAuthenticationConfig } from '../apiserver/authentication.js';
import { Dial } from '../agent/dial.js';
import { DialLog } from '../agent/dial-log.js';
import { ApiServer } from '../apiserver/server.js';
import { startApiServer } from '../apiserver/setup.js';
import { createCa, type CertAndKey } from '../hub/ephemeral-pki.js';
import { kubeApiClient } from '../kube/config.js';
import { createLogger } from '../observability/log.js';
import { makePki, type TestPki } from './support/certs.js';
import { startExplainedDns, type ExplainedDns } from './support/explained-dns.js';
import { FakeApiServer } from './support/fake-apiserver.js';
import { runCli } from './support/processes.js';
import { ManualClock } from './support/manual-clock.js';
import { waitUntil, waitUntilAsync } from './support/wait.js';

// biome-ignore lint/suspicious/noExplicitAny: answers are plain JSON, read by path
type Obj = Record<string, any>;

const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
const base = '/apis/dns.spoke-agent.io/v1alpha1';

let api: FakeApiServer;
let pki: TestPki;
let dnsStack: ExplainedDns;
let server: Awaited<ReturnType<typeof startApiServer>>;
/** The dial log the API serves; the tunnel's own records are tested in agent/ and through a hub in tunnel.test.ts. */
const dialLog = new DialLog({ size: 16 });
const dialRecord = (destination: string, fields: Partial<Dial>) =>
  Object.assign(new Dial(Date.now(), performance.now(), 'server-a', destination), fields);
const frontProxyCa = createCa('front-proxy-ca');
const clientCa = createCa('client-ca');
const otherCa = createCa('other-ca');
const frontProxy = frontProxyCa.issue('front-proxy-client', { client: true });
const authenticationData = (allowedNames: string[]) => ({
  'client-ca-file': clientCa.cert,
  'requestheader-client-ca-file': frontProxyCa.cert,
  'requestheader-allowed-names': JSON.stringify(allowedNames),
  'requestheader-username-headers': '["X-Remote-User"]',
  'requestheader-uid-headers': '["X-Remote-Uid"]',
  'requestheader-group-headers': '["X-Remote-Group"]',
  'requestheader-extra-headers-prefix': '["X-Remote-Extra-"]',
});
const options = (kubeconfig: string) => ({
  apiServerPort: 0,
  apiServerBindAddress: '127.0.0.1',
  apiTlsCertFile: pki.serverCert,
  apiTlsPrivateKeyFile: pki.serverKey,
  kubeconfig,
  kubeResync: 300_000,
});

beforeAll(async () => {
  pki = makePki();
  api = await FakeApiServer.start();
  api.configMap('kube-system', 'extension-apiserver-authentication', authenticationData(['front-proxy-client']));
  api.users.set('carol-token', { username: 'carol', groups: ['system:authenticated'] });
  api.users.set('dave-token', { username: 'dave', groups: ['system:authenticated'] });
  const resolutions = 'get resolutions.dns.spoke-agent.io';
  const queryReader = ['get', 'list', 'watch'].map((verb) => `carol ${verb} queries.dns.spoke-agent.io`);
  const dialReader = ['get', 'list', 'watch'].map((verb) => `dave ${verb} dials.dns.spoke-agent.io`);
  for (const allowed of [
    `alice ${resolutions}`,
    `carol ${resolutions}`,
    'group:ops list rules.dns.spoke-agent.io',
    `group:system:authenticated get ${base}`,
    ...queryReader,
    ...dialReader,
  ])
    api.allowed.add(allowed);
  dnsStack = await startExplainedDns(log);
  const client = await kubeApiClient(api.kubeconfigPath);
  server = await startApiServer({
    options: options(api.kubeconfigPath),
    resolver: dnsStack.dns.resolver,
    holder: dnsStack.holder,
    dialLog,
    log,
    registry: new Registry(),
    client,
  });
});

afterAll(async () => {
  await server?.close();
  await dnsStack?.close();
  await api?.close();
});

interface Call {
  cert?: CertAndKey;
  headers?: Record<string, string | string[]>;
}

/** A request over TLS that trusts the serving CA, with the client certificate and headers given. */
/** A request to the API server over TLS, as `cert` with `headers`. */
function requestTo(path: string, { cert, headers = {} }: Call): https.RequestOptions {
  return {
    host: '127.0.0.1',
    port: server.port,
    path,
    ca: readFileSync(pki.caCert),
    cert: cert?.cert,
    key: cert?.key,
    headers,
    agent: false,
  };
}

function call(path: string, as: Call = {}): Promise<{ status: number; body: Obj }> {
  return new Promise((resolve, reject) => {
    const req = https.request(requestTo(path, as), (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) as Obj }));
    });
    req.on('error', reject);
    req.end();
  });
}

const sarsFor = (user: string) => api.accessReviews.filter((r) => r.user === user);

/** A query to the test's DNS server from a real client (c-ares over UDP). */
async function ask(name: string): Promise<void> {
  const resolver = new NodeResolver({ timeout: 10_000, tries: 1 });
  resolver.setServers([`127.0.0.1:${dnsStack.dns.listening.port}`]);
  await resolver.resolve4(name).catch(() => undefined);
}

/** A watch over TLS: its events, one JSON object a line, as they come. */
function watchEvents(path: string, as: Call) {
  const events: Obj[] = [];
  let req!: http.ClientRequest;
  const opened = new Promise<void>((resolveOpened, reject) => {
    req = https.request(requestTo(path, as), (res) => {
      expect(res.statusCode).toBe(200);
      resolveOpened();
      let text = '';
      res.on('data', (c: Buffer) => {
        text += c.toString();
        for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n')) {
          events.push(JSON.parse(text.slice(0, nl)) as Obj);
          text = text.slice(nl + 1);
        }
      });
      res.on('end', () => doneResolve());
    });
    req.on('error', reject);
    req.end();
  });
  let doneResolve!: () => void;
  const done = new Promise<void>((r) => (doneResolve = r));
  let seen = 0;
  /** The next event (after those already returned) that `wanted` accepts. */
  const next = async (wanted: (e: Obj) => boolean): Promise<Obj> => {
    let found: Obj | undefined;
    await waitUntil(
      () => {
        while (found === undefined && seen < events.length) {
          const e = events[seen++]!;
          if (wanted(e)) found = e;
        }
        return found !== undefined;
      },
      20_000,
      () => `such an event in ${JSON.stringify(events)}`,
    );
    return found!;
  };
  return { opened, next, done, close: () => req.destroy() };
}

describe('dns.spoke-agent.io on its own port', () => {
  it("trusts the front proxy's headers: user, UID, every group and the extras reach the SubjectAccessReview", async () => {
    const res = await call(`${base}/resolutions/kubernetes.default.cluster1`, {
      cert: frontProxy,
      headers: {
        'X-Remote-User': 'alice',
        'X-Remote-Uid': 'alice-uid-1',
        'X-Remote-Group': ['ops', 'a,b'],
        'X-Remote-Extra-Scopes%2fToken': 'x',
      },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({
      apiVersion: 'dns.spoke-agent.io/v1alpha1',
      kind: 'Resolution',
      metadata: { name: 'kubernetes.default.cluster1' },
      spec: { type: 'A' },
    });
    expect(res.body.status).toMatchObject({
      action: 'rule',
      rcode: 'NOERROR',
      cnameChain: ['kubernetes.default.cluster1 -> kubernetes.default.svc.cluster.test'],
      addresses: ['127.0.0.1'],
    });
    expect(res.body.status.reason).toMatch(/^rule --expose=default\/kubernetes/);
    expect(sarsFor('alice').at(-1)).toMatchObject({
      uid: 'alice-uid-1',
      groups: ['ops', 'a,b', 'system:authenticated'],
      extra: { 'scopes/token': ['x'] },
      resourceAttributes: {
        verb: 'get',
        group: 'dns.spoke-agent.io',
        version: 'v1alpha1',
        resource: 'resolutions',
        name: 'kubernetes.default.cluster1',
      },
    });
  });

  it('answers 403 with the reason as a Status for a user the API server does not allow', async () => {
    const res = await call(`${base}/resolutions/cluster1`, { cert: frontProxy, headers: { 'X-Remote-User': 'bob' } });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      reason: 'Forbidden',
      code: 403,
    });
    expect(res.body.message).toBe(
      'resolutions.dns.spoke-agent.io "cluster1" is forbidden: User "bob" cannot get resource "resolutions" in API group "dns.spoke-agent.io" at the cluster scope: no RBAC policy matched',
    );
  });

  it('never trusts identity headers without the front-proxy certificate', async () => {
    const forged = { 'X-Remote-User': 'system:admin', 'X-Remote-Group': 'system:masters' };
    const before = sarsFor('system:admin').length;
    expect(await call(`${base}/resolutions/cluster1`, { headers: forged })).toMatchObject({
      status: 401,
      body: { kind: 'Status', reason: 'Unauthorized', code: 401 },
    });
    // With another credential, the headers are ignored and that credential's user is judged.
    const asCarol = await call(`${base}/resolutions/cluster1`, {
      cert: clientCa.issue('carol', { client: true }),
      headers: forged,
    });
    expect(asCarol.status).toBe(200);
    const asDave = await call(`${base}/resolutions/cluster1`, {
      headers: { ...forged, authorization: 'Bearer dave-token' },
    });
    expect(asDave.status).toBe(403);
    expect(asDave.body.message).toMatch(/User "dave" cannot get/);
    expect(sarsFor('system:admin').length).toBe(before);
  });

  it('answers 401 to a client certificate from another CA, and to a front-proxy CA certificate whose name is not allowed', async () => {
    const headers = { 'X-Remote-User': 'alice' };
    expect(
      (
        await call(`${base}/resolutions/cluster1`, {
          cert: otherCa.issue('front-proxy-client', { client: true }),
          headers,
        })
      ).status,
    ).toBe(401);
    expect(
      (
        await call(`${base}/resolutions/cluster1`, {
          cert: frontProxyCa.issue('not-allowed', { client: true }),
          headers,
        })
      ).status,
    ).toBe(401);
  });

  it('judges a bearer token with TokenReview and SubjectAccessReview, caching both briefly', async () => {
    expect(
      (await call(`${base}/resolutions/cluster1?type=AAAA`, { headers: { authorization: 'Bearer carol-token' } })).body,
    ).toMatchObject({ kind: 'Resolution', spec: { type: 'AAAA' } });
    expect((await call(`${base}/resolutions/cluster1`, { headers: { authorization: 'Bearer nope' } })).status).toBe(
      401,
    );
    const reviews = () =>
      api.requests.filter((r) => r.startsWith('POST /apis/authentication.k8s.io/v1/tokenreviews')).length;
    const count = reviews();
    const sars = sarsFor('carol').length;
    expect(
      (await call(`${base}/resolutions/cluster1?type=AAAA`, { headers: { authorization: 'Bearer carol-token' } }))
        .status,
    ).toBe(200);
    expect(reviews()).toBe(count);
    expect(sarsFor('carol').length).toBe(sars);
  });

  it("takes a client-CA certificate's CN as the user and its O as groups", async () => {
    const res = await call(`${base}/rules`, { cert: clientCa.issue('erin', { client: true, organizations: ['ops'] }) });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({ kind: 'RuleList', naming: { cluster: 'cluster1' } });
    expect(res.body.items[0]).toMatchObject({
      kind: 'Rule',
      metadata: { name: 'cluster1' },
      spec: { kind: 'cluster' },
    });
    // Created when the rule came into force (the holder was made in beforeAll): what kubectl's AGE reads.
    for (const item of res.body.items)
      expect(Date.parse(item.metadata.creationTimestamp)).toBe(
        Math.floor(dnsStack.holder.since(dnsStack.holder.current.rules[0]!) / 1000) * 1000,
      );
    expect(sarsFor('erin').at(-1)).toMatchObject({
      groups: ['ops', 'system:authenticated'],
      resourceAttributes: { verb: 'list', resource: 'rules' },
    });
  });

  it("answers kubectl get's Table request with the columns, and plain JSON to everyone else", async () => {
    const asErin = { cert: clientCa.issue('erin', { client: true, organizations: ['ops'] }) };
    const kubectlGet = {
      accept:
        'application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json',
    };
    const rules = await call(`${base}/rules`, { ...asErin, headers: kubectlGet });
    expect(rules.body).toMatchObject({
      kind: 'Table',
      apiVersion: 'meta.k8s.io/v1',
      metadata: { resourceVersion: String(dnsStack.holder.generation) },
    });
    expect(rules.body.rows[0].cells.slice(0, 5)).toEqual([
      'cluster1',
      'cluster',
      'cluster1,cluster1.spoke-agent',
      'kubernetes.default.svc.cluster.test',
      '--cluster-name',
    ]);
    expect(rules.body.rows[0].object).toMatchObject({ kind: 'PartialObjectMetadata', metadata: { name: 'cluster1' } });
    const asCarol = { cert: clientCa.issue('carol', { client: true }) };
    const one = await call(`${base}/resolutions/kubernetes.default.cluster1?includeObject=Object`, {
      ...asCarol,
      headers: kubectlGet,
    });
    expect(one.body.columnDefinitions.map((c: Obj) => c.name)).toEqual([
      'Name',
      'Type',
      'Action',
      'Rule',
      'Target',
      'Rcode',
      'Addresses',
      'CNAME Chain',
      'Flags',
      'Latency',
      'Reason',
    ]);
    expect(one.body.rows).toHaveLength(1);
    expect(one.body.rows[0].cells.slice(0, 7)).toEqual([
      'kubernetes.default.cluster1',
      'A',
      'rule',
      '--expose=default/kubernetes',
      'kubernetes.default.svc.cluster.test',
      'NOERROR',
      '127.0.0.1',
    ]);
    expect(one.body.rows[0].object).toMatchObject({ kind: 'Resolution', status: { rcode: 'NOERROR' } });
    expect(await call(`${base}/rules?includeObject=Everything`, { ...asErin, headers: kubectlGet })).toMatchObject({
      status: 400,
      body: { kind: 'Status', code: 400 },
    });
    expect(
      await call(`${base}/rules`, { ...asErin, headers: { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' } }),
    ).toMatchObject({ body: { kind: 'Table' } });
    expect(
      await call(`${base}/rules`, { ...asErin, headers: { accept: 'application/vnd.kubernetes.protobuf' } }),
    ).toMatchObject({ status: 406 });
    expect((await call(`${base}/rules`, asErin)).body.kind).toBe('RuleList');
  });

  it('lists the query log under its own permission, by field selector, as objects or a Table, and gets one by name', async () => {
    const asCarol = { cert: clientCa.issue('carol', { client: true }) };
    const asAlice = { cert: frontProxy, headers: { 'X-Remote-User': 'alice' } };
    const startedAt = Date.now();
    const asked = `listed-${startedAt}.cluster1`;
    await ask(asked);
    const askedBy = Date.now();
    const refused = await call(`${base}/queries`, asAlice);
    expect(refused.status).toBe(403);
    expect(refused.body.message).toBe(
      'queries.dns.spoke-agent.io is forbidden: User "alice" cannot list resource "queries" in API group "dns.spoke-agent.io" at the cluster scope: no RBAC policy matched',
    );
    expect((await call(`${base}/resolutions/cluster1`, asAlice)).status).toBe(200);

    const list = await call(
      `${base}/queries?fieldSelector=${encodeURIComponent(`name=${asked},rcode=NXDOMAIN`)}`,
      asCarol,
    );
    expect(list.status, JSON.stringify(list.body)).toBe(200);
    expect(list.body).toMatchObject({
      apiVersion: 'dns.spoke-agent.io/v1alpha1',
      kind: 'QueryList',
      metadata: { resourceVersion: expect.stringMatching(/^[0-9a-f]{8}-\d+$/) },
    });
    expect(list.body.items).toHaveLength(1);
    const item = list.body.items[0];
    expect(item).toMatchObject({
      kind: 'Query',
      spec: { name: asked, type: 'A', client: '127.0.0.1', transport: 'udp' },
      status: { rcode: 'NXDOMAIN', source: 'zone', cached: false, ms: expect.any(Number) },
    });
    expect(item.metadata.name).toBe(item.metadata.resourceVersion);
    // the wall-clock time of the query, to the second
    expect(Date.parse(item.metadata.creationTimestamp)).toBeGreaterThanOrEqual(Math.floor(startedAt / 1000) * 1000);
    expect(Date.parse(item.metadata.creationTimestamp)).toBeLessThanOrEqual(askedBy);

    const kubectlGet = { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json' };
    const tableOf = await call(`${base}/queries?fieldSelector=${encodeURIComponent(`spec.name=${asked}`)}`, {
      ...asCarol,
      headers: kubectlGet,
    });
    expect(tableOf.body.columnDefinitions.filter((c: Obj) => c.priority === 0).map((c: Obj) => c.name)).toEqual([
      'Name',
      'Query',
      'Type',
      'Client',
      'Rcode',
      'Rule',
      'Latency',
      'Age',
    ]);
    expect(tableOf.body.columnDefinitions.filter((c: Obj) => c.priority === 1).map((c: Obj) => c.name)).toEqual([
      'Transport',
      'Source',
      'Target',
      'Answer',
      'Time',
    ]);
    expect(tableOf.body.rows[0].cells.slice(0, 6)).toEqual([
      item.metadata.name,
      asked,
      'A',
      '127.0.0.1',
      'NXDOMAIN',
      '<none>',
    ]);

    expect((await call(`${base}/queries/${item.metadata.name}`, asCarol)).body).toEqual(item);
    const gone = await call(`${base}/queries/00000000-1`, asCarol);
    expect(gone).toMatchObject({
      status: 404,
      body: { kind: 'Status', reason: 'NotFound', details: { name: '00000000-1', kind: 'queries' } },
    });
    expect(await call(`${base}/queries?fieldSelector=phase%3DRunning`, asCarol)).toMatchObject({
      status: 400,
      body: { message: expect.stringMatching(/field label not supported: phase/) },
    });
  });

  it('watches the query log: a query shows up as it comes, as an event or a Table row, and a version from another agent starts from now', async () => {
    const asCarol = { cert: clientCa.issue('carol', { client: true }) };
    const selector = `fieldSelector=${encodeURIComponent('rcode=NXDOMAIN')}`;
    const plain = watchEvents(`${base}/queries?watch=true&${selector}&resourceVersion=ffffffff-1`, asCarol);
    const tables = watchEvents(`${base}/queries?watch=1&${selector}&resourceVersion=ffffffff-1`, {
      ...asCarol,
      headers: { accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json' },
    });
    try {
      await Promise.all([plain.opened, tables.opened]);
      await ask('kubernetes.default.cluster1'); // NOERROR: the selector leaves it out
      const asked = `watched-${Date.now()}.cluster1`;
      await ask(asked);
      const event = await plain.next(() => true);
      expect(event).toMatchObject({
        type: 'ADDED',
        object: { kind: 'Query', spec: { name: asked }, status: { rcode: 'NXDOMAIN' } },
      });
      const first = await tables.next(() => true);
      expect(first.object).toMatchObject({
        kind: 'Table',
        columnDefinitions: expect.any(Array),
        rows: [{ object: { kind: 'PartialObjectMetadata' } }],
      });
      expect(first.object.rows[0].cells.slice(0, 5)).toEqual([
        event.object.metadata.name,
        asked,
        'A',
        '127.0.0.1',
        'NXDOMAIN',
      ]);
      await ask(`again-${asked}`);
      const second = await tables.next(() => true);
      expect(second.object.rows[0].cells[1]).toBe(`again-${asked}`);
      expect(second.object.columnDefinitions).toBeUndefined();
    } finally {
      plain.close();
      tables.close();
    }
    const sars = sarsFor('carol').map((r) => (r.resourceAttributes as Obj | undefined)?.verb);
    expect(sars).toContain('watch');
    const ended = watchEvents(`${base}/queries?watch=true&timeoutSeconds=1`, asCarol);
    await ended.opened;
    await expect(ended.done).resolves.toBeUndefined();
  });

  it('lists and watches the dial log under its own permission: connect then close as ADDED then MODIFIED, denials by field selector', async () => {
    const asDave = { headers: { authorization: 'Bearer dave-token' } };
    const asCarol = { cert: clientCa.issue('carol', { client: true }) };
    expect((await call(`${base}/dials`, asCarol)).body.message).toBe(
      'dials.dns.spoke-agent.io is forbidden: User "carol" cannot list resource "dials" in API group "dns.spoke-agent.io" at the cluster scope: no RBAC policy matched',
    );
    expect((await call(`${base}/resolutions/cluster1`, asCarol)).status).toBe(200);
    const watch = watchEvents(`${base}/dials?watch=true&resourceVersion=0`, asDave);
    try {
      await watch.opened;
      const open = dialRecord('web.prod.cluster1:443', {
        connectID: '1',
        rule: '--expose=prod/web',
        address: '10.0.0.5',
      });
      dialLog.added(open);
      dialLog.added(
        dialRecord('169.254.169.254:80', { result: 'denied', reason: 'not allowed', address: '169.254.169.254' }),
      );
      const added = await watch.next((e) => e.object.spec.destination === 'web.prod.cluster1:443');
      expect(added).toMatchObject({
        type: 'ADDED',
        object: { kind: 'Dial', status: { result: 'connected', open: true } },
      });
      Object.assign(open, { bytesToTarget: 11, bytesFromTarget: 22, durationMs: 33, closedBy: 'CLOSE_REQ' });
      dialLog.modified(open);
      const closed = await watch.next((e) => e.type === 'MODIFIED');
      expect(closed.object).toMatchObject({
        metadata: { name: added.object.metadata.name },
        status: { open: false, bytesToTarget: 11, bytesFromTarget: 22, durationMs: 33, closedBy: 'CLOSE_REQ' },
      });
      expect(closed.object.metadata.resourceVersion).not.toBe(added.object.metadata.resourceVersion);
    } finally {
      watch.close();
    }
    const denials = await call(`${base}/dials?fieldSelector=${encodeURIComponent('result=denied')}`, asDave);
    expect(denials.body.items.map((i: Obj) => [i.spec.destination, i.status.result])).toEqual([
      ['169.254.169.254:80', 'denied'],
    ]);
    const table = await call(`${base}/dials`, {
      ...asDave,
      headers: { ...asDave.headers, accept: 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json' },
    });
    expect(table.body.rows.map((r: Obj) => r.cells.slice(1, 7))).toEqual([
      ['web.prod.cluster1:443', '--expose=prod/web', '10.0.0.5', 'connected', '11/22', '33ms'],
      ['169.254.169.254:80', '<none>', '169.254.169.254', 'denied', '<none>', '<none>'],
    ]);
    const name = denials.body.items[0].metadata.name;
    expect((await call(`${base}/dials/${name}`, asDave)).body).toEqual(denials.body.items[0]);
  });

  it('serves OpenAPI v2 and v3 to the aggregator (system:aggregator), with ETags it can revalidate', async () => {
    for (const path of ['/openapi/v2', '/openapi/v3', '/openapi/v3/apis/dns.spoke-agent.io/v1alpha1'])
      api.allowed.add(`system:aggregator get ${path}`);
    const aggregator = {
      cert: frontProxy,
      headers: { 'X-Remote-User': 'system:aggregator', accept: 'application/json' },
    };
    const raw = (path: string, extra: Record<string, string> = {}) =>
      new Promise<{ status: number; etag?: string; text: string }>((resolve, reject) => {
        const req = https.get(
          {
            host: '127.0.0.1',
            port: server.port,
            path,
            ca: readFileSync(pki.caCert),
            cert: frontProxy.cert,
            key: frontProxy.key,
            headers: { ...aggregator.headers, ...extra },
            agent: false,
          },
          (res) => {
            let text = '';
            res.on('data', (c: Buffer) => (text += c.toString()));
            res.on('end', () => resolve({ status: res.statusCode!, etag: res.headers.etag, text }));
          },
        );
        req.on('error', reject);
      });
    const v2 = await raw('/openapi/v2');
    expect(v2.status).toBe(200);
    expect(JSON.parse(v2.text)).toMatchObject({
      swagger: '2.0',
      definitions: { 'io.spoke-agent.dns.v1alpha1.Query': { 'x-kubernetes-group-version-kind': [{ kind: 'Query' }] } },
    });
    expect(await raw('/openapi/v2', { 'if-none-match': v2.etag! })).toMatchObject({ status: 304, text: '' });
    const discovery = (await call('/openapi/v3', aggregator)).body;
    const url = discovery.paths['apis/dns.spoke-agent.io/v1alpha1'].serverRelativeURL as string;
    expect(url).toMatch(/^\/openapi\/v3\/apis\/dns\.spoke-agent\.io\/v1alpha1\?hash=[0-9A-F]+$/);
    const v3 = await raw(url);
    expect(v3.status).toBe(200);
    expect(JSON.parse(v3.text)).toMatchObject({
      openapi: '3.0.0',
      components: { schemas: { 'io.spoke-agent.dns.v1alpha1.Resolution': { type: 'object' } } },
    });
    expect(v3.etag).toBe(`"${url.split('hash=')[1]}"`);
    expect(sarsFor('system:aggregator').map((r) => (r.nonResourceAttributes as Obj | undefined)?.path)).toEqual(
      expect.arrayContaining(['/openapi/v2', '/openapi/v3', '/openapi/v3/apis/dns.spoke-agent.io/v1alpha1']),
    );
    expect(
      (await raw('/openapi/v2', { accept: 'application/com.github.proto-openapi.spec.v2@v1.0+protobuf' })).status,
    ).toBe(406);
  });

  it("serves discovery, and answers the aggregator's aggregated-discovery request with 406 so it falls back", async () => {
    const aggregator = { cert: frontProxy, headers: { 'X-Remote-User': 'system:kube-aggregator' } };
    const list = await call(base, aggregator);
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ kind: 'APIResourceList', groupVersion: 'dns.spoke-agent.io/v1alpha1' });
    expect(list.body.resources.map((r: { name: string }) => r.name)).toEqual([
      'resolutions',
      'rules',
      'queries',
      'dials',
    ]);
    expect(sarsFor('system:kube-aggregator').at(-1)).toMatchObject({
      nonResourceAttributes: { verb: 'get', path: base },
    });
    api.allowed.add('system:kube-aggregator get /apis');
    const accept = 'application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList';
    expect(await call('/apis', { ...aggregator, headers: { ...aggregator.headers, accept } })).toMatchObject({
      status: 406,
      body: { kind: 'Status', code: 406 },
    });
    expect((await call('/apis', aggregator)).body).toMatchObject({
      kind: 'APIGroupList',
      groups: [{ name: 'dns.spoke-agent.io', preferredVersion: { version: 'v1alpha1' } }],
    });
  });

  it('follows the ConfigMap: a front-proxy name taken off the allowed list stops being trusted', async () => {
    const asAlice = () =>
      call(`${base}/resolutions/cluster1`, { cert: frontProxy, headers: { 'X-Remote-User': 'alice' } });
    expect((await asAlice()).status).toBe(200);
    api.configMap('kube-system', 'extension-apiserver-authentication', authenticationData(['another-proxy']));
    await waitUntilAsync(async () => (await asAlice()).status === 401, 10_000, 'the allowed names to change');
    api.configMap('kube-system', 'extension-apiserver-authentication', authenticationData([]));
    const anyName = frontProxyCa.issue('any-proxy-name', { client: true });
    const asAnyName = () =>
      call(`${base}/resolutions/cluster1`, { cert: anyName, headers: { 'X-Remote-User': 'alice' } });
    await waitUntilAsync(
      async () => (await asAnyName()).status === 200,
      10_000,
      'an empty allowed list to accept any name',
    );
  });

  it('refuses to start when the ConfigMap is unreadable, naming the RBAC that is missing', async () => {
    api.failNext(1, 403, (path) => path.includes('/namespaces/kube-system/configmaps'));
    const attempt = startApiServer({
      options: options(api.kubeconfigPath),
      resolver: dnsStack.dns.resolver,
      holder: dnsStack.holder,
      log,
      registry: new Registry(),
      client: await kubeApiClient(api.kubeconfigPath),
    });
    await expect(attempt).rejects.toThrow(
      /cannot read the ConfigMap kube-system\/extension-apiserver-authentication \(HTTP 403\): bind the Role kube-system\/extension-apiserver-authentication-reader/,
    );
    // An API server that is not there: the cause is in the message.
    const gone = await FakeApiServer.start();
    await gone.close();
    const unreachable = startApiServer({
      options: options(gone.kubeconfigPath),
      resolver: dnsStack.dns.resolver,
      holder: dnsStack.holder,
      log,
      registry: new Registry(),
      client: await kubeApiClient(gone.kubeconfigPath),
    });
    await expect(unreachable).rejects.toThrow(
      /cannot read the ConfigMap kube-system\/extension-apiserver-authentication: .*ECONNREFUSED/,
    );
  });

  it("re-reads a rotated serving certificate (a mounted Secret's update) without a restart", async () => {
    const [cert, key] = [join(pki.dir, 'rotating.crt'), join(pki.dir, 'rotating.key')];
    const first = createCa('serving-1');
    const second = createCa('serving-2');
    const write = (pair: CertAndKey) => {
      writeFileSync(cert, pair.cert);
      writeFileSync(key, pair.key);
    };
    write(first.issue('api', { serverNames: ['127.0.0.1'] }));
    const reviewer = { authenticate: async () => undefined, authorize: async () => ({ allowed: false }) };
    const rotating = new ApiServer({
      host: '127.0.0.1',
      port: 0,
      certFile: cert,
      keyFile: key,
      authentication: parseAuthenticationConfig({}).config,
      reviewer,
      routes: { resolver: dnsStack.dns.resolver, holder: dnsStack.holder },
      log,
      registry: new Registry(),
    });
    const { port } = await rotating.listen();
    // The status code only shows the handshake succeeded: nobody is authenticated here.
    const handshake = (ca: string) =>
      new Promise<string>((resolve) => {
        const req = https.get({ host: '127.0.0.1', port, path: '/apis', ca, agent: false }, (res) => {
          res.resume();
          resolve(String(res.statusCode));
        });
        req.on('error', (err) => resolve(err.message));
      });
    try {
      expect(await handshake(first.cert)).toBe('401');
      write(second.issue('api', { serverNames: ['127.0.0.1'] }));
      await waitUntilAsync(
        async () => (await handshake(second.cert)) === '401',
        10_000,
        'the new certificate to be served',
      );
      expect(await handshake(first.cert)).toMatch(/self[- ]signed|unable to verify|certificate/i);
    } finally {
      await rotating.close();
    }
  });

  it('caches reviews as the generic API server does: tokens 10 s, allowed 10 s, denied 10 s; system:masters needs none', async () => {
    const clock = new ManualClock();
    const asked = { tokens: 0, access: 0 };
    const reviewer = {
      authenticate: async (token: string) => {
        asked.tokens++;
        return token === 'root-token'
          ? { username: 'root', groups: ['system:masters'] }
          : { username: token.replace(/-token$/, '') };
      },
      authorize: async (user: { username: string }) => {
        asked.access++;
        return { allowed: user.username === 'yes', reason: 'test' };
      },
    };
    const cached = new ApiServer({
      host: '127.0.0.1',
      port: 0,
      certFile: pki.serverCert,
      keyFile: pki.serverKey,
      authentication: parseAuthenticationConfig({}).config,
      reviewer,
      routes: { resolver: dnsStack.dns.resolver, holder: dnsStack.holder },
      log,
      registry: new Registry(),
      clock,
    });
    const { port } = await cached.listen();
    const as = (token: string) =>
      new Promise<number>((resolve, reject) => {
        const req = https.get(
          {
            host: '127.0.0.1',
            port,
            path: `${base}/resolutions/cluster1`,
            ca: readFileSync(pki.caCert),
            headers: { authorization: `Bearer ${token}` },
            agent: false,
          },
          (res) => {
            res.resume();
            resolve(res.statusCode!);
          },
        );
        req.on('error', reject);
      });
    try {
      expect([await as('yes-token'), await as('no-token')]).toEqual([200, 403]);
      expect(asked).toEqual({ tokens: 2, access: 2 });
      await clock.advance(9_999);
      expect([await as('yes-token'), await as('no-token')]).toEqual([200, 403]);
      expect(asked).toEqual({ tokens: 2, access: 2 });
      await clock.advance(2);
      expect([await as('yes-token'), await as('no-token')]).toEqual([200, 403]);
      expect(asked).toEqual({ tokens: 4, access: 4 });
      expect(await as('root-token')).toBe(200);
      expect(asked).toEqual({ tokens: 5, access: 4 });
    } finally {
      await cached.close();
    }
  });

  it('the agent command refuses --api-server-port without a serving certificate', async () => {
    const child = runCli(['--cluster-name=cluster1', '--api-server-port=8443', '--health-server-port=0']);
    expect((await child.exited).code).toBe(2);
    expect(child.stderr()).toMatch(/--api-server-port needs --api-tls-cert-file and --api-tls-private-key-file/);
  });
});
