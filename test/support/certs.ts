// Throwaway PKI for tests: a CA, a server certificate for localhost/127.0.0.1, and client
// certificates, made with the openssl CLI into a temporary folder.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestPki {
  dir: string;
  caCert: string;
  caKey: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** Issues another certificate signed by this CA; returns [certPath, keyPath]. */
  issue(name: string, opts?: { serverNames?: string[]; client?: boolean }): [string, string];
}

function openssl(args: string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: 'pipe' });
}

export function makeCa(dir: string, name = 'ca'): [string, string] {
  openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2', '-subj', `/CN=${name}`, '-keyout', `${name}.key`, '-out', `${name}.crt`], dir);
  return [join(dir, `${name}.crt`), join(dir, `${name}.key`)];
}

export function makePki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'spoke-pki-'));
  const [caCert, caKey] = makeCa(dir);
  const issue = (name: string, opts: { serverNames?: string[]; client?: boolean } = {}): [string, string] => {
    const sans = opts.serverNames ?? [];
    const ext = [
      `basicConstraints=CA:FALSE`,
      `extendedKeyUsage=${opts.client ? 'clientAuth' : 'serverAuth,clientAuth'}`,
      ...(sans.length ? [`subjectAltName=${sans.map((s) => (/^[\d.]+$|:/.test(s) ? `IP:${s}` : `DNS:${s}`)).join(',')}`] : []),
    ].join('\n');
    writeFileSync(join(dir, `${name}.ext`), ext);
    openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', `/CN=${name}`, '-keyout', `${name}.key`, '-out', `${name}.csr`], dir);
    openssl(['x509', '-req', '-in', `${name}.csr`, '-CA', caCert, '-CAkey', caKey, '-CAcreateserial', '-days', '2', '-extfile', `${name}.ext`, '-out', `${name}.crt`], dir);
    return [join(dir, `${name}.crt`), join(dir, `${name}.key`)];
  };
  const [serverCert, serverKey] = issue('server', { serverNames: ['localhost', '127.0.0.1', '::1'] });
  const [clientCert, clientKey] = issue('client', { client: true });
  return { dir, caCert, caKey, serverCert, serverKey, clientCert, clientKey, issue };
}
