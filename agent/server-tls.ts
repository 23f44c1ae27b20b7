// The TLS side of one connection attempt to a proxy-server: our own handshake on the TCP socket, so
// - an IP --proxy-server-host is checked against the certificate's IP names with no SNI sent (as Go's
//   crypto/tls does; Node warns DEP0123 for an IP servername);
// - a failure names the certificate Node saw, the flag to look at and the CAs it trusts (tls-problem.ts).
import { X509Certificate } from 'node:crypto';
import type { Socket } from 'node:net';
import { connect as tlsConnect, type PeerCertificate, type SecureContext, type TLSSocket } from 'node:tls';
import { tlsServerName } from '../net/address.js';
import { certificateBlocks } from '../tls/pem.js';
import { closedAfterHandshake, describeTlsFailure, distinguishedName, type CertSummary } from './tls-problem.js';

export interface ServerTlsOptions {
  secureContext: SecureContext;
  /** host:port of the proxy-server, and the host its certificate must name. */
  server: string;
  host: string;
  /** ALPN protocols to offer before h2, as the Go agent's --alpn-proto (grpc-go appends h2 the same way). */
  alpn: string[];
  /** For messages: the flags' paths and the PEM they hold. */
  caCert: string;
  caPem?: Buffer | null;
  agentCert: string;
  agentPem?: Buffer | null;
}

/** A TLS error code that says the server refused us (a TLS alert), not our check of the server. */
const alertCode = /^ERR_SSL_(TLSV1|SSLV3|TLSV13)_ALERT_/;

function summary(cert: PeerCertificate | X509Certificate): CertSummary {
  if (cert instanceof X509Certificate)
    return {
      subject: distinguishedName(cert.subject),
      issuer: distinguishedName(cert.issuer),
      altNames: cert.subjectAltName,
      validFrom: cert.validFrom,
      validTo: cert.validTo,
    };
  return {
    subject: distinguishedName(cert.subject as never),
    issuer: distinguishedName(cert.issuer as never),
    altNames: cert.subjectaltname,
    validFrom: cert.valid_from,
    validTo: cert.valid_to,
  };
}

function certificates(pem: Buffer | null | undefined): X509Certificate[] {
  const blocks = certificateBlocks(pem?.toString() ?? '');
  const out: X509Certificate[] = [];
  for (const block of blocks) {
    try {
      out.push(new X509Certificate(block));
    } catch {
      // tlsFilesProblem reports unreadable files at start-up; a message does without them.
    }
  }
  return out;
}

export class ServerTls {
  /** The last TLS failure in an operator's words, for the attempt's error message. */
  problem?: string;
  /** The server's latest session ticket: offered on a later attempt, it resumes with this server alone. */
  session?: Buffer;
  /** The handshake resumed the offered session: the server is the one that issued it. */
  resumed = false;

  constructor(private readonly opts: ServerTlsOptions) {}

  /**
   * Runs the handshake on a connected TCP socket; rejects with the failure in an operator's words.
   * `session`: a ticket of a server this agent verified before; a server that accepts it skips its
   * signature and our certificate's verification (TLS 1.3 resumption), and is that server.
   */
  handshake(socket: Socket, session?: Buffer): Promise<TLSSocket> {
    const { host } = this.opts;
    return new Promise((resolve, reject) => {
      let connected = false;
      // Verification is ours (below), so the failure can name the certificate Node saw.
      const tls = tlsConnect(
        {
          socket,
          secureContext: this.opts.secureContext,
          host,
          servername: tlsServerName(host),
          ALPNProtocols: [...this.opts.alpn.filter((p) => p !== 'h2'), 'h2'],
          rejectUnauthorized: false,
          session,
        },
        () => {
          connected = true;
          this.resumed = tls.isSessionReused();
          if (!tls.authorized) {
            reject(
              this.fail(
                String(tls.authorizationError),
                `certificate verification failed: ${String(tls.authorizationError)}`,
                tls.getPeerCertificate(),
              ),
            );
            tls.destroy();
            return;
          }
          // A server that closes before its first HTTP/2 byte (a Node server refusing our client
          // certificate) would leave only "closed the connection".
          tls.once('close', () => {
            if (tls.bytesRead === 0) this.fail(closedAfterHandshake, 'connection closed after the TLS handshake');
          });
          resolve(tls);
        },
      );
      tls.on('session', (ticket: Buffer) => (this.session = ticket));
      // With TLS 1.3 the server checks our certificate after our side is done: its refusal then
      // arrives as an alert on the open socket.
      tls.on('error', (e: NodeJS.ErrnoException) => {
        if (!connected) reject(this.fail(e.code, e.message));
        else if (e.code && alertCode.test(e.code)) this.fail(e.code, e.message);
        // A reset instead of a close, before any HTTP/2 byte: the same refusal, told before the
        // stream's error reaches the caller (the 'close' above comes after it).
        else if (tls.bytesRead === 0 && (e.code === 'ECONNRESET' || e.code === 'EPIPE'))
          this.fail(closedAfterHandshake, `connection reset after the TLS handshake (${e.code})`);
      });
    });
  }

  private fail(code: string | undefined, message: string, peer?: PeerCertificate): Error {
    const { opts } = this;
    const agent = certificates(opts.agentPem)[0];
    this.problem = describeTlsFailure({
      code,
      message,
      server: opts.server,
      host: opts.host,
      serverCert: peer && Object.keys(peer).length ? summary(peer) : undefined,
      caCert: opts.caCert,
      caSubjects: certificates(opts.caPem).map((c) => distinguishedName(c.subject)),
      agentCert: opts.agentCert,
      agentCertSummary: agent && summary(agent),
    });
    return new Error(this.problem);
  }
}
