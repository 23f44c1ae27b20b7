// Delegated authentication and authorization, as extension API servers do it: the spoke's API server
// says who a bearer token belongs to (TokenReview) and whether that user may `get` a non-resource URL
// (SubjectAccessReview). Decisions are cached briefly (keyed by a hash of the token), so a scraper
// costs two reviews per cache period, not two per request. API errors are not cached.
import { createHash } from 'node:crypto';
import type http from 'node:http';
import type { V1SubjectAccessReview, V1TokenReview } from '@kubernetes/client-node';
import type { KubeApiClient } from './api-client.js';
import type { Guard } from '../observability/health-server.js';
import type { Logger } from '../observability/log.js';
import type { KubeMetrics } from './metrics.js';
import { TtlCache } from './ttl-cache.js';

export interface UserInfo {
  username: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

/** What a request asks to do, as a SubjectAccessReview spells it: a non-resource URL or a resource. */
export type AccessAttributes =
  | { verb: string; path: string }
  | {
      verb: string;
      group: string;
      version: string;
      resource: string;
      subresource?: string;
      name?: string;
      namespace?: string;
    };

/** The 403 message Kubernetes gives, with the authorizer's reason. */
export function forbiddenMessage(username: string, a: AccessAttributes, reason: string | undefined): string {
  const why = reason ? `: ${reason}` : '';
  if ('path' in a) return `forbidden: User "${username}" cannot ${a.verb} path "${a.path}"${why}`;
  const object = `${a.resource}${a.group ? `.${a.group}` : ''}${a.name !== undefined ? ` "${a.name}"` : ''}`;
  const resource = a.subresource ? `${a.resource}/${a.subresource}` : a.resource;
  return `${object} is forbidden: User "${username}" cannot ${a.verb} resource "${resource}" in API group "${a.group}" at the cluster scope${why}`;
}

/** The two questions put to the API server; `apiReviewer` asks them. */
export interface Reviewer {
  /** The token's user, or undefined when the API server does not accept the token. */
  authenticate(token: string): Promise<UserInfo | undefined>;
  /** Whether `user` may do what `attributes` say. */
  authorize(user: UserInfo, attributes: AccessAttributes): Promise<{ allowed: boolean; reason?: string }>;
}

export function apiReviewer(client: KubeApiClient): Reviewer {
  return {
    async authenticate(token) {
      const body: V1TokenReview = { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } };
      const review = await client.post<V1TokenReview>('/apis/authentication.k8s.io/v1/tokenreviews', body);
      const user = review.status?.user;
      if (!review.status?.authenticated || !user?.username) return undefined;
      return { username: user.username, uid: user.uid, groups: user.groups, extra: user.extra };
    },
    async authorize(user, attributes) {
      const target = 'path' in attributes ? { nonResourceAttributes: attributes } : { resourceAttributes: attributes };
      const body: V1SubjectAccessReview = {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: { user: user.username, uid: user.uid, groups: user.groups, extra: user.extra, ...target },
      };
      const review = await client.post<V1SubjectAccessReview>(
        '/apis/authorization.k8s.io/v1/subjectaccessreviews',
        body,
      );
      return { allowed: review.status?.allowed === true, reason: review.status?.reason };
    },
  };
}

/** The token of an `Authorization: Bearer <token>` header, if that is what it holds. */
export function bearerToken(authorization: string | undefined): string | undefined {
  return /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1];
}

/** What a caller is told when the API server did not answer a TokenReview or SubjectAccessReview. */
export const authUnavailable = 'authentication is unavailable: the API server did not answer';

/** A cache key for a bearer token that does not keep the token itself in memory. */
export const tokenKey = (token: string) => createHash('sha256').update(token).digest('base64');

type Decision = { status: 200 } | { status: 401; message: string } | { status: 403; message: string };

export interface DelegatedAuthOptions {
  reviewer: Reviewer;
  /** The non-resource URL checked with verb `get`, e.g. /debug/spoke-agent or /metrics. */
  path: string;
  log: Logger;
  metrics: KubeMetrics;
  cacheTtlMs?: number;
  maxCacheEntries?: number;
  now?: () => number;
}

export function delegatedAuthGuard(opts: DelegatedAuthOptions): Guard {
  const cache = new TtlCache<Decision>({
    ttlMs: opts.cacheTtlMs ?? 10_000,
    maxEntries: opts.maxCacheEntries,
    now: opts.now,
  });

  const decide = async (token: string): Promise<Decision> => {
    const user = await opts.reviewer.authenticate(token);
    if (!user) return { status: 401, message: 'Unauthorized: the API server does not accept this token' };
    const attributes = { verb: 'get', path: opts.path };
    const { allowed, reason } = await opts.reviewer.authorize(user, attributes);
    if (!allowed) return { status: 403, message: forbiddenMessage(user.username, attributes, reason) };
    return { status: 200 };
  };

  const answer = (res: http.ServerResponse, d: Exclude<Decision, { status: 200 }>) => {
    const headers: Record<string, string> = { 'content-type': 'text/plain; charset=utf-8' };
    if (d.status === 401) headers['www-authenticate'] = 'Bearer realm="spoke-agent"';
    res.writeHead(d.status, headers).end(`${d.message}\n`);
  };
  const result = (d: Decision) => (d.status === 200 ? 'allowed' : d.status === 401 ? 'unauthenticated' : 'forbidden');

  return async (req, res) => {
    const token = bearerToken(req.headers.authorization);
    if (token === undefined) {
      opts.metrics.authDecisions.inc({ result: 'unauthenticated', cached: 'false' });
      answer(res, { status: 401, message: 'Unauthorized: send a bearer token (Authorization: Bearer <token>)' });
      return false;
    }
    const key = tokenKey(token);
    const hit = cache.get(key);
    let decision: Decision;
    if (hit) decision = hit;
    else {
      try {
        decision = await decide(token);
      } catch (err) {
        opts.metrics.authDecisions.inc({ result: 'error', cached: 'false' });
        opts.log.error(
          { error: (err as Error).message, path: req.url },
          'delegated authentication failed: TokenReview or SubjectAccessReview did not answer',
        );
        res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8' }).end(`${authUnavailable}\n`);
        return false;
      }
      cache.set(key, decision);
    }
    opts.metrics.authDecisions.inc({ result: result(decision), cached: hit ? 'true' : 'false' });
    if (decision.status === 200) return true;
    answer(res, decision);
    return false;
  };
}
