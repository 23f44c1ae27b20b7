// A failed TLS handshake with a proxy-server, said in words an operator acts on: which certificate
// (subject, issuer, names, dates), what it was checked against, and which flag to change. Node's
// own texts ("unable to verify the first certificate", "try running Node.js with --use-system-ca")
// name neither the certificate nor the flag.

/** What the agent saw of a certificate (from tls.PeerCertificate or X509Certificate). */
export interface CertSummary {
  subject: string;
  issuer: string;
  /** "DNS:a, IP Address:1.2.3.4", as Node prints subjectaltname. */
  altNames?: string;
  validFrom?: string;
  validTo?: string;
}

export interface TlsFailure {
  /** An OpenSSL verify code (tlsSocket.authorizationError) or Node error code. */
  code?: string;
  message: string;
  /** host:port of the proxy-server. */
  server: string;
  /** The name the server's certificate must carry (from --proxy-server-host). */
  host: string;
  /** The proxy-server's certificate, when the handshake got that far. */
  serverCert?: CertSummary;
  /** --ca-cert, or '' for the system's roots, and the subjects of the CAs in it. */
  caCert: string;
  caSubjects: string[];
  /** --agent-cert, or '' for none, and its certificate. */
  agentCert: string;
  agentCertSummary?: CertSummary;
  now?: Date;
}

/** Our code for a TLS connection the server closed before sending a byte. */
export const closedAfterHandshake = 'CLOSED_AFTER_HANDSHAKE';

const notSigned = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
]);

function describeCert(c: CertSummary | undefined): string {
  if (!c) return '';
  return ` (subject ${c.subject}, issued by ${c.issuer}${c.altNames ? `, valid for ${c.altNames}` : ''})`;
}

function trusted(f: TlsFailure): string {
  if (!f.caCert) return "the system's root CAs (no --ca-cert was given)";
  const subjects = f.caSubjects.length ? ` (which holds ${f.caSubjects.join('; ')})` : '';
  return `--ca-cert=${f.caCert}${subjects}`;
}

/** Node's RDN text ("CN=a\nO=b", or an object) as one line. */
export function distinguishedName(dn: string | Record<string, string | string[]> | undefined): string {
  if (!dn) return '(none)';
  if (typeof dn === 'string') return dn.split('\n').filter(Boolean).join(', ');
  return Object.entries(dn)
    .map(([k, v]) => `${k}=${Array.isArray(v) ? v.join('+') : v}`)
    .join(', ');
}

export function describeTlsFailure(f: TlsFailure): string {
  const server = `the proxy-server ${f.server}`;
  const cert = `${server} presented a certificate${describeCert(f.serverCert)}`;
  const agent = f.agentCert
    ? `our client certificate --agent-cert=${f.agentCert}${describeCert(f.agentCertSummary)}`
    : 'no client certificate (--agent-cert is not set)';
  const code = f.code ?? '';
  if (notSigned.has(code) || code === 'SELF_SIGNED_CERT_IN_CHAIN') {
    // A restored or regenerated hub PKI often reuses the CA's name with a new key.
    const issuer = f.serverCert?.issuer;
    const where =
      f.caCert && issuer && f.caSubjects.includes(issuer)
        ? `--ca-cert=${f.caCert} (which holds a CA named ${issuer}, but not the one that signed this certificate: same name, different key)`
        : trusted(f);
    return `${cert} that is not signed by a CA in ${where}: give --ca-cert the CA that issued the proxy-server's certificate`;
  }
  if (code === 'DEPTH_ZERO_SELF_SIGNED_CERT')
    return `${cert} that is self-signed and not in ${trusted(f)}: give --ca-cert this certificate or the CA the server should use`;
  if (code === 'CERT_HAS_EXPIRED' || code === 'CERT_NOT_YET_VALID') {
    const leaf = f.serverCert;
    const now = f.now ?? new Date();
    const leafBad =
      leaf?.validTo && leaf.validFrom
        ? code === 'CERT_HAS_EXPIRED'
          ? new Date(leaf.validTo) < now
          : new Date(leaf.validFrom) > now
        : true;
    const when =
      code === 'CERT_HAS_EXPIRED'
        ? `expired${leaf?.validTo && leafBad ? ` on ${leaf.validTo}` : ''}`
        : `is not valid yet${leaf?.validFrom && leafBad ? ` (valid from ${leaf.validFrom})` : ''}`;
    const which = leafBad ? 'that' : 'whose issuing CA certificate';
    return `${cert} ${which} ${when}: renew the server's certificate (or check this machine's clock)`;
  }
  if (code === 'ERR_TLS_CERT_ALTNAME_INVALID')
    return `${cert} that is not valid for "${f.host}" (from --proxy-server-host): connect by a name the certificate carries, or reissue it with "${f.host}" among its names`;
  if (code === 'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA')
    return `${server} rejected ${agent}: it is not signed by a CA the server trusts for agents (the Go server's --cluster-ca-cert): issue --agent-cert/--agent-key from that CA`;
  if (code === 'ERR_SSL_SSLV3_ALERT_CERTIFICATE_EXPIRED')
    return `${server} rejected ${agent} as expired: renew --agent-cert/--agent-key`;
  if (
    code === 'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED' ||
    (code === 'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE' && !f.agentCert)
  )
    return `${server} requires a client certificate and we sent ${agent}: set --agent-cert and --agent-key`;
  if (
    code === 'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE' ||
    code === 'ERR_SSL_TLSV1_ALERT_DECRYPT_ERROR' ||
    code === 'ERR_SSL_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE'
  )
    return `${server} rejected ${agent} (${code}): check that --agent-cert and --agent-key match, are meant for client authentication, and are issued by the CA the server trusts for agents`;
  // A Node server (our hub) checks client certificates after the handshake and just closes.
  if (code === closedAfterHandshake)
    return `${server} closed the connection right after the TLS handshake, before saying anything: it most likely refused ${agent}${f.agentCert ? ": issue --agent-cert/--agent-key from the CA the server trusts for agents (the Go server's --cluster-ca-cert)" : ': set --agent-cert and --agent-key'}`;
  if (code === 'ERR_SSL_WRONG_VERSION_NUMBER' || code === 'ERR_SSL_PACKET_LENGTH_TOO_LONG')
    return `${server} does not speak TLS on this port: check --proxy-server-host/--proxy-server-port (the agent port of the proxy-server, 8091 by default)`;
  // Anything else: Node's text without its hint about Node's own flags.
  const text = f.message.replace(
    /[;.]?\s*(if the root CA is installed locally, |To debug, )?try running Node\.js with\s+--[\w-]+\.?/i,
    '',
  );
  return `TLS handshake with ${server} failed: ${text}${code && !text.includes(code) ? ` (${code})` : ''}`;
}
