// Certificates in PEM text: a CA bundle (--ca-cert, an aggregator's client-ca-file) holds several.
import { X509Certificate } from 'node:crypto';

const certificateBlock = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;
const begin = '-----BEGIN CERTIFICATE-----';
const end = '-----END CERTIFICATE-----';

/** The certificate blocks of a PEM text, in order. */
export function certificateBlocks(pem: string): string[] {
  return pem.match(certificateBlock) ?? [];
}

/**
 * Every certificate of a PEM bundle; throws on text that holds none, or any CERTIFICATE block that
 * is cut short or does not parse, naming it: as client-go's certutil.NewPool (ANP master, PR #902),
 * a broken block is an error, not skipped, so a bundle missing a CA is not taken for a good one.
 */
export function parseCertificateBundle(pem: string): X509Certificate[] {
  const blocks: string[] = [];
  for (let at = pem.indexOf(begin); at >= 0; at = pem.indexOf(begin, at + begin.length)) {
    const stop = pem.indexOf(end, at);
    const next = pem.indexOf(begin, at + begin.length);
    if (stop < 0 || (next >= 0 && next < stop))
      throw new Error(`certificate ${blocks.length + 1}: BEGIN CERTIFICATE without its END CERTIFICATE`);
    blocks.push(pem.slice(at, stop + end.length));
  }
  if (blocks.length === 0) throw new Error('no PEM certificate');
  return blocks.map((b, i) => {
    try {
      return new X509Certificate(b);
    } catch (err) {
      throw new Error(`certificate ${i + 1} of ${blocks.length} is malformed: ${(err as Error).message}`);
    }
  });
}
