// Client certificates judged against a CA bundle, as Go's x509.Verify does for Kubernetes' x509 and
// request-header authenticators: a chain from the leaf, through intermediates the client sent, to a
// certificate of the bundle, every link signed and in its validity period, and the leaf usable for
// client authentication. The TLS layer does not decide this: one port serves two bundles (front
// proxy and client CA) and the answer differs by bundle.
import type { X509Certificate } from 'node:crypto';

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

/**
 * The subject's common name and organizations, as Kubernetes' x509 authenticator reads them (Go's
 * pkix.Name: the last CN, every O in certificate order, multi-valued RDNs flattened). Read from
 * toLegacyObject(), whose subject Node builds entry by entry from the DER with values only converted
 * to UTF-8; X509Certificate.subject is RFC 2253-escaped text (`\,`, `\+`, `\0A`) that would have to be
 * unescaped to tell a value from a separator. A subject Node cannot convert yields no names.
 */
export function subjectNames(cert: X509Certificate): { commonName: string; organizations: string[] } {
  // @types/node types each entry as one string; a repeated attribute is an array.
  const subject: { CN?: string | string[]; O?: string | string[] } | undefined = cert.toLegacyObject().subject;
  const values = (key: 'CN' | 'O') => [subject?.[key] ?? []].flat();
  return { commonName: values('CN').at(-1) ?? '', organizations: values('O') };
}
