// TLS to a proxy-server's gRPC frontend, as grpc-js credentials. grpc-js's own sends an IP
// --proxy-host as SNI, which Node answers with a DEP0123 warning on every run; Go's client sends no
// SNI for an IP and checks the IP against the certificate's IP names, which Node does too once no
// servername is given. Plugged in through grpc-js's secure-connector hook (@grpc/grpc-js is pinned).
import type { Socket } from 'node:net';
import { connect as tlsConnect, type SecureContext } from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { tlsServerName } from '../net/address.js';

type CreateConnector = grpc.ChannelCredentials['_createSecureConnector'];

export class ProxyTlsCredentials extends grpc.ChannelCredentials {
  constructor(
    private readonly host: string,
    private readonly secureContext: SecureContext,
  ) {
    super();
  }

  _isSecure(): boolean {
    return true;
  }

  _equals(other: grpc.ChannelCredentials): boolean {
    return other === this;
  }

  _createSecureConnector(...[, , callCredentials]: Parameters<CreateConnector>): ReturnType<CreateConnector> {
    const { host } = this;
    return {
      connect: (socket: Socket) =>
        new Promise((resolve, reject) => {
          const tls = tlsConnect(
            { secureContext: this.secureContext, socket, host, servername: tlsServerName(host), ALPNProtocols: ['h2'] },
            () => resolve({ socket: tls, secure: true }),
          );
          tls.once('error', reject);
        }),
      waitForReady: () => Promise.resolve(),
      getCallCredentials: () => callCredentials ?? grpc.credentials.createEmpty(),
      destroy: () => {},
    };
  }
}
