// A Kubernetes API server for tests, on loopback with plain node:http (or https, as a pod's in-cluster
// configuration requires), and a real kubeconfig file pointing at it. It serves what spoke-agent uses with the real semantics: list with a collection
// resourceVersion, watch from a resourceVersion as newline-delimited JSON events (410 Gone in an ERROR
// event for a compacted version), label and field selectors, bearer-token authentication, and
// TokenReview / SubjectAccessReview with answers the test sets, 403 Forbidden for paths the test denies
// (RBAC as the agent sees it). Faults on demand: 500s, dropped
// watches, the whole server down and back on the same port.
import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type LabelRequirement, parseLabelSelector } from '../../flags/label-selector.js';

export type Collection = 'configmaps' | 'services' | 'namespaces' | 'leases';

interface Obj {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    uid?: string;
  };
  [key: string]: unknown;
}

interface Event {
  rv: number;
  collection: Collection;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: Obj;
}

interface Watcher {
  collection: Collection;
  namespace?: string;
  matches: (o: Obj) => boolean;
  res: http.ServerResponse;
}

const kinds: Record<Collection, string> = {
  configmaps: 'ConfigMap',
  services: 'Service',
  namespaces: 'Namespace',
  leases: 'Lease',
};
const apiVersions: Record<Collection, string> = {
  configmaps: 'v1',
  services: 'v1',
  namespaces: 'v1',
  leases: 'coordination.k8s.io/v1',
};

export interface FakeUser {
  username: string;
  uid?: string;
  groups?: string[];
}

export class FakeApiServer {
  readonly token = 'fake-admin-token';
  /** Every request, as `METHOD path?query`. */
  readonly requests: string[] = [];
  /** TokenReview answers: token -> user; other tokens are not authenticated. */
  readonly users = new Map<string, FakeUser>();
  /**
   * SubjectAccessReview answers: `SUBJECT VERB TARGET` entries are allowed, where SUBJECT is the
   * username or `group:NAME`, and TARGET a non-resource path or `resource.group` (any object name).
   */
  readonly allowed = new Set<string>();
  /** The spec of every SubjectAccessReview asked. */
  readonly accessReviews: Array<Record<string, unknown>> = [];
  private readonly objects = new Map<string, Obj>();
  private history: Event[] = [];
  /** Watches from a resourceVersion below this get 410 Gone. */
  private oldestRv = 0;
  private rv = 100;
  private readonly watchers = new Set<Watcher>();
  private readonly sockets = new Set<Socket>();
  private failures: Array<{ status: number; match: (path: string) => boolean }> = [];
  /** Request paths answered 403 Forbidden, as RBAC would for a service account without the right. */
  readonly forbidden = new Set<string>();
  private server!: http.Server;
  port = 0;
  kubeconfigPath = '';

  private constructor(private readonly listenOn: { host: string; tls?: { cert: Buffer; key: Buffer } }) {}

  /** On `host` (127.0.0.1) and `port` (any), over TLS with `tls`, as an API server in a cluster is. */
  static async start(
    opts: { host?: string; port?: number; tls?: { cert: Buffer; key: Buffer } } = {},
  ): Promise<FakeApiServer> {
    const s = new FakeApiServer({ host: opts.host ?? '127.0.0.1', tls: opts.tls });
    await s.listen(opts.port);
    const dir = mkdtempSync(join(tmpdir(), 'fake-apiserver-'));
    s.kubeconfigPath = join(dir, 'kubeconfig');
    writeFileSync(
      s.kubeconfigPath,
      [
        'apiVersion: v1',
        'kind: Config',
        // client-node refuses a plain-HTTP server unless TLS verification is off (there is no TLS to verify).
        `clusters: [{name: fake, cluster: {server: "${s.url}", insecure-skip-tls-verify: true}}]`,
        `users: [{name: admin, user: {token: ${s.token}}}]`,
        'contexts: [{name: fake, context: {cluster: fake, user: admin}}]',
        'current-context: fake',
        '',
      ].join('\n'),
    );
    return s;
  }

  get url(): string {
    return `${this.listenOn.tls ? 'https' : 'http'}://${this.listenOn.host}:${this.port}`;
  }

  // --- objects ---

  apply(collection: Collection, obj: { metadata: Obj['metadata']; [key: string]: unknown }): void {
    const key = this.key(collection, obj.metadata.namespace, obj.metadata.name);
    const existing = this.objects.get(key);
    const stored: Obj = {
      apiVersion: apiVersions[collection],
      kind: kinds[collection],
      ...structuredClone(obj),
      metadata: {
        ...structuredClone(obj.metadata),
        uid: existing?.metadata.uid ?? `uid-${key}`,
        resourceVersion: String(++this.rv),
      },
    };
    this.objects.set(key, stored);
    this.record({ rv: this.rv, collection, type: existing ? 'MODIFIED' : 'ADDED', object: stored });
  }

  delete(collection: Collection, namespace: string | undefined, name: string): void {
    const key = this.key(collection, namespace, name);
    const existing = this.objects.get(key);
    if (!existing) return;
    this.objects.delete(key);
    const object = { ...existing, metadata: { ...existing.metadata, resourceVersion: String(++this.rv) } };
    this.record({ rv: this.rv, collection, type: 'DELETED', object });
  }

  configMap(namespace: string, name: string, data: Record<string, string>): void {
    this.apply('configmaps', { metadata: { namespace, name }, data });
  }

  service(namespace: string, name: string, annotations: Record<string, string> = {}): void {
    this.apply('services', {
      metadata: { namespace, name, annotations },
      spec: { type: 'ClusterIP', ports: [{ port: 80 }] },
    });
  }

  namespace(name: string, labels: Record<string, string> = {}): void {
    this.apply('namespaces', { metadata: { name, labels } });
  }

  /** A proxy-server's Lease as --enable-lease-controller keeps it, renewed at `renewTime`. */
  lease(
    namespace: string,
    name: string,
    opts: { labels?: Record<string, string>; renewTime?: Date; durationSeconds?: number } = {},
  ): void {
    const spec = {
      holderIdentity: name,
      leaseDurationSeconds: opts.durationSeconds ?? 30,
      renewTime: (opts.renewTime ?? new Date()).toISOString(),
    };
    this.apply('leases', {
      metadata: { namespace, name, labels: opts.labels ?? { 'k8s-app': 'konnectivity-server' } },
      spec,
    });
  }

  // --- faults ---

  /** Forgets the event history: a watch from an older resourceVersion gets 410 Gone. */
  compact(): void {
    this.history = [];
    this.oldestRv = this.rv;
  }

  /** The next `count` requests whose path matches answer `status`. */
  failNext(count: number, status = 500, match: (path: string) => boolean = () => true): void {
    for (let i = 0; i < count; i++) this.failures.push({ status, match });
  }

  /** Cuts every open watch without a final event, as a load balancer or a crashing server would. */
  dropWatches(): void {
    for (const w of this.watchers) w.res.socket?.destroy();
    this.watchers.clear();
  }

  get openWatches(): number {
    return this.watchers.size;
  }

  /** The server goes away: open connections are cut and new ones are refused. */
  async down(): Promise<void> {
    this.watchers.clear();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  /** Back on the same port, with the same objects. */
  async up(): Promise<void> {
    await this.listen(this.port);
  }

  async close(): Promise<void> {
    if (this.server.listening) await this.down();
  }

  // --- HTTP ---

  private async listen(port = 0): Promise<void> {
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => this.handle(req, res);
    this.server = this.listenOn.tls ? https.createServer(this.listenOn.tls, handler) : http.createServer(handler);
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, this.listenOn.host, () => resolve());
    });
    this.port = (this.server.address() as AddressInfo).port;
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://x');
    this.requests.push(`${req.method} ${url.pathname}${url.search}`);
    if (req.headers.authorization !== `Bearer ${this.token}`) return status(res, 401, 'Unauthorized', 'Unauthorized');
    if (this.forbidden.has(url.pathname))
      return status(res, 403, 'Forbidden', `forbidden: cannot ${req.method} ${url.pathname}`);
    const failure = this.failures.findIndex((f) => f.match(url.pathname));
    if (failure !== -1) {
      const [f] = this.failures.splice(failure, 1);
      return status(res, f!.status, 'InternalError', 'injected failure');
    }
    if (req.method === 'POST') return void readJson(req).then((body) => this.review(url.pathname, body, res));
    const m =
      /^\/(?:api\/v1|apis\/coordination\.k8s\.io\/v1)(?:\/namespaces\/([^/]+))?\/(configmaps|services|namespaces|leases)$/.exec(
        url.pathname,
      );
    if (req.method !== 'GET' || !m)
      return status(res, 404, 'NotFound', `the server could not find the requested resource (${url.pathname})`);
    const [, namespace, collection] = m as unknown as [string, string | undefined, Collection];
    let matches: (o: Obj) => boolean;
    try {
      matches = selectorMatcher(
        url.searchParams.get('labelSelector') ?? '',
        url.searchParams.get('fieldSelector') ?? '',
      );
    } catch (err) {
      return status(res, 400, 'BadRequest', (err as Error).message);
    }
    if (url.searchParams.get('watch') === 'true')
      return this.watch(collection, namespace, matches, url.searchParams.get('resourceVersion') ?? '', res);
    const items = [...this.objects.entries()]
      .filter(
        ([k, o]) => k.startsWith(`${collection}/`) && (!namespace || o.metadata.namespace === namespace) && matches(o),
      )
      .map(([, o]) => o);
    json(res, 200, {
      apiVersion: apiVersions[collection],
      kind: `${kinds[collection]}List`,
      metadata: { resourceVersion: String(this.rv) },
      items,
    });
  }

  private watch(
    collection: Collection,
    namespace: string | undefined,
    matches: (o: Obj) => boolean,
    from: string,
    res: http.ServerResponse,
  ): void {
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders(); // as the API server does: the client's watch() resolves on the headers
    const relevant = (e: Event) =>
      e.collection === collection && (!namespace || e.object.metadata.namespace === namespace) && matches(e.object);
    if (from === '' || from === '0') {
      // No version: synthetic ADDED events for what exists, then changes.
      for (const [k, o] of this.objects)
        if (k.startsWith(`${collection}/`) && relevant({ rv: 0, collection, type: 'ADDED', object: o }))
          send(res, 'ADDED', o);
    } else if (Number(from) < this.oldestRv) {
      send(res, 'ERROR', {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: `too old resource version: ${from} (${this.oldestRv})`,
        reason: 'Expired',
        code: 410,
      });
      res.end();
      return;
    } else {
      for (const e of this.history) if (e.rv > Number(from) && relevant(e)) send(res, e.type, e.object);
    }
    const watcher: Watcher = { collection, namespace, matches, res };
    this.watchers.add(watcher);
    res.on('close', () => this.watchers.delete(watcher));
  }

  private record(e: Event): void {
    this.history.push(e);
    for (const w of this.watchers) {
      if (
        w.collection === e.collection &&
        (!w.namespace || e.object.metadata.namespace === w.namespace) &&
        w.matches(e.object)
      )
        send(w.res, e.type, e.object);
    }
  }

  private review(path: string, body: { spec?: Record<string, unknown> }, res: http.ServerResponse): void {
    const spec = body.spec ?? {};
    if (path === '/apis/authentication.k8s.io/v1/tokenreviews') {
      const user = this.users.get(String(spec.token));
      return json(res, 201, {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenReview',
        spec,
        status: user ? { authenticated: true, user } : { authenticated: false, error: 'invalid bearer token' },
      });
    }
    if (path === '/apis/authorization.k8s.io/v1/subjectaccessreviews') {
      this.accessReviews.push(spec);
      const nonResource = spec.nonResourceAttributes as { verb?: string; path?: string } | undefined;
      const resource = spec.resourceAttributes as { verb?: string; group?: string; resource?: string } | undefined;
      const action = nonResource
        ? `${nonResource.verb} ${nonResource.path}`
        : `${resource?.verb} ${resource?.resource}.${resource?.group}`;
      const subjects = [String(spec.user), ...((spec.groups as string[] | undefined) ?? []).map((g) => `group:${g}`)];
      const allowed = subjects.some((s) => this.allowed.has(`${s} ${action}`));
      return json(res, 201, {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec,
        status: { allowed, ...(allowed ? {} : { reason: 'no RBAC policy matched' }) },
      });
    }
    status(res, 404, 'NotFound', `no such review ${path}`);
  }

  private key(collection: Collection, namespace: string | undefined, name: string): string {
    return `${collection}/${namespace ?? ''}/${name}`;
  }
}

function send(res: http.ServerResponse, type: string, object: unknown): void {
  res.write(`${JSON.stringify({ type, object })}\n`);
}

function json(res: http.ServerResponse, code: number, body: unknown): void {
  res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function status(res: http.ServerResponse, code: number, reason: string, message: string): void {
  json(res, code, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code });
}

function readJson(req: http.IncomingMessage): Promise<{ spec?: Record<string, unknown> }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString() || '{}'));
      } catch {
        resolve({});
      }
    });
  });
}

/** Label selectors in the full syntax (flags/label-selector.ts), and field selectors on metadata.name / metadata.namespace. */
function selectorMatcher(labelSelector: string, fieldSelector: string): (o: Obj) => boolean {
  const requirements = parseLabelSelector(labelSelector);
  if (typeof requirements === 'string') throw new Error(requirements);
  const fields = fieldSelector
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean)
    .map((t) => {
      const [key, value] = t.split('=') as [string, string];
      return { key, value };
    });
  return (o) =>
    selectorMatches(requirements, o.metadata.labels ?? {}) &&
    fields.every(
      ({ key, value }) =>
        (key === 'metadata.name'
          ? o.metadata.name
          : key === 'metadata.namespace'
            ? o.metadata.namespace
            : undefined) === value,
    );
}

/** Whether `labels` satisfy every requirement (as the API server filters a list). */
export function selectorMatches(requirements: readonly LabelRequirement[], labels: Record<string, string>): boolean {
  return requirements.every(({ key, operator, values }) => {
    const has = Object.hasOwn(labels, key);
    const value = labels[key];
    switch (operator) {
      case 'exists':
        return has;
      case '!':
        return !has;
      case '=':
      case '==':
      case 'in':
        return has && values.includes(value!);
      case '!=':
      case 'notin':
        return !has || !values.includes(value!);
      case 'gt':
        return has && /^-?\d+$/.test(value!) && Number(value) > Number(values[0]);
      case 'lt':
        return has && /^-?\d+$/.test(value!) && Number(value) < Number(values[0]);
      default:
        return false;
    }
  });
}
