// TLS and bearer-token material for one connection attempt. Files are read on every connect, so a
// rotated CA bundle, client certificate or token is used without a restart (the Go agent reads
// them once at start-up: "x509: certificate signed by unknown authority after hub restore").
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import type { Logger } from '../observability/log.js';
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

/** The CA bundle, certificate and key as read from their files. */
interface TlsMaterial {
  ca: Buffer | null;
  cert: Buffer | null;
  key: Buffer | null;
}

/**
 * The TLS material each attempt uses: the files as they are on disk, or, while they hold something
 * broken (a rotated CA bundle with a malformed block, a key that does not match), the last good
 * material, said once in the log with the file at fault, and again when the files are good again.
 * `generation` changes only when the material in force does, so a bad file replaces no connection.
 */
export class CredentialLoader {
  private readonly fingerprint: TlsFingerprint;
  private seen = '';
  private good?: { material: TlsMaterial; generation: string };
  private refused?: string;

  constructor(
    private readonly files: CredentialFiles,
    private readonly log: Logger,
  ) {
    this.fingerprint = new TlsFingerprint(files);
  }

  /** The material in force (throws when no good material was ever read: the attempt fails with why). */
  private current(): { material: TlsMaterial; generation: string } {
    let stamp: string;
    try {
      stamp = this.fingerprint.current();
    } catch (err) {
      return this.keep(`cannot read the TLS files: ${(err as Error).message}`);
    }
    if (stamp === this.seen && this.good) return this.good;
    const material = { ca: read(this.files.caCert), cert: read(this.files.agentCert), key: read(this.files.agentKey) };
    const problem = materialProblem(this.files, material);
    if (problem) return this.keep(problem, stamp);
    if (this.refused) this.log.info('the TLS files on disk are valid again: using them');
    this.refused = undefined;
    this.seen = stamp;
    this.good = { material, generation: stamp };
    return this.good;
  }

  private keep(problem: string, stamp?: string): { material: TlsMaterial; generation: string } {
    if (!this.good) throw new Error(problem);
    if (stamp !== undefined) this.seen = stamp;
    if (this.refused !== problem)
      this.log.warn({ problem }, 'the TLS files on disk are not valid: keeping the last good ones in force');
    this.refused = problem;
    return this.good;
  }

  /** Changes when the material in force changes; 'unreadable' while none was ever good. */
  get generation(): string {
    try {
      return this.current().generation;
    } catch {
      return 'unreadable';
    }
  }

  /** The credentials for one attempt to `server` (host:port; `host` is the name its certificate must carry). */
  load(server: string, host: string): ServerCredentials {
    const { ca, cert, key } = this.current().material;
    const { files } = this;
    const tls = new ServerTls({
      secureContext: createSecureContext({ ca: ca ?? undefined, cert: cert ?? undefined, key: key ?? undefined }),
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
}

/** What is wrong with the material read from `files`, naming the flag and the file; undefined when it is good. */
function materialProblem(files: CredentialFiles, m: TlsMaterial): string | undefined {
  const attempt = (flag: string, path: string, check: () => void): string | undefined => {
    if (!path) return undefined;
    try {
      check();
      return undefined;
    } catch (err) {
      return `--${flag}=${path}: ${(err as Error).message}`;
    }
  };
  return (
    attempt('ca-cert', files.caCert, () => void parseCertificateBundle(m.ca!.toString())) ??
    attempt('agent-cert', files.agentCert, () => void new X509Certificate(m.cert!)) ??
    attempt('agent-key', files.agentKey, () => void createSecureContext({ cert: m.cert ?? undefined, key: m.key! }))
  );
}

/** Checks that the files hold what their flags promise; the message names the flag. Used at start-up,
 * so a wrong path or a garbled file is a clear error rather than a retry loop. */
export function tlsFilesProblem(files: CredentialFiles): string | undefined {
  const readable = (flag: string, path: string): string | undefined => {
    try {
      read(path);
      return undefined;
    } catch (err) {
      return `--${flag}=${path}: ${(err as Error).message}`;
    }
  };
  const unreadable =
    readable('ca-cert', files.caCert) ??
    readable('agent-cert', files.agentCert) ??
    readable('agent-key', files.agentKey);
  if (unreadable) return unreadable;
  const token = files.serviceAccountTokenPath;
  let tokenProblem: string | undefined;
  if (token) {
    try {
      if (readFileSync(token, 'utf8').trim() === '') tokenProblem = 'the token file is empty';
    } catch (err) {
      tokenProblem = (err as Error).message;
    }
  }
  return (
    materialProblem(files, { ca: read(files.caCert), cert: read(files.agentCert), key: read(files.agentKey) }) ??
    (tokenProblem && `--service-account-token-path=${token}: ${tokenProblem}`)
  );
}
