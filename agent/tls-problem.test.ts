import { describe, expect, it } from 'vitest';
import { closedAfterHandshake, describeTlsFailure, distinguishedName, type TlsFailure } from './tls-problem.js';

const base: TlsFailure = {
  message: 'unable to verify the first certificate',
  server: 'hub.example:8091',
  host: 'hub.example',
  serverCert: {
    subject: 'CN=proxy-server',
    issuer: 'CN=hub-ca',
    altNames: 'DNS:proxy.hub.svc',
    validFrom: 'Jan  1 00:00:00 2026 GMT',
    validTo: 'Jan  1 00:00:00 2027 GMT',
  },
  caCert: '/etc/ca.crt',
  caSubjects: ['CN=spoke-ca'],
  agentCert: '/etc/tls.crt',
  agentCertSummary: { subject: 'CN=agent', issuer: 'CN=spoke-ca' },
  now: new Date('2026-06-01T00:00:00Z'),
};
const say = (f: Partial<TlsFailure>) => describeTlsFailure({ ...base, ...f });

describe('describeTlsFailure', () => {
  it('a server certificate from another CA: the certificate, its issuer, --ca-cert and what it holds', () => {
    for (const code of [
      'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
      'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
      'SELF_SIGNED_CERT_IN_CHAIN',
    ]) {
      expect(say({ code })).toBe(
        "the proxy-server hub.example:8091 presented a certificate (subject CN=proxy-server, issued by CN=hub-ca, valid for DNS:proxy.hub.svc) that is not signed by a CA in --ca-cert=/etc/ca.crt (which holds CN=spoke-ca): give --ca-cert the CA that issued the proxy-server's certificate",
      );
    }
  });

  it('a CA of the same name but another key (a regenerated hub PKI), and no --ca-cert at all', () => {
    expect(say({ code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', caSubjects: ['CN=hub-ca'] })).toContain(
      'not signed by a CA in --ca-cert=/etc/ca.crt (which holds a CA named CN=hub-ca, but not the one that signed this certificate: same name, different key)',
    );
    expect(say({ code: 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', caCert: '', caSubjects: [] })).toContain(
      "not signed by a CA in the system's root CAs (no --ca-cert was given)",
    );
  });

  it('a self-signed server certificate', () => {
    expect(say({ code: 'DEPTH_ZERO_SELF_SIGNED_CERT' })).toContain(
      'that is self-signed and not in --ca-cert=/etc/ca.crt',
    );
  });

  it('expired: the server certificate itself, or a CA in its chain', () => {
    expect(say({ code: 'CERT_HAS_EXPIRED', now: new Date('2027-06-01T00:00:00Z') })).toContain(
      'that expired on Jan  1 00:00:00 2027 GMT: renew the server',
    );
    expect(say({ code: 'CERT_HAS_EXPIRED' })).toContain('whose issuing CA certificate expired: renew');
    expect(say({ code: 'CERT_NOT_YET_VALID', now: new Date('2025-06-01T00:00:00Z') })).toContain(
      'that is not valid yet (valid from Jan  1 00:00:00 2026 GMT)',
    );
  });

  it('a name mismatch: the names the certificate has, the one --proxy-server-host asked for', () => {
    expect(say({ code: 'ERR_TLS_CERT_ALTNAME_INVALID' })).toBe(
      'the proxy-server hub.example:8091 presented a certificate (subject CN=proxy-server, issued by CN=hub-ca, valid for DNS:proxy.hub.svc) that is not valid for "hub.example" (from --proxy-server-host): connect by a name the certificate carries, or reissue it with "hub.example" among its names',
    );
  });

  it('the server refusing our client certificate (the Go server sends an alert; a Node server just closes)', () => {
    expect(say({ code: 'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA' })).toBe(
      "the proxy-server hub.example:8091 rejected our client certificate --agent-cert=/etc/tls.crt (subject CN=agent, issued by CN=spoke-ca): it is not signed by a CA the server trusts for agents (the Go server's --cluster-ca-cert): issue --agent-cert/--agent-key from that CA",
    );
    expect(say({ code: 'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE' })).toContain(
      'rejected our client certificate --agent-cert=/etc/tls.crt (subject CN=agent, issued by CN=spoke-ca) (ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE)',
    );
    expect(say({ code: 'ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED' })).toContain(
      'as expired: renew --agent-cert/--agent-key',
    );
    expect(say({ code: closedAfterHandshake })).toContain(
      'closed the connection right after the TLS handshake, before saying anything: it most likely refused our client certificate --agent-cert=/etc/tls.crt',
    );
  });

  it('no client certificate where the server requires one', () => {
    for (const code of [
      'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
      'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE',
      closedAfterHandshake,
    ]) {
      expect(say({ code, agentCert: '', agentCertSummary: undefined })).toMatch(
        /no client certificate \(--agent-cert is not set\): set --agent-cert and --agent-key$/,
      );
    }
  });

  it('not TLS on that port', () => {
    expect(say({ code: 'ERR_SSL_WRONG_VERSION_NUMBER' })).toContain(
      'does not speak TLS on this port: check --proxy-server-host/--proxy-server-port',
    );
  });

  it("anything else: Node's text, without its advice about Node's own flags", () => {
    const text = say({
      code: 'ECONNRESET',
      message:
        'Client network socket disconnected before secure TLS connection was established. To debug, try running Node.js with --use-system-ca.',
    });
    expect(text).toBe(
      'TLS handshake with the proxy-server hub.example:8091 failed: Client network socket disconnected before secure TLS connection was established (ECONNRESET)',
    );
    // Node 24's own wording for a missing issuer.
    expect(
      say({
        code: 'X',
        message:
          'unable to get local issuer certificate; if the root CA is installed locally, try running Node.js with  --use-system-ca',
      }),
    ).toBe('TLS handshake with the proxy-server hub.example:8091 failed: unable to get local issuer certificate (X)');
  });
});

describe('distinguishedName', () => {
  it("joins Node's forms into one line", () => {
    expect(distinguishedName('CN=a\nO=b')).toBe('CN=a, O=b');
    expect(distinguishedName({ CN: 'a', OU: ['x', 'y'] })).toBe('CN=a, OU=x+y');
    expect(distinguishedName(undefined)).toBe('(none)');
  });
});
