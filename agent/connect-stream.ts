// AgentService/Connect on node:http2 directly: one TCP connection, our TLS handshake, one HTTP/2
// session and the one bidirectional gRPC stream on it. That is all the agent needs of gRPC; grpc-js
// (channels, subchannels, load balancing, interceptors, a stream pipeline and two protobufjs passes
// per message) was the largest part of the agent's CPU per new dial and of its idle memory
// (bench/README.md, "Dial CPU"). The hub and the hub-side client keep grpc-js.
import http2 from 'node:http2';
import net from 'node:net';
import type { TLSSocket } from 'node:tls';
import { GrpcFramingError, GrpcMessageReader } from '../proto/grpc-framing.js';
import { splitHostPort } from './address.js';

const statusNames = ['OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND', 'ALREADY_EXISTS', 'PERMISSION_DENIED', 'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION', 'ABORTED', 'OUT_OF_RANGE', 'UNIMPLEMENTED', 'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS', 'UNAUTHENTICATED'];
export const GrpcStatus = { OK: 0, CANCELLED: 1, UNKNOWN: 2, RESOURCE_EXHAUSTED: 8, INTERNAL: 13, UNAVAILABLE: 14 } as const;

export function grpcStatusName(code: number): string {
  return statusNames[code] ?? String(code);
}

/** How a stream ended: gRPC's status, from the server's trailers or what we make of a reset. */
export interface StreamStatus {
  code: number;
  details: string;
}

export interface ConnectStreamOptions {
  /** host:port of the proxy-server's agent port. */
  target: string;
  /** The TLS handshake on the connected TCP socket. */
  secure: (socket: net.Socket) => Promise<TLSSocket>;
  /** Request metadata, lower-case names (the agent's ID and identifiers, a bearer token). */
  metadata: Record<string, string>;
  /** TCP connect, TLS and the server's response headers together. */
  timeoutMs: number;
  /** HTTP/2 flow-control window, per stream and for the connection. */
  windowBytes: number;
  maxMessageBytes: number;
  /** An HTTP/2 PING this often (0: never); the transport is closed if one goes unanswered. */
  keepaliveMs: number;
  keepaliveTimeoutMs: number;
  /** Each message from the server, in order; the buffer may be a view into the received chunk. */
  onMessage: (message: Buffer) => void;
  /** Once, however the stream ends (after `open` resolved). */
  onEnd: (status: StreamStatus) => void;
}

export class ConnectStream {
  private ended = false;
  private keepaliveTimer?: NodeJS.Timeout;
  private readonly reader: GrpcMessageReader;
  /** The server's trailers, or an error seen before the stream closed. */
  private status?: StreamStatus;

  private constructor(
    private readonly session: http2.ClientHttp2Session,
    private readonly stream: http2.ClientHttp2Stream,
    readonly responseHeaders: http2.IncomingHttpHeaders,
    private readonly opts: ConnectStreamOptions,
  ) {
    this.reader = new GrpcMessageReader(opts.maxMessageBytes);
    stream.on('data', (chunk: Buffer) => {
      try {
        this.reader.push(chunk, opts.onMessage);
      } catch (err) {
        if (!(err instanceof GrpcFramingError)) throw err;
        this.status = { code: GrpcStatus.RESOURCE_EXHAUSTED, details: err.message };
        this.cancel();
      }
    });
    stream.on('trailers', (trailers: http2.IncomingHttpHeaders) => (this.status ??= statusOf(trailers) ?? { code: GrpcStatus.UNKNOWN, details: 'trailers without grpc-status' }));
    stream.on('error', (err: Error) => (this.status ??= { code: GrpcStatus.UNAVAILABLE, details: err.message }));
    // The server's end of the stream (trailers, then 'end') ends the call, as in gRPC; 'close' would
    // wait for our side too. An end without trailers may be a reset, whose code only 'close' tells:
    // end our side as well and let it.
    stream.on('end', () => {
      if (this.status) this.finish(this.status);
      else if (stream.writable) stream.end();
    });
    stream.on('close', () => this.finish(this.status ?? resetStatus(stream.rstCode)));
    session.on('error', (err: Error) => (this.status ??= { code: GrpcStatus.UNAVAILABLE, details: `connection error: ${err.message}` }));
    session.on('close', () => this.finish(this.status ?? { code: GrpcStatus.UNAVAILABLE, details: 'connection closed' }));
    this.scheduleKeepalive();
  }

  /** Connects, sends the request headers and waits for the server's response headers. */
  static open(opts: ConnectStreamOptions): Promise<ConnectStream> {
    return new Promise((resolve, reject) => {
      const target = splitHostPort(opts.target);
      if (typeof target === 'string') return reject(new Error(target));
      let session: http2.ClientHttp2Session | undefined;
      let settled = false;
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        session?.destroy();
        socket.destroy();
        reject(err);
      };
      const timer = setTimeout(() => fail(new Error(`no response headers from ${opts.target} within ${opts.timeoutMs}ms`)), opts.timeoutMs);
      const socket = net.connect({ host: target.host, port: target.port, noDelay: true });
      socket.once('error', (err) => fail(new Error(`connect to ${opts.target}: ${err.message}`)));
      socket.once('connect', () => {
        opts.secure(socket).then((tls) => {
          if (settled) return void tls.destroy();
          session = http2.connect(`https://${opts.target}`, {
            createConnection: () => tls,
            settings: { initialWindowSize: opts.windowBytes, enablePush: false },
            // Node's own cap would reset the session under bulk transfers; the agent's buffer budget bounds memory.
            maxSessionMemory: Number.MAX_SAFE_INTEGER,
            // Node refuses to send a header block over 64 KiB; the Go proxy-server takes identifiers
            // up to ~580 KB (kube/README.md), and its SETTINGS say what it accepts.
            maxSendHeaderBlockLength: Number.MAX_SAFE_INTEGER,
          });
          const s = session;
          // The connection's window too (grpc-js does the same): a 64 KiB one stalls bulk transfers on round trips.
          s.once('remoteSettings', () => {
            if (!s.destroyed) s.setLocalWindowSize(opts.windowBytes);
          });
          const onSessionError = (err: Error) => fail(new Error(`HTTP/2 to ${opts.target}: ${err.message}`));
          const onSessionClose = () => fail(new Error(`${opts.target} closed the connection before answering`));
          s.once('error', onSessionError);
          s.once('close', onSessionClose);
          const stream = s.request({
            ':method': 'POST',
            ':path': '/AgentService/Connect',
            'content-type': 'application/grpc',
            te: 'trailers',
            'grpc-accept-encoding': 'identity',
            'user-agent': 'spoke-agent',
            ...opts.metadata,
          });
          const onStreamError = (err: Error) => fail(new Error(err.message));
          stream.once('error', onStreamError);
          stream.once('response', (headers) => {
            const refused = refusal(headers);
            if (refused) return fail(new Error(refused));
            settled = true;
            clearTimeout(timer);
            s.off('error', onSessionError).off('close', onSessionClose);
            stream.off('error', onStreamError);
            resolve(new ConnectStream(s, stream, headers, opts));
          });
        }, fail);
      });
    });
  }

  /** Writes one framed message; false means the stream is backed up ('drain' via onDrain). */
  write(frame: Buffer): boolean {
    if (this.ended || !this.stream.writable) return true;
    return this.stream.write(frame);
  }

  onDrain(listener: () => void): void {
    this.stream.on('drain', listener);
  }

  pause(): void {
    this.stream.pause();
  }

  resume(): void {
    this.stream.resume();
  }

  /** True while the connection is up and the stream open (the Go agent's readiness probe). */
  get ready(): boolean {
    return !this.ended && !this.session.closed && !this.session.destroyed;
  }

  /** Half-closes our side: what we wrote still reaches the server, which then ends the stream. */
  end(): void {
    if (!this.ended && this.stream.writable) this.stream.end();
  }

  /** Resets the stream and drops the connection. */
  cancel(): void {
    if (!this.stream.closed) this.stream.close(http2.constants.NGHTTP2_CANCEL);
    this.session.destroy();
  }

  private finish(status: StreamStatus): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.keepaliveTimer);
    // One stream per connection: once it is over, so is the connection.
    this.session.destroy();
    this.opts.onEnd(status);
  }

  private scheduleKeepalive(): void {
    if (!(this.opts.keepaliveMs > 0) || this.ended) return;
    this.keepaliveTimer = setTimeout(() => this.ping(), this.opts.keepaliveMs).unref();
  }

  private ping(): void {
    const unanswered = setTimeout(() => {
      this.status ??= { code: GrpcStatus.UNAVAILABLE, details: `keepalive ping unanswered for ${this.opts.keepaliveTimeoutMs}ms` };
      this.cancel();
    }, this.opts.keepaliveTimeoutMs).unref();
    const sent = this.session.ping((err) => {
      clearTimeout(unanswered);
      if (!err) this.scheduleKeepalive();
    });
    if (!sent) clearTimeout(unanswered);
  }
}

/** Why response headers refuse the call (an HTTP error, or a trailers-only gRPC error), if they do. */
function refusal(headers: http2.IncomingHttpHeaders): string | undefined {
  const status = headers[':status'];
  const grpc = statusOf(headers);
  if (grpc && grpc.code !== GrpcStatus.OK) return `${grpcStatusName(grpc.code)}: ${grpc.details}`;
  if (Number(status) !== 200) return `HTTP status ${status} from the server (not a gRPC endpoint?)`;
  if (grpc) return 'the server ended the stream before it began';
  if (!String(headers['content-type'] ?? '').startsWith('application/grpc')) return `content-type ${String(headers['content-type'])} from the server (not a gRPC endpoint?)`;
  return undefined;
}

function statusOf(headers: http2.IncomingHttpHeaders): StreamStatus | undefined {
  const code = headers['grpc-status'];
  if (code === undefined) return undefined;
  const message = String(headers['grpc-message'] ?? '');
  let details = message;
  try {
    details = decodeURIComponent(message);
  } catch {
    // Not percent-encoded after all: keep it as sent.
  }
  return { code: Number(code), details };
}

/** gRPC's mapping of an HTTP/2 RST_STREAM code to a status (the server sent no trailers). */
function resetStatus(rstCode: number | undefined): StreamStatus {
  const c = http2.constants;
  switch (rstCode) {
    case c.NGHTTP2_REFUSED_STREAM:
      return { code: GrpcStatus.UNAVAILABLE, details: 'stream refused by the server' };
    case c.NGHTTP2_CANCEL:
      return { code: GrpcStatus.CANCELLED, details: 'stream cancelled' };
    case c.NGHTTP2_ENHANCE_YOUR_CALM:
      return { code: GrpcStatus.RESOURCE_EXHAUSTED, details: 'the server asked us to calm down (ENHANCE_YOUR_CALM)' };
    case undefined:
    case c.NGHTTP2_NO_ERROR:
      return { code: GrpcStatus.UNKNOWN, details: 'stream ended without a status' };
    default:
      return { code: GrpcStatus.INTERNAL, details: `stream reset with HTTP/2 error ${rstCode}` };
  }
}
