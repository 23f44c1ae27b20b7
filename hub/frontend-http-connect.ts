// The HTTP CONNECT frontend (ANP pkg/server/tunnel.go, and ProxyClientConnection.send in server.go).
// `CONNECT host:port` becomes a DIAL_REQ; the reply is `200 Connection Established` only once the
// agent's DIAL_RSP arrives. Status lines, headers and bodies are byte-for-byte Go's.
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '../observability/log.js';
import { PacketType, type Packet } from '../proto/packets.js';
import { newRandom } from '../proto/random.js';
import { noAgentAvailable } from './backends.js';
import { backendDialTimeoutError } from './frontend-grpc.js';
import type { FrontendLink, Switchboard, TunnelledConnection } from './switchboard.js';

/** tunnel.go's bufferSize: "matches the gRPC window size". */
const readChunk = 32 * 1024;

const statusText: Record<number, string> = {
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

/** Go's mapDialErrorToHTTPStatus: the status for an agent's dial error text. */
export function dialErrorStatus(error: string): number {
  const e = error.toLowerCase();
  if (['i/o timeout', 'deadline exceeded', 'timeout'].some((s) => e.includes(s))) return 504;
  if (e.includes('too many open files')) return 503;
  return 502;
}

/** What http.Response.Write produces for Go's dial-error reply (no length, so Connection: close). */
export function dialErrorReply(error: string): string {
  const status = dialErrorStatus(error);
  return `HTTP/1.1 ${status} ${statusText[status]}\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n${error}`;
}

const replies = {
  established: 'HTTP/1.1 200 Connection Established\r\n\r\n',
  noAgent: (error: string) =>
    `HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\n\r\ncurrently no tunnels available: ${error}`,
  sendFailed: (status: 502 | 504, error: string) =>
    `HTTP/1.1 ${status} ${statusText[status]}\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nFailed to tunnel dial request: ${error}\r\n`,
  backendGone:
    'HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nBackend context error: context canceled\r\n',
  dialTimeout: `HTTP/1.1 504 Gateway Timeout\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nBackend dial timeout: ${backendDialTimeoutError}\r\n`,
};

export interface HttpConnectOptions {
  switchboard: Switchboard;
  log: Logger;
  backendDialTimeoutMs: number;
}

class HttpFrontend implements FrontendLink {
  readonly mode = 'http-connect';
  onEstablished?: () => void;
  onAgentGone?: () => void;

  constructor(
    private readonly socket: Duplex,
    private readonly closeHttp: () => void,
  ) {}

  get closed(): boolean {
    return this.socket.destroyed || this.socket.writableEnded;
  }

  deliver(pkt: Packet): boolean {
    switch (pkt.type) {
      case PacketType.DATA:
        return this.socket.write(pkt.data!.data);
      case PacketType.DIAL_RSP:
        if (pkt.dialResponse!.error) {
          this.socket.write(dialErrorReply(pkt.dialResponse!.error));
          this.closeHttp();
        }
        return true;
      case PacketType.CLOSE_RSP:
      case PacketType.DIAL_CLS:
        this.closeHttp();
        return true;
      default:
        return true;
    }
  }

  onceWritable(cb: () => void): void {
    if (this.closed || !this.socket.writableNeedDrain) queueMicrotask(cb);
    else {
      const done = () => {
        this.socket.off('drain', done);
        this.socket.off('close', done);
        cb();
      };
      this.socket.on('drain', done);
      this.socket.on('close', done);
    }
  }

  established(): void {
    this.onEstablished?.();
  }

  agentGone(): void {
    this.onAgentGone?.();
  }
}

/** Handles one CONNECT request on its hijacked socket (Go's Tunnel.ServeHTTP). */
function handleConnect(opts: HttpConnectOptions, req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
  const { switchboard, log } = opts;
  // For CONNECT, Go's r.Host is the request target.
  const address = req.url ?? '';
  socket.on('error', (err) => log.debug({ address, err: err.message }, 'CONNECT socket error'));
  socket.pause();

  const agent = switchboard.backends.pick(address);
  if (!agent) {
    log.info({ address }, 'no tunnels available');
    switchboard.dialFailed('no_agent');
    socket.end(replies.noAgent(noAgentAvailable));
    return;
  }

  // Go's conn.Close on a hijacked conn: what was written still leaves, then the socket is gone.
  let httpClosed = false;
  const closeHttp = () => {
    if (httpClosed) return;
    httpClosed = true;
    socket.end(() => socket.destroy());
    stopReading();
  };
  const frontend = new HttpFrontend(socket, closeHttp);
  const random = newRandom();
  const connection: TunnelledConnection = { random, address, agent, frontend, start: switchboard.clock.now() };
  switchboard.addPending(connection);

  let established = false;
  let stopTimer = () => {};
  const failDial = (reply: string) => {
    stopTimer();
    if (!established && switchboard.removePending(random)) socket.end(reply);
  };
  if (agent.closed) {
    switchboard.dialFailed('backend_close');
    failDial(replies.sendFailed(502, 'context canceled'));
    return;
  }
  agent.send({ type: PacketType.DIAL_REQ, dialRequest: { protocol: 'tcp', address, random } });

  if (opts.backendDialTimeoutMs > 0) {
    stopTimer = switchboard.clock.after(opts.backendDialTimeoutMs, () => {
      switchboard.dialFailed('backend_dial_timeout');
      failDial(replies.dialTimeout);
    });
  }
  frontend.onAgentGone = () => {
    switchboard.dialFailed('backend_close');
    failDial(replies.backendGone);
  };

  // Frontend gone before the connection was established: drop the pending dial (no DIAL_CLS here, as in Go).
  socket.once('close', () => {
    stopTimer();
    if (!established && switchboard.removePending(random)) switchboard.dialFailed('frontend_close');
  });

  let closeSent = false;
  const sendClose = () => {
    if (closeSent) return;
    closeSent = true;
    switchboard.closeOnAgent(agent, connection.connectID!, 'frontend connection ended');
  };
  const onData = (chunk: Buffer) => {
    let writable = true;
    for (let at = 0; at < chunk.length; at += readChunk) {
      writable = agent.send({
        type: PacketType.DATA,
        data: { connectID: connection.connectID!, data: chunk.subarray(at, at + readChunk) },
      });
    }
    if (!writable) {
      socket.pause();
      agent.onceWritable(() => socket.resume());
    }
  };
  function stopReading(): void {
    socket.off('data', onData);
    if (established) sendClose();
  }

  frontend.onEstablished = () => {
    established = true;
    stopTimer();
    socket.write(replies.established);
    log.debug({ address, connectID: connection.connectID, agentID: agent.agentID }, 'CONNECT established');
    if (head.length > 0) onData(head);
    socket.on('data', onData);
    // Go reads until EOF or error, then sends CLOSE_REQ and closes the socket.
    socket.once('end', closeHttp);
    socket.once('close', stopReading);
    socket.resume();
  };
}

/** The CONNECT listener: plain HTTP, or HTTPS (HTTP/1.1 only) when given TLS options. */
export function createHttpConnectServer(opts: HttpConnectOptions, tls?: https.ServerOptions): http.Server {
  const onRequest = (_req: http.IncomingMessage, res: http.ServerResponse) => {
    // http.Error's reply.
    res.writeHead(405, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff' });
    res.end('this proxy only supports CONNECT passthrough\n');
  };
  const server = tls
    ? https.createServer({ ...tls, ALPNProtocols: ['http/1.1'] }, onRequest)
    : http.createServer(onRequest);
  server.on('connect', (req: http.IncomingMessage, socket: Socket, head: Buffer) =>
    handleConnect(opts, req, socket, head),
  );
  return server;
}
