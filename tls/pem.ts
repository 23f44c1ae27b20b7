// Certificates in PEM text: a CA bundle (--ca-cert, an aggregator's client-ca-file) holds several.
import { X509Certificate } from 'node:crypto';

const certificateBlock = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** The certificate blocks of a PEM text, in order. */
export function certificateBlocks(pem: string): string[] {
  return pem.match(certificateBlock) ?? [];
}

/** Every certificate of a PEM bundle; throws on text that holds none or a broken one. */
export function parseCertificateBundle(pem: string): X509Certificate[] {
  const blocks = certificateBlocks(pem);
  if (blocks.length === 0) throw new Error('no PEM certificate');
  return blocks.map((b) => new X509Certificate(b));
}
