// gRPC mode: one channel and one ProxyService/Proxy stream per dial, like the Go konnectivity-client's
// CreateSingleUseGrpcTunnel (ANP konnectivity-client/pkg/client/client.go, conn.go).
import { Duplex } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import { PacketType, ProxyService, packetTypeName, type OutPacket, type Packet } from '../proto/packets.js';
import { joinHostPort } from '../net/address.js';
import { DialError, type DialContext, type DialOptions } from './dial-options.js';
import { newRandom } from '../proto/random.js';
import { ProxyTlsCredentials } from './proxy-tls.js';

/** gRPC refuses messages over 4 MiB by default; smaller ones also keep flow control fine-grained. */
const maxDataBytes = 64 * 1024;
/** conn.go CloseTimeout: how long end() waits for CLOSE_RSP. */
const closeTimeoutMs = 10_000;

type ProxyCall = grpc.ClientDuplexStream<OutPacket, Packet>;

function describe(pkt: Packet | OutPacket): string | undefined {
  const p = pkt as Packet;
  switch (pkt.type) {
    case PacketType.DIAL_REQ:
      return `address=${p.dialRequest!.address} random=${p.dialRequest!.random}`;
    case PacketType.DIAL_RSP:
      return `random=${p.dialResponse!.random} connectID=${p.dialResponse!.connectID ?? '0'}${p.dialResponse!.error ? ` error=${JSON.stringify(p.dialResponse!.error)}` : ''}`;
    case PacketType.DATA:
      return `connectID=${p.data!.connectID} bytes=${p.data!.data.length}`;
    case PacketType.CLOSE_REQ:
      return `connectID=${p.closeRequest!.connectID}`;
    case PacketType.CLOSE_RSP:
      return `connectID=${p.closeResponse!.connectID}${p.closeResponse!.error ? ` error=${JSON.stringify(p.closeResponse!.error)}` : ''}`;
    case PacketType.DIAL_CLS:
      return `random=${p.closeDial!.random}`;
    default:
      return undefined;
  }
}

class GrpcConnection extends Duplex {
  connectID = '0';
  /** CLOSE_RSP received, or the stream ended: nothing more to send. */
  private finished = false;
  private closeSent = false;
  private onCloseRsp?: () => void;

  constructor(
    client: grpc.Client,
    private readonly call: ProxyCall,
    readonly random: string,
    private readonly ctx: DialContext,
  ) {
    // Room for several DATA payloads, so reading does not pause the call after every message.
    super({ allowHalfOpen: false, readableHighWaterMark: 256 * 1024 });
    call.on('status', () => client.close());
  }

  send(pkt: OutPacket): boolean {
    this.ctx.event({ kind: 'sent', ms: this.ctx.elapsed(), packet: packetTypeName(pkt.type), detail: describe(pkt) });
    return this.call.write(pkt);
  }

  /** Packets after DIAL_RSP. */
  receive(pkt: Packet): void {
    switch (pkt.type) {
      case PacketType.DATA:
        if (pkt.data?.connectID !== this.connectID) return;
        if (!this.push(pkt.data.data)) this.call.pause();
        return;
      case PacketType.CLOSE_RSP: {
        if (pkt.closeResponse?.connectID !== this.connectID) return;
        const { error } = pkt.closeResponse;
        // An error means the connection was cut (a target reset, an agent shutting down): the
        // reader must not take what it got for the whole (unless it had asked to close anyway).
        const cut = error && !this.closeSent ? new Error(`connection cut by the agent: ${error}`) : undefined;
        this.remoteClosed(error ? `CLOSE_RSP: ${error}` : 'CLOSE_RSP', cut);
        return;
      }
    }
  }

  /** The connection is over: end reading (or fail it, `cut`), and the stream to the hub (Go: closeTunnel). */
  remoteClosed(reason: string, cut?: Error): void {
    if (this.finished) return;
    this.finished = true;
    this.ctx.event({ kind: 'closed', ms: this.ctx.elapsed(), reason });
    if (!this.call.writableEnded) this.call.end();
    if (cut) return void this.destroy(cut);
    this.push(null);
    this.onCloseRsp?.();
  }

  /** CLOSE_REQ once; DIAL_CLS if the dial never completed. */
  private sendClose(): void {
    if (this.closeSent || this.finished) return;
    this.closeSent = true;
    if (this.connectID === '0') this.send({ type: PacketType.DIAL_CLS, closeDial: { random: this.random } });
    else this.send({ type: PacketType.CLOSE_REQ, closeRequest: { connectID: this.connectID } });
  }

  override _read(): void {
    if (this.call.isPaused()) this.call.resume();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (this.finished || this.closeSent) return cb(new Error('tunnel closed'));
    let writable = true;
    for (let at = 0; at < chunk.length; at += maxDataBytes) {
      writable = this.send({
        type: PacketType.DATA,
        data: { connectID: this.connectID, data: chunk.subarray(at, at + maxDataBytes) },
      });
    }
    if (writable) cb();
    else this.call.once('drain', () => cb());
  }

  /** end(): CLOSE_REQ, then wait for CLOSE_RSP (Go's conn.Close), at most 10 s. */
  override _final(cb: (err?: Error | null) => void): void {
    if (this.finished) return cb();
    const stopTimer = this.ctx.clock.after(closeTimeoutMs, () => this.remoteClosed('close timeout'));
    this.onCloseRsp = () => {
      stopTimer();
      cb();
    };
    this.sendClose();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.sendClose();
    if (!this.call.writableEnded) this.call.end();
    // Give the close packet a moment to leave, then drop the stream regardless.
    this.ctx.clock.after(closeTimeoutMs, () => this.call.cancel());
    cb(err);
  }
}

export function dialGrpc(opts: DialOptions, ctx: DialContext): Promise<Duplex> {
  const target = opts.proxyUds !== undefined ? `unix:${opts.proxyUds}` : joinHostPort(opts.proxyHost, opts.proxyPort);
  const creds = ctx.tls ? new ProxyTlsCredentials(opts.proxyHost, ctx.tls) : grpc.credentials.createInsecure();
  // A channel of its own per dial, as CreateSingleUseGrpcTunnel does; a 1 MiB window where grpc-go
  // would grow one by itself.
  const client = new ProxyService(target, creds, {
    'grpc.use_local_subchannel_pool': 1,
    'grpc-node.flow_control_window': 1 << 20,
  });
  const call = (client as unknown as { Proxy(): ProxyCall }).Proxy();
  const random = newRandom();
  const conn = new GrpcConnection(client, call, random, ctx);

  return new Promise((resolve, reject) => {
    let dialing = true;
    const fail = (message: string) => {
      if (!dialing) return;
      dialing = false;
      stopTimer();
      ctx.event({ kind: 'closed', ms: ctx.elapsed(), reason: message });
      if (!call.writableEnded) call.end();
      ctx.clock.after(1000, () => call.cancel());
      reject(new DialError(message));
    };
    const stopTimer = ctx.clock.after(ctx.timeoutMs, () => {
      // Go sends DIAL_CLS on its backstop and closes the connection.
      conn.send({ type: PacketType.DIAL_CLS, closeDial: { random } });
      fail(`dial timeout after ${ctx.timeoutMs} ms`);
    });

    call.on('metadata', () => ctx.event({ kind: 'connected', ms: ctx.elapsed(), to: target }));
    call.on('data', (pkt: Packet) => {
      ctx.event({ kind: 'received', ms: ctx.elapsed(), packet: packetTypeName(pkt.type), detail: describe(pkt) });
      if (!dialing) return conn.receive(pkt);
      if (pkt.type === PacketType.DIAL_RSP && pkt.dialResponse?.random === random) {
        if (pkt.dialResponse.error) return fail(pkt.dialResponse.error);
        dialing = false;
        stopTimer();
        conn.connectID = pkt.dialResponse.connectID;
        ctx.event({ kind: 'established', ms: ctx.elapsed(), connectID: conn.connectID });
        resolve(conn);
      } else if (pkt.type === PacketType.DIAL_CLS && pkt.closeDial?.random === random) {
        fail('dial closed');
      }
    });
    call.on('end', () => (dialing ? fail('tunnel closed') : conn.remoteClosed('stream ended')));
    call.on('error', (err: grpc.ServiceError) => {
      if (dialing) fail(err.details || err.message);
      else if (err.code !== grpc.status.CANCELLED) conn.destroy(new Error(err.details || err.message));
    });
    conn.send({ type: PacketType.DIAL_REQ, dialRequest: { protocol: 'tcp', address: opts.address, random } });
  });
}
