// Who is asking, decided the way a Kubernetes extension API server decides it, from what the API
// server publishes in kube-system/extension-apiserver-authentication. In order:
//   1. a client certificate that chains to the request-header CA, with a common name among the
//      allowed names (any name when the list is empty): the aggregator (front proxy) speaking; the
//      user, UID, groups and extras come from its headers;
//   2. a client certificate that chains to the client CA: the user is its CN, the groups its O;
//   3. a bearer token: for TokenReview (the caller does that I/O);
//   4. nobody: 401.
// Identity headers are read in step 1 only, so a request without the front-proxy certificate cannot
// name a user with them. Pure: the certificates and headers come in, a decision goes out.
import type { X509Certificate } from 'node:crypto';
import { bearerToken, type UserInfo } from '../kube/delegated-auth.js';
import { decodeSegment } from './attributes.js';
import { parseCertificateBundle } from '../tls/pem.js';
import { subjectNames, verifyClientChain } from './certificates.js';

export const authenticationConfigMap = { namespace: 'kube-system', name: 'extension-apiserver-authentication' };

export interface RequestHeaderConfig {
  ca: X509Certificate[];
  /** Empty: any common name. */
  allowedNames: string[];
  /** Lower-case header names. */
  usernameHeaders: string[];
  /** `requestheader-uid-headers` (Kubernetes 1.32 and later publish it; empty before): the user's UID. */
  uidHeaders: string[];
  groupHeaders: string[];
  extraHeaderPrefixes: string[];
}

export interface AuthenticationConfig {
  requestHeader?: RequestHeaderConfig;
  clientCa?: X509Certificate[];
  /** The PEM of both bundles: the CA names the TLS server sends when asking for a certificate. */
  caPem: string[];
}

/** The configuration in the ConfigMap's data, and what was wrong with it (those parts are left out). */
export function parseAuthenticationConfig(data: Record<string, string> | undefined): {
  config: AuthenticationConfig;
  problems: string[];
} {
  const problems: string[] = [];
  const config: AuthenticationConfig = { caPem: [] };
  const bundle = (key: string): X509Certificate[] | undefined => {
    const pem = data?.[key];
    if (pem === undefined) return undefined;
    try {
      const certs = parseCertificateBundle(pem);
      config.caPem.push(pem);
      return certs;
    } catch (err) {
      problems.push(`${key}: ${(err as Error).message}`);
      return undefined;
    }
  };
  const names = (key: string, lower: boolean): string[] => {
    const text = data?.[key];
    if (text === undefined || text === '') return [];
    try {
      const value: unknown = JSON.parse(text);
      if (!Array.isArray(value) || !value.every((v) => typeof v === 'string'))
        throw new Error('not a JSON array of strings');
      return value.map((v: string) => (lower ? v.toLowerCase() : v)).filter((v) => v !== '');
    } catch (err) {
      problems.push(`${key}: ${(err as Error).message}`);
      return [];
    }
  };
  config.clientCa = bundle('client-ca-file');
  const requestHeaderCa = bundle('requestheader-client-ca-file');
  if (requestHeaderCa) {
    config.requestHeader = {
      ca: requestHeaderCa,
      allowedNames: names('requestheader-allowed-names', false),
      usernameHeaders: names('requestheader-username-headers', true),
      uidHeaders: names('requestheader-uid-headers', true),
      groupHeaders: names('requestheader-group-headers', true),
      extraHeaderPrefixes: names('requestheader-extra-headers-prefix', true),
    };
    if (config.requestHeader.usernameHeaders.length === 0)
      problems.push('requestheader-username-headers: empty, so no request through the aggregator names a user');
  }
  return { config, problems };
}

export type Authentication =
  | { kind: 'user'; method: 'front-proxy' | 'x509'; user: UserInfo }
  | { kind: 'token'; token: string }
  | { kind: 'none'; reasons: string[] };

export interface RequestCredentials {
  /** The client's certificate first, then the rest of the chain it presented; empty without one. */
  chain: readonly X509Certificate[];
  /** Lower-case names, every value of a repeated header kept apart (IncomingMessage.headersDistinct). */
  headers: Record<string, string[] | undefined>;
}

/** The first non-empty value of the first of `names` that has one. */
const firstValue = (names: string[], headers: RequestCredentials['headers']) =>
  names
    .map((h) => headers[h]?.find((v) => v.trim() !== ''))
    .find((v) => v !== undefined)
    ?.trim();

function fromHeaders(rh: RequestHeaderConfig, headers: RequestCredentials['headers']): UserInfo | undefined {
  const username = firstValue(rh.usernameHeaders, headers);
  if (username === undefined) return undefined;
  const uid = firstValue(rh.uidHeaders, headers);
  const groups = rh.groupHeaders.flatMap((h) => headers[h] ?? []);
  const extra: Record<string, string[]> = {};
  for (const [name, values] of Object.entries(headers)) {
    const prefix = rh.extraHeaderPrefixes.find((p) => name.startsWith(p));
    if (!prefix || !values) continue;
    // Extra keys arrive escaped (client-go's headerKeyEscape): %XX for what a header name cannot hold.
    const key = decodeSegment(name.slice(prefix.length)).toLowerCase();
    extra[key] ??= [];
    extra[key].push(...values);
  }
  return { username, ...(uid !== undefined ? { uid } : {}), groups, ...(Object.keys(extra).length ? { extra } : {}) };
}

export function authenticate(config: AuthenticationConfig, request: RequestCredentials, now: Date): Authentication {
  const reasons: string[] = [];
  const leaf = request.chain[0];
  const rh = config.requestHeader;
  if (leaf && rh && verifyClientChain(request.chain, rh.ca, now)) {
    const { commonName } = subjectNames(leaf);
    if (rh.allowedNames.length > 0 && !rh.allowedNames.includes(commonName))
      reasons.push(`front-proxy certificate "${commonName}" is not in requestheader-allowed-names`);
    else {
      const user = fromHeaders(rh, request.headers);
      if (user) return { kind: 'user', method: 'front-proxy', user };
      reasons.push(`front-proxy certificate "${commonName}" sent no ${rh.usernameHeaders.join(' or ')} header`);
    }
  }
  if (leaf && config.clientCa && verifyClientChain(request.chain, config.clientCa, now)) {
    const { commonName, organizations } = subjectNames(leaf);
    if (commonName !== '')
      return { kind: 'user', method: 'x509', user: { username: commonName, groups: organizations } };
    reasons.push('client certificate has no common name');
  } else if (leaf && !reasons.length)
    reasons.push('client certificate does not chain to requestheader-client-ca-file or client-ca-file');
  const token = bearerToken(request.headers.authorization?.[0]);
  if (token !== undefined) return { kind: 'token', token };
  if (!leaf) reasons.push('no client certificate and no bearer token');
  return { kind: 'none', reasons };
}

/** Every authenticated user is also in system:authenticated, as Kubernetes' authenticators make it. */
export function withAuthenticatedGroup(user: UserInfo): UserInfo {
  const groups = user.groups ?? [];
  return groups.includes('system:authenticated') ? user : { ...user, groups: [...groups, 'system:authenticated'] };
}
