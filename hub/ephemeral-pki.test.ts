// The throwaway PKI checked by other implementations: openssl parses and verifies what it issues
// (strict X.509, the purposes its usages allow), and Node's TLS completes mutual authentication with it.
import { X509Certificate } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, describe, expect, it } from 'vitest';
import { openssl } from '../test/support/openssl.js';
import { createCa, createEphemeralPki } from './ephemeral-pki.js';

const dir = mkdtempSync(join(tmpdir(), 'spoke-pki-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

const pki = createEphemeralPki('test CA');
const ca = file('ca.crt', pki.ca.cert);
const server = file('server.crt', pki.server.cert);
const client = file('client.crt', pki.client.cert);
const verify = (purpose: string, cert: string, anchor = ca) =>
  openssl(['verify', '-x509_strict', '-purpose', purpose, '-CAfile', anchor, cert]);

describe('ephemeral PKI', () => {
  it('issues what openssl reads as a CA, a server and a client certificate', async () => {
    const caText = await openssl(['x509', '-in', ca, '-text', '-noout']);
    expect(caText).toContain('Version: 3 (0x2)');
    expect(caText).toContain('Signature Algorithm: ecdsa-with-SHA256');
    expect(caText).toMatch(/Issuer: CN = test CA\n[\s\S]*Subject: CN = test CA\n/);
    expect(caText).toMatch(/Basic Constraints: critical\n\s+CA:TRUE\n/);
    expect(caText).toMatch(/Key Usage: critical\n\s+Certificate Sign, CRL Sign\n/);
    const serverText = await openssl(['x509', '-in', server, '-text', '-noout']);
    expect(serverText).toMatch(/Subject: CN = server\n/);
    expect(serverText).toMatch(/Basic Constraints: critical\n\s+CA:FALSE\n/);
    expect(serverText).toMatch(
      /Extended Key Usage: \n\s+TLS Web Server Authentication, TLS Web Client Authentication\n/,
    );
    expect(serverText).toMatch(
      /Alternative Name: \n\s+DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1\n/,
    );
    const clientText = await openssl(['x509', '-in', client, '-text', '-noout']);
    expect(clientText).toMatch(/Extended Key Usage: \n\s+TLS Web Client Authentication\n/);
    expect(clientText).not.toContain('Alternative Name');
    // The authority key identifier names the CA's subject key identifier.
    const keyId = (text: string, what: string) =>
      new RegExp(`${what} Key Identifier: \\n\\s+(?:keyid:)?(\\S+)`).exec(text)?.[1];
    expect(keyId(serverText, 'Authority')).toBe(keyId(caText, 'Subject'));
  });

  it('chains to its CA for the purposes its key usages allow, and to no other CA', async () => {
    await expect(verify('sslserver', server)).resolves.toContain('OK');
    await expect(verify('sslclient', server)).resolves.toContain('OK');
    await expect(verify('sslclient', client)).resolves.toContain('OK');
    await expect(verify('sslserver', client)).rejects.toThrow('unsuitable certificate purpose');
    const other = file('other-ca.crt', createCa('other').cert);
    await expect(verify('sslclient', client, other)).rejects.toThrow('unable to get local issuer certificate');
  });

  it('writes O values, in order, and a random positive serial per certificate', () => {
    const issued = pki.ca.issue('alice', { client: true, organizations: ['system:masters', 'ops, team'] });
    const cert = new X509Certificate(issued.cert);
    expect(cert.subject).toBe('O=system:masters\nO=ops\\, team\nCN=alice');
    expect(cert.issuer).toBe('CN=test CA');
    const serials = [pki.server, pki.client, issued].map((c) => new X509Certificate(c.cert).serialNumber);
    expect(new Set(serials).size).toBe(3);
    for (const serial of serials) expect(serial).toMatch(/^[4-7][0-9A-F]{31}$/);
  });

  it('names localhost, 127.0.0.1 and ::1 in the server certificate', () => {
    const peer = new X509Certificate(pki.server.cert).toLegacyObject();
    for (const host of ['localhost', '127.0.0.1', '::1']) expect(tls.checkServerIdentity(host, peer)).toBeUndefined();
    expect(tls.checkServerIdentity('example.com', peer)).toBeInstanceOf(Error);
  });

  it("completes mutual TLS with Node's tls on loopback", async () => {
    const server = tls.createServer({
      cert: pki.server.cert,
      key: pki.server.key,
      ca: pki.ca.cert,
      requestCert: true,
      rejectUnauthorized: true,
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const accepted = once(server, 'secureConnection') as Promise<[tls.TLSSocket]>;
    const { port } = server.address() as { port: number };
    const socket = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ca: pki.ca.cert, ...pki.client });
    try {
      await once(socket, 'secureConnect');
      const [peer] = await accepted;
      expect(socket.authorized).toBe(true);
      expect(peer.authorized).toBe(true);
      expect(peer.getPeerX509Certificate()?.subject).toBe('CN=client');
      peer.destroy();
    } finally {
      socket.destroy();
      server.close();
    }
  });
});
