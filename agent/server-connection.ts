// One `AgentService/Connect` stream to one proxy-server replica (the Go agent's client.go): its
// own TCP connection (connect-stream.ts), the handshake headers, the receive loop feeding a Tunnel,
// write back-pressure, DRAIN, and a liveness probe.
import { EventEmitter } from 'node:events';
import { decodePacket, encodeDataFrame, encodeFrame } from '../proto/packet-codec.js';
import { Header, PacketType, type OutPacket, type Packet } from '../proto/packet-types.js';
import type { Logger } from '../observability/log.js';
import type { BufferBudget } from './buffer-budget.js';
import { ConnectStream, GrpcStatus, grpcStatusName, type StreamStatus } from './connect-stream.js';
import type { ServerCredentials } from './credentials.js';
import type { AgentMetrics } from './metrics.js';
import { Tunnel, type Dial, type MalformedPacket } from './tunnel.js';

/** Never throws: a packet that does not decode reaches the Tunnel as MalformedPacket. */
function decode(bytes: Buffer): Packet | MalformedPacket {
  try {
    return decodePacket(bytes);
  } catch (err) {
    return { malformed: `${(err as Error).message} (${bytes.length} bytes)` };
  }
}

export interface ServerConnectionOptions {
  /** host:port of the proxy-server's agent port. */
  target: string;
  credentials: ServerCredentials;
  agentID: string;
  agentIdentifiers: string;
  keepaliveMs: number;
  handshakeTimeoutMs: number;
  dial: Dial;
  maxBuffer: number;
  budget: BufferBudget;
  connectIDs?: () => string;
  metrics: AgentMetrics;
  log: Logger;
}

export class HandshakeError extends Error {}

export declare interface ServerConnection {
  on(event: 'closed', listener: (reason: string) => void): this;
}

export class ServerConnection extends EventEmitter {
  readonly tunnel: Tunnel;
  serverID = '';
  serverCount = 1;
  private stream?: ConnectStream;
  private readonly writableWaiters: Array<() => void> = [];
  private closed = false;
  private drained = false;
  private graceTimer?: NodeJS.Timeout;
  readonly log: Logger;

  private constructor(private readonly opts: ServerConnectionOptions) {
    super();
    this.log = opts.log;
    this.tunnel = new Tunnel({
      sink: { send: (p) => this.send(p), sendData: (id, payload) => this.sendData(id, payload), whenWritable: (resume) => this.writableWaiters.push(resume) },
      dial: opts.dial,
      maxBuffer: opts.maxBuffer,
      budget: opts.budget,
      connectIDs: opts.connectIDs,
      pauseIncoming: () => this.stream?.pause(),
      resumeIncoming: () => this.stream?.resume(),
      metrics: opts.metrics,
      log: opts.log,
    });
  }

  /** Opens the stream and waits for the server's `serverID`/`serverCount` headers. */
  static async open(opts: ServerConnectionOptions): Promise<ServerConnection> {
    const conn = new ServerConnection(opts);
    try {
      await conn.handshake();
      return conn;
    } catch (err) {
      conn.close(`handshake failed: ${(err as Error).message}`);
      // The TLS side names a refusal when its socket closes, which may come a tick after the error.
      await new Promise((resolve) => setImmediate(resolve));
      const tls = opts.credentials.tls.problem;
      throw tls ? new HandshakeError(tls) : err;
    }
  }

  private async handshake(): Promise<void> {
    const { opts } = this;
    const metadata: Record<string, string> = { [Header.agentID.toLowerCase()]: opts.agentID };
    if (opts.agentIdentifiers) metadata[Header.agentIdentifiers.toLowerCase()] = opts.agentIdentifiers;
    if (opts.credentials.authorization) metadata[Header.authorization.toLowerCase()] = opts.credentials.authorization();
    this.stream = await ConnectStream.open({
      target: opts.target,
      secure: (socket) => opts.credentials.tls.handshake(socket),
      metadata,
      timeoutMs: opts.handshakeTimeoutMs,
      // A larger HTTP/2 window than the 64 KiB default keeps bulk transfers from stalling on round trips.
      windowBytes: 4 << 20,
      maxMessageBytes: 32 << 20,
      keepaliveMs: opts.keepaliveMs,
      keepaliveTimeoutMs: 20_000,
      onMessage: (message) => this.tunnel.handle(decode(message)),
      onEnd: (status) => this.ended(status),
    });
    this.stream.onDrain(() => {
      for (const resume of this.writableWaiters.splice(0)) resume();
    });
    const headers = this.stream.responseHeaders;
    const one = (name: string): string => {
      const value = headers[name.toLowerCase()];
      const values = value === undefined ? [] : Array.isArray(value) ? value : [value];
      if (values.length !== 1) throw new HandshakeError(`expected one ${name === Header.serverID ? 'server ID' : 'server count'} in the response headers, got ${values.length}`);
      return values[0]!;
    };
    const id = one(Header.serverID);
    const countText = one(Header.serverCount);
    const count = Number(countText);
    if (!Number.isInteger(count) || count < 0) throw new HandshakeError(`invalid server count ${countText}`);
    this.serverID = id;
    this.serverCount = count;
  }

  /** The server ended the stream (or the connection went): as grpc-js worded it, so logs stay comparable. */
  private ended(status: StreamStatus): void {
    clearTimeout(this.graceTimer);
    if (this.closed) return;
    if (status.code === GrpcStatus.OK) return this.close('stream ended by server');
    this.opts.metrics.streamErrors.inc({ segment: 'to_agent', code: String(status.code), packet_type: 'UNKNOWN' });
    this.close(`stream error: ${grpcStatusName(status.code)}: ${status.details}`);
  }

  /** Writes a packet; false means the stream is backed up (the caller waits for whenWritable). */
  send(packet: OutPacket): boolean {
    if (this.closed || !this.stream) return true;
    this.opts.metrics.observePacket('from_agent', packet.type);
    return this.stream.write(encodeFrame(packet));
  }

  sendData(connectID: bigint, payload: Uint8Array): boolean {
    if (this.closed || !this.stream) return true;
    this.opts.metrics.observePacket('from_agent', PacketType.DATA);
    return this.stream.write(encodeDataFrame(connectID, payload));
  }

  get isClosed(): boolean {
    return this.closed;
  }

  get isDraining(): boolean {
    return this.drained;
  }

  /** True while the connection is up (the Go agent's probe). */
  get transportReady(): boolean {
    return !this.closed && this.stream?.ready === true;
  }

  /** Tells the server this stream is going away: it then prefers other agents for new dials. */
  drain(): void {
    if (this.drained || this.closed) return;
    this.drained = true;
    this.opts.metrics.drains.inc();
    this.send({ type: PacketType.DRAIN, drain: {} });
    this.opts.log.info({ serverID: this.serverID }, 'sent DRAIN');
  }

  /**
   * Ends the stream. `graceful` half-closes it so packets already written (a DRAIN, a last
   * CLOSE_RSP) reach the server first; the server then ends its side, or we cancel after a grace.
   */
  close(reason: string, graceful = false): void {
    if (this.closed) return;
    this.closed = true;
    this.tunnel.abortAll();
    for (const resume of this.writableWaiters.splice(0)) resume();
    const { stream } = this;
    if (stream && graceful) {
      stream.end();
      this.graceTimer = setTimeout(() => stream.cancel(), 5000).unref();
    } else stream?.cancel();
    this.opts.log.info({ serverID: this.serverID, reason }, 'server stream closed');
    this.emit('closed', reason);
  }

  /** Closes once in-flight connections finish, or after `timeoutMs` regardless. */
  async closeWhenIdle(timeoutMs: number, reason: string): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.tunnel.idle(), new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
    this.close(reason, true);
  }
}
