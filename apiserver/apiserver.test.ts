// The pure decisions of the aggregated API: the ConfigMap's parse, who a request is, what it asks
// to do, and content negotiation.
import { X509Certificate } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createCa } from '../hub/ephemeral-pki.js';
import { forbiddenMessage } from '../kube/delegated-auth.js';
import { requestAttributes } from './attributes.js';
import { authenticate, parseAuthenticationConfig, withAuthenticatedGroup } from './authentication.js';
import { subjectNames, verifyClientChain } from './certificates.js';
import { negotiate } from './negotiation.js';
import { dial, type QueryObject, query, resolution, ruleList } from './objects.js';
import { openApiV2, openApiV3, openApiV3Discovery } from './openapi.js';
import { Dial } from '../agent/dial.js';
import { DialLog } from '../agent/dial-log.js';
import { QueryLog } from '../dns/query-log.js';
import { DnsRequest } from '../dns/request.js';
import { encodeQuery, parseQuery, type Query } from '../dns/wire.js';
import { RuleHolder } from '../rules/holder.js';
import { parseRules } from '../rules/rule-set.js';
import { queryColumns, resolutionColumns, ruleColumns } from './columns.js';
import { humanDuration, shortList, table } from './tables.js';

const frontProxyCa = createCa('front-proxy-ca');
const clientCa = createCa('client-ca');
const x509 = (pem: string) => new X509Certificate(pem);
const data = {
  'client-ca-file': clientCa.cert,
  'requestheader-client-ca-file': frontProxyCa.cert,
  'requestheader-allowed-names': '["front-proxy-client"]',
  'requestheader-username-headers': '["X-Remote-User"]',
  'requestheader-uid-headers': '["X-Remote-Uid"]',
  'requestheader-group-headers': '["X-Remote-Group"]',
  'requestheader-extra-headers-prefix': '["X-Remote-Extra-"]',
};
const { config } = parseAuthenticationConfig(data);
const now = new Date();
const frontProxy = [x509(frontProxyCa.issue('front-proxy-client', { client: true }).cert)];

describe('parseAuthenticationConfig', () => {
  it('reads both bundles and the header names (lower-cased), and keeps the PEM for the TLS layer', () => {
    expect(config.requestHeader).toMatchObject({
      allowedNames: ['front-proxy-client'],
      usernameHeaders: ['x-remote-user'],
      uidHeaders: ['x-remote-uid'],
      groupHeaders: ['x-remote-group'],
      extraHeaderPrefixes: ['x-remote-extra-'],
    });
    expect(config.clientCa).toHaveLength(1);
    expect(config.caPem).toEqual([clientCa.cert, frontProxyCa.cert]);
  });

  it('leaves out what it cannot read and says why', () => {
    const { config: c, problems } = parseAuthenticationConfig({
      'client-ca-file': 'garbage',
      'requestheader-client-ca-file': frontProxyCa.cert,
      'requestheader-allowed-names': '{"a":1}',
    });
    expect(c.clientCa).toBeUndefined();
    expect(c.requestHeader?.allowedNames).toEqual([]);
    expect(problems).toEqual([
      'client-ca-file: no PEM certificate',
      'requestheader-allowed-names: not a JSON array of strings',
      'requestheader-username-headers: empty, so no request through the aggregator names a user',
    ]);
    expect(parseAuthenticationConfig(undefined)).toEqual({ config: { caPem: [], clientCa: undefined }, problems: [] });
  });
});

describe('authenticate', () => {
  it("takes the user, every group and the extras from the front proxy's headers", () => {
    const headers = {
      'x-remote-user': ['alice'],
      'x-remote-group': ['ops', 'a,b'],
      'x-remote-extra-scopes%2fx': ['1', '2'],
      authorization: ['Bearer ignored'],
    };
    expect(authenticate(config, { chain: frontProxy, headers }, now)).toEqual({
      kind: 'user',
      method: 'front-proxy',
      user: { username: 'alice', groups: ['ops', 'a,b'], extra: { 'scopes/x': ['1', '2'] } },
    });
  });

  it('takes the UID from requestheader-uid-headers when the ConfigMap names them, and only then', () => {
    const headers = { 'x-remote-user': ['alice'], 'x-remote-uid': ['', ' 1f2e-3d4c '] };
    expect(authenticate(config, { chain: frontProxy, headers }, now)).toMatchObject({
      kind: 'user',
      user: { username: 'alice', uid: '1f2e-3d4c' },
    });
    const { 'requestheader-uid-headers': _, ...published128 } = data;
    const before133 = parseAuthenticationConfig(published128).config;
    expect(before133.requestHeader?.uidHeaders).toEqual([]);
    const auth = authenticate(before133, { chain: frontProxy, headers }, now);
    expect(auth.kind === 'user' && 'uid' in auth.user).toBe(false);
  });

  it('ignores identity headers on a request without the front-proxy certificate', () => {
    const headers = { 'x-remote-user': ['system:admin'], 'x-remote-group': ['system:masters'] };
    expect(authenticate(config, { chain: [], headers }, now)).toMatchObject({ kind: 'none' });
    expect(authenticate(config, { chain: [], headers: { ...headers, authorization: ['Bearer t0k'] } }, now)).toEqual({
      kind: 'token',
      token: 't0k',
    });
    const carol = [x509(clientCa.issue('carol', { client: true, organizations: ['ops', 'dev'] }).cert)];
    expect(authenticate(config, { chain: carol, headers }, now)).toEqual({
      kind: 'user',
      method: 'x509',
      user: { username: 'carol', groups: ['ops', 'dev'] },
    });
  });

  it('refuses a front-proxy CA certificate whose name is not allowed, and any name when the list is empty', () => {
    const other = [x509(frontProxyCa.issue('someone-else', { client: true }).cert)];
    const headers = { 'x-remote-user': ['alice'] };
    expect(authenticate(config, { chain: other, headers }, now)).toEqual({
      kind: 'none',
      reasons: ['front-proxy certificate "someone-else" is not in requestheader-allowed-names'],
    });
    const open = parseAuthenticationConfig({ ...data, 'requestheader-allowed-names': '[]' }).config;
    expect(authenticate(open, { chain: other, headers }, now)).toMatchObject({
      kind: 'user',
      user: { username: 'alice' },
    });
  });

  it('refuses certificates from another CA, and falls through when the front proxy names nobody', () => {
    const stranger = [x509(createCa('other').issue('front-proxy-client', { client: true }).cert)];
    expect(authenticate(config, { chain: stranger, headers: { 'x-remote-user': ['alice'] } }, now)).toEqual({
      kind: 'none',
      reasons: ['client certificate does not chain to requestheader-client-ca-file or client-ca-file'],
    });
    expect(authenticate(config, { chain: frontProxy, headers: {} }, now)).toMatchObject({
      kind: 'none',
      reasons: ['front-proxy certificate "front-proxy-client" sent no x-remote-user header'],
    });
  });

  it('adds system:authenticated once', () => {
    expect(withAuthenticatedGroup({ username: 'a' }).groups).toEqual(['system:authenticated']);
    expect(withAuthenticatedGroup({ username: 'a', groups: ['system:authenticated', 'x'] }).groups).toEqual([
      'system:authenticated',
      'x',
    ]);
  });
});

describe('certificates', () => {
  it('checks validity, signature and the client-auth usage', () => {
    const anchors = [x509(clientCa.cert)];
    const leaf = x509(clientCa.issue('carol', { client: true }).cert);
    expect(verifyClientChain([leaf], anchors, now)).toBe(true);
    expect(verifyClientChain([leaf], anchors, new Date(Date.now() + 30 * 86_400_000))).toBe(false);
    expect(verifyClientChain([leaf], [x509(frontProxyCa.cert)], now)).toBe(false);
    expect(verifyClientChain([], anchors, now)).toBe(false);
  });

  it('reads CN and O from the DER, so a crafted value cannot pose as another attribute', () => {
    const cert = x509(clientCa.issue('alice\nO=system:masters', { client: true, organizations: ['ops, team'] }).cert);
    expect(subjectNames(cert)).toEqual({ commonName: 'alice\nO=system:masters', organizations: ['ops, team'] });
  });
});

describe('requestAttributes', () => {
  const at = (method: string, path: string) => requestAttributes(method, new URL(path, 'https://x'));
  it('names resource requests as RequestInfo does, and everything else by path', () => {
    const gv = { group: 'dns.spoke-agent.io', version: 'v1alpha1' };
    expect(at('GET', '/apis/dns.spoke-agent.io/v1alpha1/resolutions/cluster1?type=AAAA')).toEqual({
      verb: 'get',
      ...gv,
      resource: 'resolutions',
      name: 'cluster1',
    });
    expect(at('GET', '/apis/dns.spoke-agent.io/v1alpha1/rules')).toEqual({ verb: 'list', ...gv, resource: 'rules' });
    expect(at('GET', '/apis/dns.spoke-agent.io/v1alpha1/rules?watch=true')).toEqual({
      verb: 'watch',
      ...gv,
      resource: 'rules',
    });
    expect(at('POST', '/apis/dns.spoke-agent.io/v1alpha1/rules')).toEqual({ verb: 'create', ...gv, resource: 'rules' });
    expect(at('DELETE', '/apis/dns.spoke-agent.io/v1alpha1/rules')).toEqual({
      verb: 'deletecollection',
      ...gv,
      resource: 'rules',
    });
    expect(at('PUT', '/apis/g/v/things/a/status')).toEqual({
      verb: 'update',
      group: 'g',
      version: 'v',
      resource: 'things',
      name: 'a',
      subresource: 'status',
    });
    expect(at('GET', '/apis/dns.spoke-agent.io/v1alpha1')).toEqual({
      verb: 'get',
      path: '/apis/dns.spoke-agent.io/v1alpha1',
    });
    expect(at('GET', '/apis')).toEqual({ verb: 'get', path: '/apis' });
    expect(at('GET', '/openapi/v2')).toEqual({ verb: 'get', path: '/openapi/v2' });
    expect(at('GET', '/apis/g/v/things/a%zz')).toMatchObject({ name: 'a%zz' });
  });

  it('words a 403 as the API server does', () => {
    expect(forbiddenMessage('bob', { verb: 'get', path: '/apis' }, undefined)).toBe(
      'forbidden: User "bob" cannot get path "/apis"',
    );
    expect(forbiddenMessage('bob', { verb: 'list', group: 'g', version: 'v', resource: 'rules' }, 'no')).toBe(
      'rules.g is forbidden: User "bob" cannot list resource "rules" in API group "g" at the cluster scope: no',
    );
  });
});

describe('negotiate', () => {
  const v1 = { kind: 'table', apiVersion: 'meta.k8s.io/v1' };
  it('serves kubectl get a Table, anyone else plain JSON, and nothing else', () => {
    const kubectlGet =
      'application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json';
    expect(negotiate(kubectlGet, true)).toEqual(v1);
    expect(negotiate(kubectlGet, false)).toEqual({ kind: 'json' });
    expect(negotiate('application/json;as=Table;v=v1beta1;g=meta.k8s.io', true)).toEqual({
      kind: 'table',
      apiVersion: 'meta.k8s.io/v1beta1',
    });
    expect(negotiate(undefined, true)).toEqual({ kind: 'json' });
    expect(negotiate('application/json, */*', true)).toEqual({ kind: 'json' });
    expect(negotiate('application/json;q=0.5,application/json;as=Table;v=v1;g=meta.k8s.io', true)).toEqual(v1);
  });

  it('is 406 for aggregated discovery or protobuf alone (how the 1.28 aggregator falls back)', () => {
    expect(
      negotiate('application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList', false),
    ).toBeUndefined();
    expect(negotiate('application/vnd.kubernetes.protobuf', true)).toBeUndefined();
    expect(negotiate('application/json;as=Table;v=v1;g=meta.k8s.io', false)).toBeUndefined();
    expect(negotiate('application/json;as=Table;v=v2;g=meta.k8s.io', true)).toBeUndefined();
  });
});

describe('tables', () => {
  it('prints ages as kubectl does', () => {
    const s = 1000;
    expect(
      [
        -5 * s,
        -1 * s,
        0,
        119 * s,
        120 * s,
        125 * s,
        10 * 60 * s,
        3 * 3600 * s,
        3 * 3600 * s + 60 * s,
        9 * 3600 * s,
        50 * 3600 * s,
        51 * 3600 * s,
        30 * 86400 * s,
        800 * 86400 * s,
        3650 * 86400 * s,
      ].map(humanDuration),
    ).toEqual([
      '<invalid>',
      '0s',
      '0s',
      '119s',
      '2m',
      '2m5s',
      '10m',
      '3h',
      '3h1m',
      '9h',
      '2d2h',
      '2d3h',
      '30d',
      '2y70d',
      '10y',
    ]);
    expect([shortList([]), shortList(['a', 'b']), shortList(['a', 'b', 'c', 'd', 'e'])]).toEqual([
      '<none>',
      'a,b',
      'a,b,c + 2 more...',
    ]);
  });

  const now = Date.parse('2026-11-10T12:00:00Z');
  const rule = {
    apiVersion: 'dns.spoke-agent.io/v1alpha1',
    kind: 'Rule',
    metadata: { name: 'search.default.cluster1', creationTimestamp: '2026-11-10T11:55:00Z' },
    spec: {
      source: '--expose=default/search',
      kind: 'service' as const,
      names: ['search.default.cluster1', 'cluster-proxy-x'],
      target: { kind: 'fqdn' as const, fqdn: 'search.default.svc.cluster.local' },
    },
  };

  it("has the columns an operator reads first, more with -o wide (priority 1), and the row's metadata", () => {
    const t = table(ruleColumns, [rule], {
      apiVersion: 'meta.k8s.io/v1',
      includeObject: 'Metadata',
      withColumns: true,
      now,
      resourceVersion: '7',
    });
    expect(t).toMatchObject({ kind: 'Table', apiVersion: 'meta.k8s.io/v1', metadata: { resourceVersion: '7' } });
    expect(t.columnDefinitions!.map((c) => `${c.name}/${c.priority}`)).toEqual([
      'Name/0',
      'Kind/0',
      'Names/0',
      'Target/0',
      'Source/0',
      'Age/0',
      'Wildcard/1',
    ]);
    expect(t.columnDefinitions![0]).toMatchObject({ type: 'string', format: 'name' });
    expect(t.rows).toEqual([
      {
        cells: [
          'search.default.cluster1',
          'service',
          'search.default.cluster1,cluster-proxy-x',
          'search.default.svc.cluster.local',
          '--expose=default/search',
          '5m',
          '<none>',
        ],
        object: { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: rule.metadata },
      },
    ]);
    expect(
      table(ruleColumns, [rule], { apiVersion: 'meta.k8s.io/v1', includeObject: 'Object', withColumns: false, now })
        .rows[0]!.object,
    ).toBe(rule);
    const bare = table(ruleColumns, [rule], {
      apiVersion: 'meta.k8s.io/v1',
      includeObject: 'None',
      withColumns: false,
      now,
    });
    expect('columnDefinitions' in bare || 'object' in bare.rows[0]!).toBe(false);
    expect(resolutionColumns.filter((c) => c.priority === 0).map((c) => c.name)).toEqual([
      'Name',
      'Type',
      'Action',
      'Rule',
      'Target',
      'Rcode',
      'Addresses',
    ]);
  });

  it('shows a query\'s latency when it was timed, "cached" for an answers-cache hit', () => {
    const latency = queryColumns.find((c) => c.name === 'Latency')!;
    const q = (status: Partial<QueryObject['status']>): QueryObject => ({
      apiVersion: 'dns.spoke-agent.io/v1alpha1',
      kind: 'Query',
      metadata: { name: 'x-1', resourceVersion: 'x-1', creationTimestamp: '2026-11-10T11:55:00Z' },
      spec: { name: 'a', type: 'A', client: '10.0.0.1', clientPort: 1, transport: 'udp' as const },
      status: { rcode: 'NOERROR', source: 'rule', truncated: false, cached: false, time: '', ...status },
    });
    expect([
      latency.cell(q({ ms: 1.25 }), now),
      latency.cell(q({ cached: true }), now),
      latency.cell(q({ source: 'error' }), now),
    ]).toEqual(['1.25ms', 'cached', '<none>']);
  });
});

describe('OpenAPI', () => {
  // biome-ignore lint/suspicious/noExplicitAny: documents are plain JSON, read by path
  type Json = Record<string, any>;
  const v3 = JSON.parse(openApiV3().body) as Json;
  const v2 = JSON.parse(openApiV2().body) as Json;
  const schemas = { v3: v3.components.schemas as Json, v2: v2.definitions as Json };
  const resolve = (dialect: 'v2' | 'v3', s: Json): Json => {
    const r = s.$ref ?? s.allOf?.[0]?.$ref;
    return r ? schemas[dialect][r.split('/').pop()] : s;
  };

  /** Checks `value` against `schema` the way kubectl explain reads it: every field declared and described, types and required fields right. */
  function conforms(dialect: 'v2' | 'v3', schema: Json, value: unknown, at: string): string[] {
    const s = resolve(dialect, schema);
    if (!s) return [`${at}: unresolved ${JSON.stringify(schema)}`];
    if (Array.isArray(value))
      return s.type === 'array'
        ? value.flatMap((v, i) => conforms(dialect, s.items, v, `${at}[${i}]`))
        : [`${at}: array where ${s.type}`];
    if (value !== null && typeof value === 'object') {
      if (s.type !== 'object') return [`${at}: object where ${s.type}`];
      const problems = (s.required ?? [])
        .filter((k: string) => !(k in value))
        .map((k: string) => `${at}.${k}: required, missing`);
      for (const [k, v] of Object.entries(value)) {
        const field = s.properties?.[k];
        if (!field) problems.push(`${at}.${k}: not in the schema`);
        else if (!field.description) problems.push(`${at}.${k}: no description`);
        else problems.push(...conforms(dialect, field, v, `${at}.${k}`));
      }
      return problems;
    }
    const type =
      typeof value === 'number'
        ? Number.isInteger(value) && s.type === 'integer'
          ? 'integer'
          : 'number'
        : typeof value;
    return type === s.type ? [] : [`${at}: ${type} where ${s.type}`];
  }

  const rules = parseRules({
    naming: { cluster: 'cluster1', agentNamespace: 'ns', clusterDomain: 'cluster.test' },
    expose: ['default/search', 'prod/*'],
  });
  if (!rules.ok) throw new Error(rules.errors.join());
  const log = new QueryLog({ size: 4 });
  const msg = encodeQuery('search.default.cluster1', 1);
  const asked = new DnsRequest(
    msg,
    parseQuery(msg) as Query,
    'udp',
    () => {},
    { address: '10.0.0.9', port: 5 },
    Date.now(),
    -1,
  );
  const meta = { source: 'rule' as const, rule: '--expose=default/search', target: 't', answer: ['A 10.0.0.1'] };
  log.record(Object.assign(asked, { meta, ms: 0.2 }));
  const unreadable = { id: 0, opcode: 0, rd: false, rcode: 1 };
  log.record(
    Object.assign(new DnsRequest(msg, unreadable, 'tcp', () => {}, { address: '10.0.0.9', port: 6 }, Date.now(), -1), {
      rcode: 1,
    }),
  );
  const dialLog = new DialLog({ size: 4 });
  const open = new Dial(Date.now(), 0, 'server-1', 'search.default.cluster1:443');
  Object.assign(open, { connectID: '7', rule: '--expose=default/search', name: 't', address: '10.0.0.1', dialMs: 1.5 });
  dialLog.added(open);
  const denied = new Dial(Date.now(), 0, 'server-1', '169.254.169.254:80');
  Object.assign(denied, { result: 'denied', reason: 'not allowed', address: '169.254.169.254' });
  dialLog.added(denied);
  Object.assign(open, { bytesToTarget: 10, bytesFromTarget: 20, durationMs: 30, closedBy: 'CLOSE_REQ' });
  dialLog.modified(open);
  const explanation = {
    name: 'search.default.cluster1',
    type: 'A',
    action: 'rule' as const,
    rule: { source: '--expose=default/search', kind: 'service' },
    target: 'search.default.svc.cluster.test',
    rcode: 'NOERROR',
    flags: ['qr', 'aa'],
    answer: [{ name: 'search.default.cluster1', type: 'CNAME', ttl: 5, data: 'search.default.svc.cluster.test' }],
    authority: [],
    ms: 0.5,
  };
  const served = {
    'io.spoke-agent.dns.v1alpha1.Resolution': [resolution(explanation)],
    'io.spoke-agent.dns.v1alpha1.RuleList': [ruleList(new RuleHolder(rules.value))],
    'io.spoke-agent.dns.v1alpha1.Query': log.entries().map((e) => query(e, log)),
    'io.spoke-agent.dns.v1alpha1.Dial': dialLog.current().map((e) => dial(e, dialLog)),
  };

  it('describes every field of every object the API serves, in both documents', () => {
    for (const dialect of ['v3', 'v2'] as const) {
      for (const [name, objects] of Object.entries(served))
        for (const o of objects) expect(conforms(dialect, { $ref: `#/x/${name}` }, o, name), dialect).toEqual([]);
    }
    const q = served['io.spoke-agent.dns.v1alpha1.Query']![0]!;
    expect(
      conforms(
        'v3',
        { $ref: '#/x/io.spoke-agent.dns.v1alpha1.Query' },
        { ...q, extra: 1, spec: { ...q.spec, clientPort: 'x' } },
        'q',
      ),
    ).toEqual(['q.spec.clientPort: string where integer', 'q.extra: not in the schema']);
  });

  it('ties each kind to its group, version and paths, as kubectl explain looks them up', () => {
    const gvk = (kind: string) => ({ group: 'dns.spoke-agent.io', kind, version: 'v1alpha1' });
    for (const kind of ['Resolution', 'Rule', 'RuleList', 'Query', 'QueryList', 'Dial', 'DialList']) {
      expect(schemas.v3[`io.spoke-agent.dns.v1alpha1.${kind}`]['x-kubernetes-group-version-kind']).toEqual([gvk(kind)]);
      expect(schemas.v2[`io.spoke-agent.dns.v1alpha1.${kind}`]['x-kubernetes-group-version-kind']).toEqual([gvk(kind)]);
    }
    const base = '/apis/dns.spoke-agent.io/v1alpha1';
    for (const doc of [v3, v2]) {
      expect(
        Object.fromEntries(
          Object.entries(doc.paths as Json).map(([p, ops]) => [
            p,
            [ops.get['x-kubernetes-action'], ops.get['x-kubernetes-group-version-kind'].kind],
          ]),
        ),
      ).toEqual({
        [`${base}/resolutions/{name}`]: ['get', 'Resolution'],
        [`${base}/rules`]: ['list', 'Rule'],
        [`${base}/queries`]: ['list', 'Query'],
        [`${base}/queries/{name}`]: ['get', 'Query'],
        [`${base}/dials`]: ['list', 'Dial'],
        [`${base}/dials/{name}`]: ['get', 'Dial'],
      });
    }
    expect(v3.paths[`${base}/queries`].get.responses['200'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/io.spoke-agent.dns.v1alpha1.QueryList',
    });
    expect(v2.paths[`${base}/queries`].get.responses['200'].schema).toEqual({
      $ref: '#/definitions/io.spoke-agent.dns.v1alpha1.QueryList',
    });
    // A described reference: v3 wraps it (siblings of $ref are ignored there), v2 keeps the sibling.
    expect(schemas.v3['io.spoke-agent.dns.v1alpha1.Query'].properties.metadata).toEqual({
      description: expect.any(String),
      allOf: [{ $ref: '#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta' }],
    });
    expect(schemas.v2['io.spoke-agent.dns.v1alpha1.Query'].properties.metadata).toEqual({
      $ref: '#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta',
      description: expect.any(String),
    });
  });

  it('publishes the v3 document under a hash of its content, with that hash as its ETag', () => {
    expect(v3).toMatchObject({ openapi: '3.0.0' });
    expect(v2).toMatchObject({ swagger: '2.0' });
    expect(openApiV3Discovery()).toEqual({
      paths: {
        'apis/dns.spoke-agent.io/v1alpha1': {
          serverRelativeURL: `/openapi/v3/apis/dns.spoke-agent.io/v1alpha1?hash=${openApiV3().hash}`,
        },
      },
    });
    expect(openApiV3().etag).toBe(`"${openApiV3().hash}"`);
    expect(openApiV3().hash).toMatch(/^[0-9A-F]{128}$/);
  });
});
