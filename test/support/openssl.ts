// openssl(1) as an implementation other than ours: it reads and verifies what hub/ephemeral-pki.ts
// issues, and it makes client certificates with subjects our PKI never writes (multi-valued RDNs,
// escaped characters, two CNs), to check how they are read.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { CertAndKey } from '../../hub/ephemeral-pki.js';

/** Runs openssl; resolves with its standard output, rejects with its standard error on a non-zero exit. */
export async function openssl(args: string[]): Promise<string> {
  try {
    return (await promisify(execFile)('openssl', args)).stdout;
  } catch (err) {
    const { stderr, stdout } = err as { stderr?: string; stdout?: string };
    throw new Error(`openssl ${args[0]}: ${stderr || stdout || String(err)}`);
  }
}

/**
 * A client certificate (P-256, extendedKeyUsage clientAuth) that `ca` signs, with the subject in
 * openssl's `-subj` syntax (`/O=a/CN=b`, `\` escapes, `+` joins a multi-valued RDN), values UTF-8.
 */
export async function opensslClientCert(ca: CertAndKey, subject: string): Promise<CertAndKey> {
  const dir = mkdtempSync(join(tmpdir(), 'spoke-openssl-'));
  const file = (name: string) => join(dir, name);
  const [caCert, caKey, cert, key] = [file('ca.crt'), file('ca.key'), file('client.crt'), file('client.key')];
  try {
    writeFileSync(caCert, ca.cert);
    writeFileSync(caKey, ca.key, { mode: 0o600 });
    await openssl([
      'req',
      ...['-x509', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1'],
      ...['-keyout', key, '-out', cert, '-CA', caCert, '-CAkey', caKey],
      ...['-utf8', '-multivalue-rdn', '-subj', subject],
      ...['-addext', 'basicConstraints=critical,CA:FALSE', '-addext', 'extendedKeyUsage=clientAuth'],
    ]);
    return { cert: readFileSync(cert, 'utf8'), key: readFileSync(key, 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
