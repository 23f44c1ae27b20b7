// TLS and bearer-token material for one connection attempt. Files are read on every connect, so a
// rotated CA bundle, client certificate or token is used without a restart (the Go agent reads
// them once at start-up: "x509: certificate signed by unknown authority after hub restore").
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { parseCertificateBundle } from '../tls/pem.js';
import { ServerTls } from './server-tls.js';

export interface CredentialFiles {
  caCert: string;
  agentCert: string;
  agentKey: string;
  serviceAccountTokenPath: string;
  /** --alpn-proto: offered before h2 (a front-end sharing the server's address may route on them). */
  alpnProto?: string[];
}

const read = (path: string): Buffer | null => (path ? readFileSync(path) : null);

/** Reads the token for the `authorization` header; trailing newlines would make an invalid header. */
function readBearerToken(path: string): string {
  return readFileSync(path, 'utf8').trim();
}

/**
 * Changes whenever the CA, certificate or key on disk change (the token is re-read per connect
 * anyway). Asked every sync step, it hashes the files again only when one's stat changed: a
 * Secret volume's update swaps a symlink (new inode), an in-place write moves ctime.
 */
export class TlsFingerprint {
  private stats = '';
  private value = '';

  constructor(private readonly files: CredentialFiles) {}

  /** Throws when a file cannot be read. */
  current(): string {
    const paths = [this.files.caCert, this.files.agentCert, this.files.agentKey];
    const stats = paths.map(statSignature).join('|');
    if (stats !== this.stats) {
      const hash = createHash('sha256');
      for (const path of paths) hash.update(read(path) ?? '').update('\0');
      this.value = hash.digest('hex').slice(0, 16);
      this.stats = stats;
    }
    return this.value;
  }
}

function statSignature(path: string): string {
  const s = path ? statSync(path, { throwIfNoEntry: false }) : undefined;
  return s ? `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}` : '-';
}

/** What one connection attempt authenticates with: TLS (and its failure messages), and a bearer token. */
export interface ServerCredentials {
  tls: ServerTls;
  /** The `authorization` header's value, read from the token file now (throws when it cannot be read). */
  authorization?: () => string;
}

/** Reads the files for one attempt to `server` (host:port; `host` is the name its certificate must carry). */
export function loadCredentials(files: CredentialFiles, server: string, host: string): ServerCredentials {
  const ca = read(files.caCert);
  const cert = read(files.agentCert);
  const key = read(files.agentKey);
  const secureContext = createSecureContext({ ca: ca ?? undefined, cert: cert ?? undefined, key: key ?? undefined });
  const tls = new ServerTls({
    secureContext,
    server,
    host,
    alpn: files.alpnProto ?? [],
    caCert: files.caCert,
    caPem: ca,
    agentCert: files.agentCert,
    agentPem: cert,
  });
  const tokenPath = files.serviceAccountTokenPath;
  return tokenPath ? { tls, authorization: () => `Bearer ${readBearerToken(tokenPath)}` } : { tls };
}

/** Checks that the files hold what their flags promise; the message names the flag. Used at start-up,
 * so a wrong path or a garbled file is a clear error rather than a retry loop. */
export function tlsFilesProblem(files: CredentialFiles): string | undefined {
  const attempt = (flag: string, path: string, check: (text: string) => void): string | undefined => {
    if (!path) return undefined;
    try {
      check(readFileSync(path, 'utf8'));
      return undefined;
    } catch (err) {
      return `--${flag}=${path}: ${(err as Error).message}`;
    }
  };
  return (
    attempt('ca-cert', files.caCert, (pem) => void parseCertificateBundle(pem)) ??
    attempt('agent-cert', files.agentCert, (pem) => void new X509Certificate(pem)) ??
    attempt(
      'agent-key',
      files.agentKey,
      (key) => void createSecureContext({ cert: readFileSync(files.agentCert), key }),
    ) ??
    attempt('service-account-token-path', files.serviceAccountTokenPath, (token) => {
      if (token.trim() === '') throw new Error('the token file is empty');
    })
  );
}
