// The dns.spoke-agent.io API over TLS: each request is authenticated (front-proxy headers, client
// certificate or bearer token: authentication.ts), authorized with a SubjectAccessReview for what it
// asks (attributes.ts), then answered (routes.ts). Token and access reviews are cached as the generic
// API server caches them (reviewCache); an API server that does not answer is a 503, never cached. The serving certificate is re-read when
// its files change (a mounted Secret's rotation), the CA names asked of clients when the
// authentication configuration does.
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Registry } from 'prom-client';
import { type Clock, systemClock } from '../clock/clock.js';
import { watchCredentialFolders, type CredentialWatch } from '../tls/folder-watch.js';
import { TlsFingerprint } from '../agent/credentials.js';
import { streamLiveLog } from '../live-log/stream.js';
import {
  authUnavailable,
  forbiddenMessage,
  tokenKey,
  type AccessAttributes,
  type Reviewer,
  type UserInfo,
} from '../kube/delegated-auth.js';
import { TtlCache } from '../kube/ttl-cache.js';
import { closeServer, listenOn } from '../observability/listen.js';
import type { Logger } from '../observability/log.js';
import { requestAttributes } from './attributes.js';
import { authenticate, withAuthenticatedGroup, type AuthenticationConfig } from './authentication.js';
import { ApiMetrics } from './metrics.js';
import { status } from './objects.js';
import { route, type Answer, type RouteDeps } from './routes.js';

export interface ApiServerOptions {
  host: string;
  port: number;
  certFile: string;
  keyFile: string;
  authentication: AuthenticationConfig;
  reviewer: Reviewer;
  routes: RouteDeps;
  log: Logger;
  registry: Registry;
  /** What the review caches expire on, and the certificate's poll where its folder cannot be watched waits on. */
  clock?: Clock;
}

/**
 * The defaults of k8s.io/apiserver's delegated authentication and authorization: TokenReview answers
 * 10 s, SubjectAccessReview answers 10 s allowed and 10 s denied; system:masters is allowed without a
 * review.
 */
const reviewCache = { tokenMs: 10_000, allowedMs: 10_000, deniedMs: 10_000 };
const alwaysAllowedGroup = 'system:masters';

type Access = { allowed: boolean; reason?: string };

/** The client's certificate chain, parsed once per connection (the aggregator keeps its connections). */
const chains = new WeakMap<TLSSocket, X509Certificate[]>();
function peerChain(socket: TLSSocket): X509Certificate[] {
  let chain = chains.get(socket);
  if (chain) return chain;
  chain = [];
  const seen = new Set<object>();
  for (let c = socket.getPeerCertificate(true); c?.raw && !seen.has(c); c = c.issuerCertificate) {
    seen.add(c);
    chain.push(new X509Certificate(c.raw));
  }
  chains.set(socket, chain);
  return chain;
}

export class ApiServer {
  private readonly server: https.Server;
  private readonly metrics: ApiMetrics;
  private readonly users: TtlCache<UserInfo | null>;
  private readonly access: TtlCache<Access>;
  private readonly certFingerprint: TlsFingerprint;
  private readonly clock: Clock;
  /** Cancels the next look at the certificate, while it is polled. */
  private cancelCertPoll = () => {};
  private certWatch?: CredentialWatch;
  private appliedCert: string;
  private config: AuthenticationConfig;

  constructor(private readonly opts: ApiServerOptions) {
    this.config = opts.authentication;
    this.metrics = new ApiMetrics(opts.registry);
    const clock = opts.clock ?? systemClock;
    this.clock = clock;
    this.users = new TtlCache({ ttlMs: reviewCache.tokenMs, now: () => clock.now() });
    this.access = new TtlCache({ ttlMs: reviewCache.allowedMs, now: () => clock.now() });
    this.certFingerprint = new TlsFingerprint({
      caCert: '',
      agentCert: opts.certFile,
      agentKey: opts.keyFile,
      serviceAccountTokenPath: '',
    });
    this.appliedCert = this.certFingerprint.current();
    // The certificate is judged per request against the bundle that applies (authentication.ts).
    this.server = https.createServer(
      { ...this.secureOptions(), requestCert: true, rejectUnauthorized: false },
      (req, res) => {
        this.handle(req, res).catch((err: unknown) => {
          opts.log.error({ err, url: req.url }, 'API request failed');
          if (!res.headersSent) this.send(req, res, { code: 500, body: status(500, 'internal error') }, 'none');
          else res.end();
        });
      },
    );
  }

  /** A new authentication configuration from the ConfigMap: new CA bundles and headers apply at once. */
  setAuthentication(config: AuthenticationConfig): void {
    this.config = config;
    this.applySecureContext();
  }

  private secureOptions() {
    return {
      cert: readFileSync(this.opts.certFile),
      key: readFileSync(this.opts.keyFile),
      ca: this.config.caPem.length ? this.config.caPem : undefined,
    };
  }

  /** Applies a changed serving certificate; a half-written rotation is retried at the next check. */
  private reloadCertificate(): void {
    try {
      if (this.certFingerprint.current() === this.appliedCert) return;
    } catch {
      // unreadable: applySecureContext says so
    }
    if (this.applySecureContext()) this.opts.log.info({ cert: this.opts.certFile }, 'API serving certificate reloaded');
  }

  private applySecureContext(): boolean {
    try {
      const fingerprint = this.certFingerprint.current();
      this.server.setSecureContext(this.secureOptions());
      this.appliedCert = fingerprint;
      return true;
    } catch (err) {
      this.opts.log.warn(
        { cert: this.opts.certFile, error: (err as Error).message },
        'API serving certificate unreadable; keeping the one in use',
      );
      return false;
    }
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'https://api');
    const auth = authenticate(
      this.config,
      { chain: peerChain(req.socket as TLSSocket), headers: req.headersDistinct },
      new Date(),
    );
    const method = auth.kind === 'user' ? auth.method : auth.kind;
    let user: UserInfo | undefined;
    try {
      if (auth.kind === 'user') user = auth.user;
      else if (auth.kind === 'token') user = await this.tokenUser(auth.token);
      if (!user) {
        this.opts.log.debug(
          { url: req.url, reasons: auth.kind === 'none' ? auth.reasons : ['token not accepted by TokenReview'] },
          'API request unauthenticated',
        );
        return this.send(req, res, { code: 401, body: status(401, 'Unauthorized') }, method);
      }
      user = withAuthenticatedGroup(user);
      const attributes = requestAttributes(req.method ?? 'GET', url);
      const { allowed, reason } = await this.authorize(user, attributes);
      if (!allowed)
        return this.send(
          req,
          res,
          { code: 403, body: status(403, forbiddenMessage(user.username, attributes, reason)) },
          method,
          user,
        );
    } catch (err) {
      this.opts.log.error(
        { error: (err as Error).message, url: req.url },
        'delegated authentication failed: TokenReview or SubjectAccessReview did not answer',
      );
      return this.send(req, res, { code: 503, body: status(503, authUnavailable) }, method);
    }
    this.send(req, res, await route(req.method ?? 'GET', url, req.headers, this.opts.routes), method, user);
  }

  private async tokenUser(token: string): Promise<UserInfo | undefined> {
    const key = tokenKey(token);
    const hit = this.users.get(key);
    if (hit !== undefined) return hit ?? undefined;
    const user = await this.opts.reviewer.authenticate(token);
    this.users.set(key, user ?? null);
    return user;
  }

  private async authorize(user: UserInfo, attributes: AccessAttributes): Promise<Access> {
    if (user.groups?.includes(alwaysAllowedGroup)) return { allowed: true };
    const key = JSON.stringify([user, attributes]);
    const hit = this.access.get(key);
    if (hit) return hit;
    const answer = await this.opts.reviewer.authorize(user, attributes);
    this.access.set(key, answer, answer.allowed ? reviewCache.allowedMs : reviewCache.deniedMs);
    return answer;
  }

  private send(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    answer: Answer,
    authentication: string,
    user?: UserInfo,
  ): void {
    this.metrics.requests.inc({ code: String(answer.code), authentication });
    this.opts.log.debug(
      { method: req.method, url: req.url, code: answer.code, authentication, user: user?.username },
      'API request',
    );
    if ('watch' in answer) return streamLiveLog(res, answer.watch);
    const headers = { 'cache-control': 'no-cache, private', ...(answer.etag ? { etag: answer.etag } : {}) };
    if (answer.code === 304) return void res.writeHead(304, headers).end();
    const body = answer.raw ?? `${JSON.stringify(answer.body)}\n`;
    res.writeHead(answer.code, { 'content-type': answer.contentType ?? 'application/json', ...headers });
    res.end(req.method === 'HEAD' ? undefined : body);
  }

  async listen(): Promise<AddressInfo> {
    const address = await listenOn(this.server, this.opts.port, this.opts.host);
    // A mounted Secret's update is an event in its folder; only where it cannot be watched, look every 30 s.
    this.certWatch = watchCredentialFolders(
      [this.opts.certFile, this.opts.keyFile],
      () => this.reloadCertificate(),
      this.clock,
    );
    if (!this.certWatch.complete) {
      const poll = () => {
        this.cancelCertPoll = this.clock.after(30_000, () => {
          this.reloadCertificate();
          poll();
        });
      };
      poll();
    }
    return address;
  }

  close(): Promise<void> {
    this.cancelCertPoll();
    this.certWatch?.close();
    return closeServer(this.server);
  }
}
