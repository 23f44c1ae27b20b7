// A throwaway PKI in memory, for the in-process hub of `npm start` and for tests: a CA, a server
// certificate for localhost, 127.0.0.1 and ::1, and a client certificate. No openssl needed: keys
// are ECDSA P-256 from Node's crypto (fast to make, accepted by Node, Go and OpenSSL peers alike) and
// each certificate is a small DER structure (hub/der.ts) signed with crypto.sign. Node has no
// certificate builder; an X.509 library would ship an ASN.1 framework in the image (@peculiar/x509
// brings eleven packages, node-forge a whole crypto suite) for what is a hundred lines of encoding.
import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { isIP } from 'node:net';
import { ipAddressBytes } from '../net/ip.js';
import {
  bitString,
  boolean,
  explicit,
  implicit,
  objectIdentifier as oid,
  octetString,
  sequence,
  set,
  time,
  unsignedInteger,
  utf8String,
} from './der.js';

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

const oids = {
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  commonName: '2.5.4.3',
  organization: '2.5.4.10',
  subjectKeyIdentifier: '2.5.29.14',
  keyUsage: '2.5.29.15',
  subjectAltName: '2.5.29.17',
  basicConstraints: '2.5.29.19',
  authorityKeyIdentifier: '2.5.29.35',
  extKeyUsage: '2.5.29.37',
  serverAuth: '1.3.6.1.5.5.7.3.1',
  clientAuth: '1.3.6.1.5.5.7.3.2',
};

/** Two days, back-dated an hour against clock skew between processes. */
const validity = () => sequence(time(new Date(Date.now() - 3_600_000)), time(new Date(Date.now() + 2 * 86_400_000)));

/** One attribute per RDN, organizations first, as `openssl req -subj /O=.../CN=...` writes them. */
const name = (commonName: string, organizations: string[]) =>
  sequence(
    ...organizations.map((o) => set(sequence(oid(oids.organization), utf8String(o)))),
    set(sequence(oid(oids.commonName), utf8String(commonName))),
  );

const extension = (id: string, critical: boolean, value: Buffer) =>
  sequence(oid(id), ...(critical ? [boolean(true)] : []), octetString(value));

/** keyUsage bits, first named bit first: digitalSignature (0), keyCertSign (5), cRLSign (6). */
const keyUsage = { leaf: bitString(Buffer.from([0x80]), 7), ca: bitString(Buffer.from([0x06]), 1) };

/** A subjectAltName entry: iPAddress (its 4 or 16 bytes) or dNSName. */
const generalName = (n: string) =>
  isIP(n) ? implicit(7, Buffer.from(ipAddressBytes(n))) : implicit(2, Buffer.from(n, 'ascii'));

interface KeyPair {
  privateKey: KeyObject;
  publicKey: KeyObject;
  /** RFC 5280 4.2.1.2 method 1: SHA-1 of the subjectPublicKey bits (the uncompressed EC point). */
  keyIdentifier: Buffer;
}

function newKeys(): KeyPair {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const { x = '', y = '' } = publicKey.export({ format: 'jwk' });
  const point = Buffer.concat([Buffer.from([4]), Buffer.from(x, 'base64url'), Buffer.from(y, 'base64url')]);
  return { privateKey, publicKey, keyIdentifier: createHash('sha1').update(point).digest() };
}

function certificate(subject: Buffer, keys: KeyPair, issuer: Buffer, signer: KeyObject, extensions: Buffer[]) {
  // A random serial (RFC 5280 4.1.2.2), positive and always 16 octets: the top byte is 0x40-0x7f.
  const serial = randomBytes(16);
  serial[0] = (serial[0]! & 0x3f) | 0x40;
  const algorithm = sequence(oid(oids.ecdsaWithSha256));
  const tbs = sequence(
    explicit(0, unsignedInteger(Buffer.from([2]))), // v3
    unsignedInteger(serial),
    algorithm,
    issuer,
    validity(),
    subject,
    keys.publicKey.export({ type: 'spki', format: 'der' }),
    explicit(3, sequence(...extensions)),
  );
  const der = sequence(tbs, algorithm, bitString(sign('sha256', tbs, signer)));
  const base64 = der.toString('base64').replace(/.{64}/g, '$&\n');
  return `-----BEGIN CERTIFICATE-----\n${base64.replace(/\n$/, '')}\n-----END CERTIFICATE-----\n`;
}

const pkcs8 = (keys: KeyPair) => keys.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;

export function createCa(caName = 'spoke-agent ephemeral CA'): Ca {
  const caKeys = newKeys();
  const caSubject = name(caName, []);
  const caCert = certificate(caSubject, caKeys, caSubject, caKeys.privateKey, [
    extension(oids.basicConstraints, true, sequence(boolean(true))),
    extension(oids.keyUsage, true, keyUsage.ca),
    extension(oids.subjectKeyIdentifier, false, octetString(caKeys.keyIdentifier)),
  ]);

  const issue = (commonName: string, opts: IssueOptions = {}): CertAndKey => {
    const keys = newKeys();
    const names = opts.serverNames ?? [];
    const usages = opts.client ? [oids.clientAuth] : [oids.serverAuth, oids.clientAuth];
    const cert = certificate(name(commonName, opts.organizations ?? []), keys, caSubject, caKeys.privateKey, [
      extension(oids.basicConstraints, true, sequence()),
      extension(oids.keyUsage, true, keyUsage.leaf),
      extension(oids.extKeyUsage, false, sequence(...usages.map(oid))),
      extension(oids.subjectKeyIdentifier, false, octetString(keys.keyIdentifier)),
      extension(oids.authorityKeyIdentifier, false, sequence(implicit(0, caKeys.keyIdentifier))),
      ...(names.length ? [extension(oids.subjectAltName, false, sequence(...names.map(generalName)))] : []),
    ]);
    return { cert, key: pkcs8(keys) };
  };
  return { cert: caCert, key: pkcs8(caKeys), issue };
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
