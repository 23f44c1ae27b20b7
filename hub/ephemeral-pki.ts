// A throwaway PKI in memory, for the in-process hub of `npm start` and for tests: a CA, a server
// certificate for localhost, 127.0.0.1 and ::1, and a client certificate. No openssl needed: keys come
// from Node's crypto (RSA 2048), certificates are built and signed with node-forge.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import forge from 'node-forge';

export interface IssueOptions {
  /** DNS names and IP addresses for subjectAltName (a server certificate). */
  serverNames?: string[];
  /** Client-only: extendedKeyUsage clientAuth (else serverAuth and clientAuth). */
  client?: boolean;
  /** Subject O values (Kubernetes reads them as a client certificate's groups). */
  organizations?: string[];
}

/** PEM text. */
export interface CertAndKey {
  cert: string;
  key: string;
}

export interface Ca extends CertAndKey {
  /** A certificate signed by this CA. */
  issue(commonName: string, opts?: IssueOptions): CertAndKey;
}

export interface EphemeralPki {
  ca: Ca;
  server: CertAndKey;
  client: CertAndKey;
}

/** Two days, back-dated an hour against clock skew between processes. */
const validity = () => ({
  notBefore: new Date(Date.now() - 3_600_000),
  notAfter: new Date(Date.now() + 2 * 86_400_000),
});

function newKeys(): { pem: string; forgeKeys: forge.pki.rsa.KeyPair } {
  const { privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  const priv = forge.pki.privateKeyFromPem(privateKey) as forge.pki.rsa.PrivateKey;
  const pub = forge.pki.setRsaPublicKey(priv.n, priv.e);
  return { pem: privateKey, forgeKeys: { privateKey: priv, publicKey: pub } };
}

function newCert(
  commonName: string,
  publicKey: forge.pki.PublicKey,
  extensions: object[],
  organizations: string[] = [],
): forge.pki.Certificate {
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  // A positive serial in minimal DER: top bit clear (no sign padding needed) and a non-zero first
  // byte. A redundant leading 00 is "illegal padding" to OpenSSL's strict INTEGER decoding.
  const serial = randomBytes(8);
  serial[0] = (serial[0]! & 0x7f) | 0x01;
  cert.serialNumber = serial.toString('hex');
  const { notBefore, notAfter } = validity();
  cert.validity.notBefore = notBefore;
  cert.validity.notAfter = notAfter;
  cert.setSubject([
    ...organizations.map((value) => ({ name: 'organizationName', value })),
    { name: 'commonName', value: commonName },
  ]);
  cert.setExtensions(extensions);
  return cert;
}

export function createCa(name = 'spoke-agent ephemeral CA'): Ca {
  const caKeys = newKeys();
  const caCert = newCert(name, caKeys.forgeKeys.publicKey, [
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  caCert.setIssuer(caCert.subject.attributes);
  caCert.sign(caKeys.forgeKeys.privateKey, forge.md.sha256.create());

  const issue = (commonName: string, opts: IssueOptions = {}): CertAndKey => {
    const keys = newKeys();
    const names = opts.serverNames ?? [];
    const cert = newCert(
      commonName,
      keys.forgeKeys.publicKey,
      [
        { name: 'basicConstraints', cA: false },
        { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
        { name: 'extKeyUsage', clientAuth: true, serverAuth: !opts.client },
        { name: 'authorityKeyIdentifier', keyIdentifier: caCert.generateSubjectKeyIdentifier().getBytes() },
        ...(names.length
          ? [
              {
                name: 'subjectAltName',
                altNames: names.map((n) => (isIP(n) ? { type: 7, ip: n } : { type: 2, value: n })),
              },
            ]
          : []),
      ],
      opts.organizations,
    );
    cert.setIssuer(caCert.subject.attributes);
    cert.sign(caKeys.forgeKeys.privateKey, forge.md.sha256.create());
    return { cert: forge.pki.certificateToPem(cert), key: keys.pem };
  };
  return { cert: forge.pki.certificateToPem(caCert), key: caKeys.pem, issue };
}

/** A CA, a server certificate for localhost, 127.0.0.1 and ::1, and a client certificate. */
export function createEphemeralPki(caName?: string): EphemeralPki {
  const ca = createCa(caName);
  return {
    ca,
    server: ca.issue('server', { serverNames: ['localhost', '127.0.0.1', '::1'] }),
    client: ca.issue('client', { client: true }),
  };
}
