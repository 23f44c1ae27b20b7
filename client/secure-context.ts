// The TLS material of a dial to the proxy-server, parsed once. tls.connect given PEM text builds a new
// SecureContext (parses the key, the certificate and the CA) for every connection, CPU paid again
// for each new connection (bench/README.md, "The client's TLS material"). Go's konnectivity client builds its
// tls.Config once; so does this, per distinct material (a rotated certificate is new material).
import tls from 'node:tls';

export interface TlsMaterial {
  ca?: string | Buffer;
  cert?: string | Buffer;
  key?: string | Buffer;
}

/** A handful of identities per process at most; more is a caller rotating through many, not reuse. */
const maxContexts = 8;
const contexts = new Map<string, tls.SecureContext>();

const text = (pem: string | Buffer | undefined) =>
  pem === undefined ? '' : typeof pem === 'string' ? pem : pem.toString('latin1');

/** The SecureContext for `material`, built on first use. */
export function secureContextFor(material: TlsMaterial): tls.SecureContext {
  const id = `${text(material.ca)}\0${text(material.cert)}\0${text(material.key)}`;
  let context = contexts.get(id);
  if (!context) {
    context = tls.createSecureContext({ ca: material.ca, cert: material.cert, key: material.key });
    if (contexts.size >= maxContexts) contexts.delete(contexts.keys().next().value!);
    contexts.set(id, context);
  }
  return context;
}
