// The agent's connection to one proxy-server replica, on node:http2 directly: one TCP connection, our
// TLS handshake, one HTTP/2 session with keepalive pings, and on it the agent's AgentService/Connect
// streams (connect-call.ts): one per identifier group, so a rules edit opens and closes streams on
// the replica the agent already holds instead of dialling a load balancer again. That is all the agent
// needs of gRPC; grpc-js (channels, subchannels, load balancing, interceptors, a stream pipeline and
// two protobufjs passes per message) was the largest part of the agent's CPU per new dial and of its
// idle memory (bench/README.md, "Dial CPU"). The hub and the hub-side client keep grpc-js.
import http2 from 'node:http2';
import net from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Clock } from '../clock/clock.js';
import { splitHostPort } from '../net/address.js';
import { setCongestionControl } from '../net/tcp-congestion-control.js';
import { applyTcpFaultDetection, type TcpFaultDetection } from '../net/tcp-fault-detection.js';
import { ConnectCall, GrpcStatus, type ConnectCallOptions, type CallStatus } from './connect-call.js';

/**
 * Why a connection that was up went away, as an operator tunes for it: `timeout` (the kernel gave up:
 * nothing acknowledged for --tcp-user-timeout, or keepalive probes unanswered: the path went silent),
 * `ping` (an HTTP/2 PING unanswered: the server's process, not the path), `goaway` (the server said it
 * is going), `closed` (a FIN or a RST: Node's HTTP/2 reports a reset as a plain close), `error`
 * (anything else the socket reported).
 */
export type LossCause = 'timeout' | 'ping' | 'goaway' | 'closed' | 'error';

function causeOf(err: Error): LossCause {
  return (err as NodeJS.ErrnoException).code === 'ETIMEDOUT' ? 'timeout' : 'error';
}

/** How the agent's connections to the proxy-servers are set up at the TCP level. */
export interface HubTcp extends TcpFaultDetection {
  /** TCP_CONGESTION, '' for the system's (--tcp-congestion-control, net/tcp-congestion-control.ts). */
  congestionControl: string;
}

export interface AgentSessionOptions {
  /** host:port of the proxy-server's agent port. */
  address: string;
  /** The TLS handshake on the connected TCP socket. */
  secure: (socket: net.Socket) => Promise<TLSSocket>;
  /** TCP connect and TLS together. */
  timeoutMs: number;
  /** HTTP/2 flow-control window, per stream and for the connection. */
  windowBytes: number;
  /** An HTTP/2 PING this often (0: never); the connection is closed if one goes unanswered. */
  keepaliveMs: number;
  keepaliveTimeoutMs: number;
  /** What the keepalive's interval and timeout are measured on. */
  clock: Clock;
  /** TCP keepalive probes and TCP_USER_TIMEOUT on the socket: how a path that went silent is found. */
  tcp: HubTcp;
  /** Once, when the connection is gone (after `open` resolved); its streams have ended by then. */
  onClose: (status: CallStatus, cause: LossCause) => void;
}

export class AgentSession {
  private closed = false;
  /** After a GOAWAY the server takes no new streams; the ones open go on until they end. */
  private goingAway = false;
  private cancelKeepalive = () => {};
  private readonly calls = new Set<ConnectCall>();
  /** Why the connection went, once known. */
  private status?: CallStatus;
  private cause?: LossCause;

  private constructor(
    private readonly session: http2.ClientHttp2Session,
    private readonly opts: AgentSessionOptions,
    /** What of `tcp` could not be applied to the socket (logged by the caller). */
    readonly tcpProblem: string | undefined,
  ) {
    session.on('error', (err: Error) => {
      this.cause ??= causeOf(err);
      this.status ??= { code: GrpcStatus.UNAVAILABLE, details: `connection error: ${err.message}` };
    });
    session.on('goaway', (code: number) => {
      this.goingAway = true;
      this.cause ??= 'goaway';
      this.status ??= { code: GrpcStatus.UNAVAILABLE, details: `the server sent GOAWAY (HTTP/2 error ${code})` };
    });
    session.on('close', () => this.finish());
    this.scheduleKeepalive();
  }

  /** Connects: TCP, TLS, and the HTTP/2 session on it. */
  static open(opts: AgentSessionOptions): Promise<AgentSession> {
    return new Promise((resolve, reject) => {
      const hostPort = splitHostPort(opts.address);
      if (typeof hostPort === 'string') return reject(new Error(hostPort));
      let settled = false;
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        cancelTimeout();
        socket.destroy();
        reject(err);
      };
      const cancelTimeout = opts.clock.after(opts.timeoutMs, () =>
        fail(new Error(`no TLS connection to ${opts.address} within ${opts.timeoutMs}ms`)),
      );
      const socket = net.connect({ host: hostPort.host, port: hostPort.port, noDelay: true });
      socket.once('error', (err) => fail(new Error(`connect to ${opts.address}: ${err.message}`)));
      let tcpProblem: string | undefined;
      socket.once('connect', () => {
        tcpProblem =
          applyTcpFaultDetection(socket, opts.tcp) ?? setCongestionControl(socket, opts.tcp.congestionControl);
        opts.secure(socket).then((tls) => {
          if (settled) return void tls.destroy();
          settled = true;
          cancelTimeout();
          const session = http2.connect(`https://${opts.address}`, {
            createConnection: () => tls,
            settings: { initialWindowSize: opts.windowBytes, enablePush: false },
            // Node's own cap would reset the session under bulk transfers; the agent's buffer budget bounds memory.
            maxSessionMemory: Number.MAX_SAFE_INTEGER,
            // Node refuses to send a header block over 64 KiB; the Go proxy-server takes identifiers
            // up to ~580 KB (kube/README.md), and its SETTINGS say what it accepts.
            maxSendHeaderBlockLength: Number.MAX_SAFE_INTEGER,
          });
          // The connection's window too (grpc-js does the same): a 64 KiB one stalls bulk transfers on round trips.
          session.once('remoteSettings', () => {
            if (!session.destroyed) session.setLocalWindowSize(opts.windowBytes);
          });
          resolve(new AgentSession(session, opts, tcpProblem));
        }, fail);
      });
    });
  }

  /** True while the connection is up (the Go agent's readiness probe). */
  get ready(): boolean {
    return !this.closed && !this.session.closed && !this.session.destroyed;
  }

  /** Opens one Connect call (a stream) and waits for the server's response headers. */
  async openCall(opts: Omit<ConnectCallOptions, 'address' | 'clock'>): Promise<ConnectCall> {
    if (!this.ready) throw new Error(`the connection to ${this.opts.address} is closed`);
    if (this.goingAway) throw new Error(`${this.opts.address} sent GOAWAY: it takes no new streams on this connection`);
    const call = await ConnectCall.open(this.session, {
      ...opts,
      address: this.opts.address,
      clock: this.opts.clock,
    });
    if (this.closed) {
      call.cancel();
      throw new Error(`the connection to ${this.opts.address} closed`);
    }
    this.calls.add(call);
    call.onceEnded(() => this.calls.delete(call));
    return call;
  }

  /** Closes the connection once its streams have ended (at most a second later). */
  end(): void {
    if (this.closed) return;
    this.session.close();
    this.opts.clock.after(1000, () => this.close());
  }

  /** Drops the connection and with it every stream. */
  close(): void {
    this.session.destroy();
    this.finish();
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.cancelKeepalive();
    const status = this.status ?? { code: GrpcStatus.UNAVAILABLE, details: 'connection closed' };
    for (const call of [...this.calls]) call.connectionLost(status);
    this.opts.onClose(status, this.cause ?? 'closed');
  }

  private scheduleKeepalive(): void {
    if (!(this.opts.keepaliveMs > 0) || this.closed) return;
    this.cancelKeepalive = this.opts.clock.after(this.opts.keepaliveMs, () => this.ping());
  }

  private ping(): void {
    const unanswered = this.opts.clock.after(this.opts.keepaliveTimeoutMs, () => {
      this.cause ??= 'ping';
      this.status ??= {
        code: GrpcStatus.UNAVAILABLE,
        details: `keepalive ping unanswered for ${this.opts.keepaliveTimeoutMs}ms`,
      };
      this.close();
    });
    this.cancelKeepalive = unanswered;
    const sent = this.session.ping((err) => {
      unanswered();
      if (!err) this.scheduleKeepalive();
    });
    if (!sent) unanswered();
  }
}
