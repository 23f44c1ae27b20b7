// One `AgentService/Connect` stream to one proxy-server replica (the Go agent's client.go): its
// own gRPC channel and TCP connection, the handshake headers, the receive loop feeding a Tunnel,
// write back-pressure, DRAIN, and a liveness probe.
import { EventEmitter } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { encodeDataPacket } from '../proto/data-codec.js';
import { AgentService, Header, PacketType, type OutPacket, type Packet } from '../proto/packets.js';
import type { Logger } from '../observability/log.js';
import type { ServerCredentials } from './credentials.js';
import type { BufferBudget } from './buffer-budget.js';
import type { AgentMetrics } from './metrics.js';
import { Tunnel, type Dial, type MalformedPacket } from './tunnel.js';

const connect = AgentService.service.Connect!;
/** Packets are objects, except DATA from targets, which arrives already encoded (encodeDataPacket). */
const serialize = (p: OutPacket | Buffer): Buffer => (Buffer.isBuffer(p) ? p : (connect.requestSerialize(p) as Buffer));

/** Never throws: a packet that does not decode reaches the Tunnel as MalformedPacket. */
function decode(bytes: Buffer): Packet | MalformedPacket {
  try {
    return connect.responseDeserialize(bytes) as Packet;
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
  private readonly client: grpc.Client;
  private readonly call: grpc.ClientDuplexStream<OutPacket | Buffer, Packet | MalformedPacket>;
  private readonly writableWaiters: Array<() => void> = [];
  private closed = false;
  private drained = false;
  readonly log: Logger;

  private constructor(private readonly opts: ServerConnectionOptions) {
    super();
    this.log = opts.log;
    this.client = new grpc.Client(opts.target, opts.credentials.channel, {
      // One TCP connection per stream: otherwise every attempt reuses the same subchannel and
      // lands on the same replica behind a load balancer.
      'grpc.use_local_subchannel_pool': 1,
      'grpc.keepalive_time_ms': opts.keepaliveMs,
      'grpc.keepalive_timeout_ms': 20_000,
      'grpc.keepalive_permit_without_calls': 1,
      'grpc.max_receive_message_length': 32 << 20,
      'grpc.max_send_message_length': 32 << 20,
      // A larger HTTP/2 window than the 64 KiB default keeps bulk transfers from stalling on round trips.
      'grpc-node.flow_control_window': 4 << 20,
      'grpc.enable_retries': 0,
    });
    const md = new grpc.Metadata();
    md.set(Header.agentID, opts.agentID);
    if (opts.agentIdentifiers) md.set(Header.agentIdentifiers, opts.agentIdentifiers);
    this.call = this.client.makeBidiStreamRequest('/AgentService/Connect', serialize, decode, md);
    this.call.on('drain', () => {
      for (const resume of this.writableWaiters.splice(0)) resume();
    });
    this.tunnel = new Tunnel({
      sink: { send: (p) => this.send(p), sendData: (id, payload) => this.sendData(id, payload), whenWritable: (resume) => this.writableWaiters.push(resume) },
      dial: opts.dial,
      maxBuffer: opts.maxBuffer,
      budget: opts.budget,
      connectIDs: opts.connectIDs,
      pauseIncoming: () => this.call.pause(),
      resumeIncoming: () => this.call.resume(),
      metrics: opts.metrics,
      log: opts.log,
    });
  }

  /** Opens the stream and waits for the server's `serverID`/`serverCount` headers. */
  static open(opts: ServerConnectionOptions): Promise<ServerConnection> {
    const conn = new ServerConnection(opts);
    return conn.handshake().then(
      () => conn,
      (err: Error) => {
        conn.close(`handshake failed: ${err.message}`);
        // grpc-js words a TLS failure as "No connection established. Last error: ..." in Node's terms.
        const tls = opts.credentials.tls.problem;
        throw tls ? new HandshakeError(tls) : err;
      },
    );
  }

  private handshake(): Promise<void> {
    const { call } = this;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => fail(new HandshakeError(`no response headers from ${this.opts.target} within ${this.opts.handshakeTimeoutMs}ms`)), this.opts.handshakeTimeoutMs);
      const fail = (err: Error) => {
        clearTimeout(timer);
        call.off('metadata', onMetadata);
        reject(err);
      };
      // A refused stream (e.g. UNAUTHENTICATED) is trailers-only: no 'metadata' event, only 'error'.
      const onError = (err: grpc.ServiceError) => fail(new HandshakeError(`${grpc.status[err.code] ?? err.code}: ${err.details || err.message}`));
      const onMetadata = (md: grpc.Metadata) => {
        clearTimeout(timer);
        call.off('error', onError);
        const ids = md.get(Header.serverID.toLowerCase());
        const counts = md.get(Header.serverCount.toLowerCase());
        if (ids.length !== 1) return reject(new HandshakeError(`expected one server ID in the response headers, got ${ids.length}`));
        if (counts.length !== 1) return reject(new HandshakeError(`expected one server count in the response headers, got ${counts.length}`));
        const count = Number(String(counts[0]));
        if (!Number.isInteger(count) || count < 0) return reject(new HandshakeError(`invalid server count ${String(counts[0])}`));
        this.serverID = String(ids[0]);
        this.serverCount = count;
        this.serve();
        resolve();
      };
      call.once('error', onError);
      call.once('metadata', onMetadata);
    });
  }

  private serve(): void {
    const { call } = this;
    call.on('data', (packet: Packet | MalformedPacket) => this.tunnel.handle(packet));
    call.on('error', (err: grpc.ServiceError) => {
      this.opts.metrics.streamErrors.inc({ segment: 'to_agent', code: String(err.code ?? grpc.status.UNKNOWN), packet_type: 'UNKNOWN' });
      this.close(`stream error: ${grpc.status[err.code] ?? err.code}: ${err.details || err.message}`);
    });
    call.on('end', () => this.close('stream ended by server'));
  }

  /** Writes a packet; false means the stream is backed up (the caller waits for whenWritable). */
  send(packet: OutPacket): boolean {
    if (this.closed) return true;
    this.opts.metrics.observePacket('from_agent', packet.type);
    return this.call.write(packet);
  }

  sendData(connectID: bigint, payload: Uint8Array): boolean {
    if (this.closed) return true;
    this.opts.metrics.observePacket('from_agent', PacketType.DATA);
    return this.call.write(encodeDataPacket(connectID, payload));
  }

  get isClosed(): boolean {
    return this.closed;
  }

  get isDraining(): boolean {
    return this.drained;
  }

  /** True while the underlying channel is READY (the Go agent's probe). */
  get transportReady(): boolean {
    return !this.closed && this.client.getChannel().getConnectivityState(false) === grpc.connectivityState.READY;
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
    const release = () => {
      this.call.cancel();
      this.client.close();
    };
    if (graceful) {
      this.call.end();
      const timer = setTimeout(release, 5000);
      timer.unref();
      this.call.once('status', () => {
        clearTimeout(timer);
        release();
      });
    } else release();
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
