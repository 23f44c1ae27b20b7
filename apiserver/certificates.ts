// Client certificates judged against a CA bundle, as Go's x509.Verify does for Kubernetes' x509 and
// request-header authenticators: a chain from the leaf, through intermediates the client sent, to a
// certificate of the bundle, every link signed and in its validity period, and the leaf usable for
// client authentication. The TLS layer does not decide this: one port serves two bundles (front
// proxy and client CA) and the answer differs by bundle.
import type { X509Certificate } from 'node:crypto';
import forge from 'node-forge';

const clientAuth = '1.3.6.1.5.5.7.3.2';
const anyExtendedKeyUsage = '2.5.29.37.0';
const maxDepth = 8;

const validAt = (c: X509Certificate, now: Date) => new Date(c.validFrom) <= now && now <= new Date(c.validTo);
const signedBy = (c: X509Certificate, issuer: X509Certificate) =>
  issuer.ca && c.checkIssued(issuer) && c.verify(issuer.publicKey);

/**
 * Whether `chain` (the leaf first, then what the client sent) leads to a certificate of `anchors`.
 * Pure: the same inputs always give the same answer.
 */
export function verifyClientChain(
  chain: readonly X509Certificate[],
  anchors: readonly X509Certificate[],
  now: Date,
): boolean {
  const [leaf, ...intermediates] = chain;
  if (!leaf || anchors.length === 0) return false;
  const usages = leaf.keyUsage; // the extended key usages; undefined when the extension is absent
  if (usages && !usages.includes(clientAuth) && !usages.includes(anyExtendedKeyUsage)) return false;
  let cert = leaf;
  for (let depth = 0; depth < maxDepth; depth++) {
    if (!validAt(cert, now)) return false;
    const anchor = anchors.find((a) => validAt(a, now) && signedBy(cert, a));
    if (anchor) return true;
    const next = intermediates.find((i) => i !== cert && signedBy(cert, i));
    if (!next) return false;
    cert = next;
  }
  return false;
}

const oids = { commonName: '2.5.4.3', organization: '2.5.4.10' };

/**
 * The subject's common name and organizations, read from the DER (X509Certificate.subject is an
 * escaped text form in which a crafted value could pose as another attribute).
 */
export function subjectNames(cert: X509Certificate): { commonName: string; organizations: string[] } {
  const tbs = (forge.asn1.fromDer(forge.util.createBuffer(cert.raw.toString('binary'))).value as forge.asn1.Asn1[])[0]!;
  const fields = tbs.value as forge.asn1.Asn1[];
  // tbsCertificate: [0] version (explicit, optional), serial, signature, issuer, validity, subject
  const subject = fields[fields[0]!.tagClass === forge.asn1.Class.CONTEXT_SPECIFIC ? 5 : 4]!;
  let commonName = '';
  const organizations: string[] = [];
  for (const rdn of subject.value as forge.asn1.Asn1[]) {
    for (const attribute of rdn.value as forge.asn1.Asn1[]) {
      const [oid, value] = attribute.value as forge.asn1.Asn1[];
      const type = forge.asn1.derToOid(oid!.value as string);
      const text = forge.util.decodeUtf8(value!.value as string);
      if (type === oids.commonName) commonName = text;
      else if (type === oids.organization) organizations.push(text);
    }
  }
  return { commonName, organizations };
}
