// One AgentService/Connect call, the bidirectional gRPC stream of packets, on an HTTP/2 session the
// agent holds to a proxy-server (agent-session.ts): request headers with the agent's metadata, the
// server's response headers (serverID, serverCount) or its refusal, messages both ways, and the
// status it ends with, from the trailers or a reset.
import http2 from 'node:http2';
import type { Clock } from '../clock/clock.js';
import { GrpcFramingError, GrpcMessageReader } from '../proto/grpc-framing.js';

const statusNames = [
  'OK',
  'CANCELLED',
  'UNKNOWN',
  'INVALID_ARGUMENT',
  'DEADLINE_EXCEEDED',
  'NOT_FOUND',
  'ALREADY_EXISTS',
  'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED',
  'FAILED_PRECONDITION',
  'ABORTED',
  'OUT_OF_RANGE',
  'UNIMPLEMENTED',
  'INTERNAL',
  'UNAVAILABLE',
  'DATA_LOSS',
  'UNAUTHENTICATED',
];
export const GrpcStatus = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  RESOURCE_EXHAUSTED: 8,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;

export function grpcStatusName(code: number): string {
  return statusNames[code] ?? String(code);
}

/** How a stream ended: gRPC's status, from the server's trailers or what we make of a reset. */
export interface CallStatus {
  code: number;
  details: string;
}

export interface ConnectCallOptions {
  /** host:port of the proxy-server's agent port, for messages. */
  address: string;
  /** Request metadata, lower-case names (the agent's ID and identifiers, a bearer token). */
  metadata: Record<string, string>;
  /** How long to wait for the server's response headers, on `clock`. */
  timeoutMs: number;
  clock: Clock;
  maxMessageBytes: number;
  /** Each message from the server, in order; the buffer may be a view into the received chunk. */
  onMessage: (message: Buffer) => void;
  /** Once, however the stream ends (after `open` resolved). */
  onEnd: (status: CallStatus) => void;
}

/** One AgentService/Connect call on an HTTP/2 session (agent-session.ts holds the connection). */
export class ConnectCall {
  private ended = false;
  private readonly reader: GrpcMessageReader;
  /** The server's trailers, or an error seen before the stream closed. */
  private status?: CallStatus;
  private readonly endListeners: Array<() => void> = [];

  private constructor(
    private readonly stream: http2.ClientHttp2Stream,
    readonly responseHeaders: http2.IncomingHttpHeaders,
    private readonly opts: ConnectCallOptions,
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
    stream.on(
      'trailers',
      (trailers: http2.IncomingHttpHeaders) =>
        (this.status ??= statusOf(trailers) ?? { code: GrpcStatus.UNKNOWN, details: 'trailers without grpc-status' }),
    );
    stream.on('error', (err: Error) => (this.status ??= { code: GrpcStatus.UNAVAILABLE, details: err.message }));
    // The server's end of the stream (trailers, then 'end') ends the call, as in gRPC; 'close' would
    // wait for our side too. An end without trailers may be a reset, whose code only 'close' tells:
    // end our side as well and let it.
    stream.on('end', () => {
      if (this.status) this.finish(this.status);
      else if (stream.writable) stream.end();
    });
    stream.on('close', () => this.finish(this.status ?? resetStatus(stream.rstCode)));
  }

  /** Sends the request headers on `session` and waits for the server's response headers. */
  static open(session: http2.ClientHttp2Session, opts: ConnectCallOptions): Promise<ConnectCall> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const stream = session.request({
        ':method': 'POST',
        ':path': '/AgentService/Connect',
        'content-type': 'application/grpc',
        te: 'trailers',
        'grpc-accept-encoding': 'identity',
        'user-agent': 'spoke-agent',
        ...opts.metadata,
      });
      const cleanup = () => {
        cancelTimeout();
        stream.off('error', onError).off('close', onClose);
        session.off('close', onSessionClose);
      };
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        cleanup();
        if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
        reject(err);
      };
      const onError = (err: Error) => fail(new Error(err.message));
      const onClose = () =>
        fail(new Error(`${opts.address} ended the stream before answering (HTTP/2 error ${stream.rstCode})`));
      const onSessionClose = () => fail(new Error(`${opts.address} closed the connection before answering`));
      const cancelTimeout = opts.clock.after(opts.timeoutMs, () =>
        fail(new Error(`no response headers from ${opts.address} within ${opts.timeoutMs}ms`)),
      );
      stream.once('error', onError).once('close', onClose);
      session.once('close', onSessionClose);
      stream.once('response', (headers) => {
        const refused = refusal(headers);
        if (refused) return fail(new Error(refused));
        settled = true;
        cleanup();
        resolve(new ConnectCall(stream, headers, opts));
      });
    });
  }

  /** Writes one framed message; false means the stream is backed up ('drain' via onDrain). */
  write(frame: Buffer, written?: () => void): boolean {
    if (this.ended || !this.stream.writable) return true;
    return this.stream.write(frame, written);
  }

  /** Bytes written to the stream and not yet out on the connection (waiting for HTTP/2 flow control or the socket). */
  get queuedBytes(): number {
    return this.stream.writableLength;
  }

  /** Once everything queued is out, after a write found the stream backed up. */
  onDrain(listener: () => void): void {
    this.stream.on('drain', listener);
  }

  /** Called once when the stream has ended (after onEnd). */
  onceEnded(listener: () => void): void {
    if (this.ended) listener();
    else this.endListeners.push(listener);
  }

  pause(): void {
    this.stream.pause();
  }

  resume(): void {
    this.stream.resume();
  }

  /** True until the stream has ended. */
  get open(): boolean {
    return !this.ended;
  }

  /** Half-closes our side: what we wrote still reaches the server, which then ends the stream. */
  end(): void {
    if (!this.ended && this.stream.writable) this.stream.end();
  }

  /** Resets the stream; the connection stays. */
  cancel(): void {
    if (!this.stream.closed) this.stream.close(http2.constants.NGHTTP2_CANCEL);
  }

  /** The connection under the stream is gone (agent-session.ts). */
  connectionLost(status: CallStatus): void {
    this.finish(this.status ?? status);
  }

  private finish(status: CallStatus): void {
    if (this.ended) return;
    this.ended = true;
    this.opts.onEnd(status);
    for (const listener of this.endListeners.splice(0)) listener();
  }
}

/** Why response headers refuse the call (an HTTP error, or a trailers-only gRPC error), if they do. */
function refusal(headers: http2.IncomingHttpHeaders): string | undefined {
  const status = headers[':status'];
  const grpc = statusOf(headers);
  if (grpc && grpc.code !== GrpcStatus.OK) return `${grpcStatusName(grpc.code)}: ${grpc.details}`;
  if (Number(status) !== 200) return `HTTP status ${status} from the server (not a gRPC endpoint?)`;
  if (grpc) return 'the server ended the stream before it began';
  if (!String(headers['content-type'] ?? '').startsWith('application/grpc'))
    return `content-type ${String(headers['content-type'])} from the server (not a gRPC endpoint?)`;
  return undefined;
}

function statusOf(headers: http2.IncomingHttpHeaders): CallStatus | undefined {
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
function resetStatus(rstCode: number | undefined): CallStatus {
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
