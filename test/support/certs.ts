// Throwaway PKI for tests as files: a CA, a server certificate for localhost/127.0.0.1/::1, and
// client certificates, written to a temporary folder. The certificates come from hub/ephemeral-pki.ts,
// so tests and the in-process hub share one implementation and need no openssl.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCa, type CertAndKey, type IssueOptions } from '../../hub/ephemeral-pki.js';

export interface TestPki {
  dir: string;
  caCert: string;
  caKey: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** Issues another certificate signed by this CA; returns [certPath, keyPath]. */
  issue(name: string, opts?: IssueOptions): [string, string];
}

function write(dir: string, name: string, pair: CertAndKey): [string, string] {
  const paths: [string, string] = [join(dir, `${name}.crt`), join(dir, `${name}.key`)];
  writeFileSync(paths[0], pair.cert);
  writeFileSync(paths[1], pair.key, { mode: 0o600 });
  return paths;
}

export function makePki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'spoke-pki-'));
  const ca = createCa('ca');
  const [caCert, caKey] = write(dir, 'ca', ca);
  const issue = (name: string, opts: IssueOptions = {}) => write(dir, name, ca.issue(name, opts));
  const [serverCert, serverKey] = issue('server', { serverNames: ['localhost', '127.0.0.1', '::1'] });
  const [clientCert, clientKey] = issue('client', { client: true });
  return { dir, caCert, caKey, serverCert, serverKey, clientCert, clientKey, issue };
}

/** What a hub's agent port serves with: the server certificate, and the CA that signs agents'. */
export function hubTls(p: TestPki): { cert: Buffer; key: Buffer; ca: Buffer } {
  return { cert: readFileSync(p.serverCert), key: readFileSync(p.serverKey), ca: readFileSync(p.caCert) };
}

/** The agent's flags for `p`: its CA and client certificate. */
export function agentTlsFlags(p: TestPki): string[] {
  return [`--ca-cert=${p.caCert}`, `--agent-cert=${p.clientCert}`, `--agent-key=${p.clientKey}`];
}
