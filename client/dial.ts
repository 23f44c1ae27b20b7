// The konnectivity-client equivalent for Node programs on the hub: open one TCP connection through the
// proxy-server and an agent, as a Duplex stream. See client/README.md.
import type { Duplex } from 'node:stream';
import { dialGrpc } from './dial-grpc.js';
import { dialHttpConnect } from './dial-http-connect.js';
import { type DialContext, DialError, type DialOptions, dialContext } from './dial-options.js';

export { type DialEvent, DialError, type DialOptions, defaultDialTimeoutMs } from './dial-options.js';

/**
 * Resolves with the connection once the agent has dialed `address`; rejects with a DialError carrying
 * the hub's text ("No agent available", the agent's dial error) otherwise.
 *
 * The stream has no half-close, like the protocol: `end()` or `destroy()` closes the connection
 * (CLOSE_REQ, or DIAL_CLS before the dial completed), and the remote side closing ends both directions.
 */
export function dialThroughProxy(opts: DialOptions): Promise<Duplex> {
  let ctx: DialContext;
  try {
    ctx = dialContext(opts);
  } catch (err) {
    return Promise.reject(err);
  }
  if (opts.proxyUds !== undefined && ctx.tls)
    return Promise.reject(
      new DialError('proxyUds is plaintext, as the proxy-server serves its Unix socket: no ca, cert or key with it'),
    );
  return opts.mode === 'grpc' ? dialGrpc(opts, ctx) : dialHttpConnect(opts, ctx);
}
