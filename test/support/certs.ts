// Throwaway PKI for tests as files: a CA, a server certificate for localhost/127.0.0.1/::1, and
// client certificates, written to a temporary folder. The certificates come from hub/ephemeral-pki.ts,
// so tests and the in-process hub share one implementation and need no openssl.
import { mkdtempSync, writeFileSync } from 'node:fs';
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
