// HTTP CONNECT mode: a TCP (or TLS) connection to the proxy-server's CONNECT port, then
// `CONNECT host:port HTTP/1.1`; on 200 the socket itself is the connection (Go's test-client, http-connect).
import net from 'node:net';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';
import { joinHostPort, tlsServerName } from '../net/address.js';
import { DialError, type DialContext, type DialOptions } from './dial-options.js';

/** Bounds on what we read of a refusal. */
const maxHeaderBytes = 16 * 1024;
const maxBodyBytes = 64 * 1024;

export interface ConnectReply {
  status: number;
  statusLine: string;
  /** Bytes after the header: the body of a refusal, or the connection's first bytes after a 200. */
  rest: Buffer;
}

/** Parses the reply header once `\r\n\r\n` has arrived; undefined until then. */
function parseConnectReply(buf: Buffer): ConnectReply | undefined {
  const end = buf.indexOf('\r\n\r\n');
  if (end === -1) return undefined;
  const statusLine = buf.subarray(0, buf.indexOf('\r\n')).toString('latin1');
  const m = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(statusLine);
  if (!m) throw new DialError(`malformed reply from proxy: ${JSON.stringify(statusLine)}`);
  return { status: Number(m[1]), statusLine, rest: buf.subarray(end + 4) };
}

export function dialHttpConnect(opts: DialOptions, ctx: DialContext): Promise<Duplex> {
  const to = opts.proxyUds ?? joinHostPort(opts.proxyHost, opts.proxyPort);
  const socket: net.Socket =
    opts.proxyUds !== undefined
      ? net.connect({ path: opts.proxyUds })
      : ctx.tls
        ? tls.connect({
            host: opts.proxyHost,
            port: opts.proxyPort,
            secureContext: ctx.tls,
            servername: tlsServerName(opts.proxyHost),
            ALPNProtocols: ['http/1.1'],
          })
        : net.connect({ host: opts.proxyHost, port: opts.proxyPort });

  return new Promise((resolve, reject) => {
    let buf: Buffer = Buffer.alloc(0);
    let reply: ConnectReply | undefined;
    let settled = false;
    const settle = (err?: DialError) => {
      if (settled) return;
      settled = true;
      stopTimer();
      socket.off('readable', onReadable);
      socket.off('end', onEnd);
      socket.off('error', onError);
      if (err) {
        ctx.event({ kind: 'closed', ms: ctx.elapsed(), reason: err.message });
        socket.destroy();
        reject(err);
      }
    };
    /** A refusal's body is read until the proxy closes; its text is the error. */
    const refuse = () => {
      const body = reply!.rest.toString('utf8').trim();
      settle(new DialError(body || reply!.statusLine, reply!.status));
    };
    // 'readable' rather than 'data', so the socket leaves here not flowing and the caller's 'data'
    // listener, or pipe, starts it without losing a byte.
    const onReadable = () => {
      while (!settled) {
        const chunk = socket.read() as Buffer | null;
        if (chunk === null) break;
        onData(chunk);
      }
    };
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (reply) {
        reply.rest = buf;
        if (buf.length > maxBodyBytes) refuse();
        return;
      }
      try {
        reply = parseConnectReply(buf);
      } catch (err) {
        return settle(err as DialError);
      }
      if (!reply) {
        if (buf.length > maxHeaderBytes) settle(new DialError('reply header from proxy too long'));
        return;
      }
      ctx.event({ kind: 'received', ms: ctx.elapsed(), packet: 'HTTP', detail: reply.statusLine });
      if (reply.status !== 200) {
        buf = reply.rest;
        return;
      }
      settle();
      ctx.event({ kind: 'established', ms: ctx.elapsed() });
      if (reply.rest.length > 0) socket.unshift(reply.rest);
      resolve(socket);
    };
    const onEnd = () => (reply ? refuse() : settle(new DialError('proxy closed the connection before replying')));
    const onError = (err: Error) => (reply && reply.status !== 200 ? refuse() : settle(new DialError(err.message)));
    const stopTimer = ctx.clock.after(ctx.timeoutMs, () =>
      settle(new DialError(`dial timeout after ${ctx.timeoutMs} ms`)),
    );

    socket.once(ctx.tls ? 'secureConnect' : 'connect', () => {
      ctx.event({ kind: 'connected', ms: ctx.elapsed(), to });
      const request = `CONNECT ${opts.address} HTTP/1.1\r\nHost: ${opts.address}\r\n\r\n`;
      ctx.event({ kind: 'sent', ms: ctx.elapsed(), packet: 'HTTP', detail: `CONNECT ${opts.address}` });
      socket.write(request);
    });
    socket.on('readable', onReadable);
    socket.on('end', onEnd);
    socket.on('error', onError);
  });
}
