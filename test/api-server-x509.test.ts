// Client certificates' users and groups as Kubernetes' x509 authenticator reads them (the CN is the
// user, the O values the groups): certificates made by openssl with subjects our PKI never writes
// (escaped characters, non-ASCII, multi-valued RDNs, two CNs, a newline) read by subjectNames, and,
// where the kube-apiserver and etcd binaries are present, by a real kube-apiserver through a
// SelfSubjectReview, which must agree. Skipped with a note where the binaries are absent.
import { X509Certificate } from 'node:crypto';
import https from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authenticate, parseAuthenticationConfig } from '../apiserver/authentication.js';
import { subjectNames } from '../apiserver/certificates.js';
import { createCa, type Ca, type CertAndKey } from '../hub/ephemeral-pki.js';
import { kubeBinariesMissing, startKubeApiServer, type KubeApiServer } from './support/kube-apiserver.js';
import { opensslClientCert } from './support/openssl.js';
import { skipNote } from './support/skips.js';

const missing = kubeBinariesMissing();
if (missing) skipNote('api-server-x509', missing);

/** openssl `-subj` text and the user and groups it names. */
const subjects: Array<[string, { commonName: string; organizations: string[] }]> = [
  [
    '/O=ops, team/O=a\\+b/O=k\\=v/O="quoted"/O=\\\\back;<>/O=ünï 組/CN=alice',
    { commonName: 'alice', organizations: ['ops, team', 'a+b', 'k=v', '"quoted"', '\\back;<>', 'ünï 組'] },
  ],
  // A multi-valued RDN: DER sorts the SET, CN before O; the O values keep certificate order.
  ['/O=dev+CN=bob/O=second', { commonName: 'bob', organizations: ['dev', 'second'] }],
  // Two CNs: the last is the user, as Go's pkix.Name keeps it.
  ['/CN=first/O=g/CN=last', { commonName: 'last', organizations: ['g'] }],
  ['/O=\\#hash/O= spaced /CN=\\ x', { commonName: ' x', organizations: ['#hash', ' spaced '] }],
  // What X509Certificate.subject would print as two lines: one CN whose value holds a newline.
  ['/CN=carol\nO=system:masters/O=a\nb', { commonName: 'carol\nO=system:masters', organizations: ['a\nb'] }],
];

const clientCa = createCa('x509 client CA');
const issued = new Map<string, CertAndKey>();
const certFor = async (ca: Ca, subject: string) => {
  const key = `${ca.cert}${subject}`;
  if (!issued.has(key)) issued.set(key, await opensslClientCert(ca, subject));
  return issued.get(key)!;
};

describe('client certificate subjects', () => {
  it.each(subjects)('%j', async (subject, names) => {
    const cert = new X509Certificate((await certFor(clientCa, subject)).cert);
    expect(subjectNames(cert)).toEqual(names);
    const { config } = parseAuthenticationConfig({ 'client-ca-file': clientCa.cert });
    expect(authenticate(config, { chain: [cert], headers: {} }, new Date())).toEqual({
      kind: 'user',
      method: 'x509',
      user: { username: names.commonName, groups: names.organizations },
    });
  });

  it('names nobody without a CN', async () => {
    const cert = new X509Certificate((await certFor(clientCa, '/O=only')).cert);
    expect(subjectNames(cert)).toEqual({ commonName: '', organizations: ['only'] });
  });
});

describe.skipIf(missing)('client certificate subjects, as a real kube-apiserver reads them', () => {
  let kube: KubeApiServer;
  beforeAll(async () => {
    kube = await startKubeApiServer();
  }, 120_000);
  afterAll(() => kube?.close());

  /** The user a SelfSubjectReview reports for a request made with this client certificate. */
  const whoAmI = (cert: CertAndKey) =>
    new Promise<{ username: string; groups: string[] }>((resolve, reject) => {
      const body = JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' });
      const req = https.request(
        `${kube.url}/apis/authentication.k8s.io/v1/selfsubjectreviews`,
        { method: 'POST', ca: kube.servingCa.cert, ...cert, headers: { 'content-type': 'application/json' } },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => {
            if (res.statusCode !== 201) return reject(new Error(`${res.statusCode}: ${text}`));
            resolve(
              (JSON.parse(text) as { status: { userInfo: { username: string; groups: string[] } } }).status.userInfo,
            );
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });

  it.each(subjects)('%j', async (subject) => {
    const cert = await certFor(kube.clientCa, subject);
    const { commonName, organizations } = subjectNames(new X509Certificate(cert.cert));
    expect(await whoAmI(cert)).toEqual({ username: commonName, groups: [...organizations, 'system:authenticated'] });
  });

  it('agrees on the certificates our PKI issues', async () => {
    const cert = kube.clientCa.issue('dave', { client: true, organizations: ['system:nodes', 'ops, team'] });
    expect(await whoAmI(cert)).toEqual({
      username: 'dave',
      groups: ['system:nodes', 'ops, team', 'system:authenticated'],
    });
  });
});
