// One stream of the agent on a server connection, over its gRPC call (connect-call.ts): the
// identifiers it registered with, the ConnectionTable that serves the dials the server routes to it,
// write back-pressure, DRAIN, and retirement.
// A retired stream stays open until the server has stopped routing to it: no dial pending, no
// connection open, and no DIAL_REQ for a quiet period after its DRAIN (the server marks it draining
// when it reads the DRAIN, and routes elsewhere from then on when it can); a DIAL_REQ that arrives
// meanwhile is served. Closing at the instant it went idle lost the dial the server sent in the
// milliseconds before it saw the close (ANP's pending dials of a removed backend wait for their
// deadline: "frontend stream shutdown, cleaning dial").
import { decodePacket, encodeDataFrame, encodeFrame } from '../proto/packet-codec.js';
import { Header, PacketType, type OutPacket, type Packet } from '../proto/packet-types.js';
import { sleep } from '../clock/clock.js';
import type { AgentSession } from './agent-session.js';
import { GrpcStatus, grpcStatusName, type ConnectCall, type CallStatus } from './connect-call.js';
import { ConnectionTable, type MalformedPacket } from './connection-table.js';
import { SendTurns } from './send-turns.js';
import { FrameRing } from './frame-ring.js';
import type { TunnelContext } from './tunnel-context.js';

/**
 * What one stream may hold of its targets' bytes before they read in turns (send-turns.ts): enough
 * that the connection to the hub does not run dry between turns (the kernel's send buffer holds
 * more), little enough that a burst of a thousand downloads costs the agent about this much.
 */
const streamSendLimit = 1 << 20;
/** Room for the limit, and the reads of the connections still reading when it was reached. */
const streamFrameRing = 2 * streamSendLimit;

/** Never throws: a packet that does not decode reaches the ConnectionTable as MalformedPacket. */
function decode(bytes: Buffer): Packet | MalformedPacket {
  try {
    return decodePacket(bytes);
  } catch (err) {
    return { malformed: `${(err as Error).message} (${bytes.length} bytes)` };
  }
}

export interface ServerStreamOptions {
  agentID: string;
  /** The identifiers this stream registers (URL-query form; '' for none). */
  identifiers: string;
  /** The `authorization` header, read now (a bearer token file is re-read for every stream). */
  authorization?: () => string;
  handshakeTimeoutMs: number;
  /** The proxy-server's ID (known once the first stream is open). */
  server?: () => string;
  /** How long after its last DIAL_REQ a retired stream counts as no longer routed to. */
  quietMs: number;
  /** What every layer shares (tunnel-context.ts); the quiet period, the retirement's deadline and the grace after a graceful close run on its clock. */
  tunnel: TunnelContext;
}

export class ServerStream {
  readonly table: ConnectionTable;
  /** The gRPC call that carries it (connect-call.ts), once open. */
  private call?: ConnectCall;
  /** Where DATA frames are encoded, reused once written out (frame-ring.ts). */
  private readonly frames = new FrameRing(streamFrameRing);
  private readonly frameWritten = () => this.frames.release();
  private readonly turns: SendTurns;
  private closed = false;
  private drained = false;
  /** When the last DIAL_REQ arrived, and when DRAIN was sent (clock.now()). */
  private lastDialAt = 0;
  private drainedAt = 0;
  private cancelGrace?: () => void;
  /** The retirement under way: a second `retire` (the agent draining a stream a rules edit retired) waits for it. */
  private retirement?: Promise<void>;
  private readonly closedListeners: Array<(reason: string) => void> = [];
  /** Resolves when the stream has ended (or never opened): after a graceful close, the server's answer. */
  private readonly streamEnded: Promise<void>;
  private endStream!: () => void;

  constructor(private readonly opts: ServerStreamOptions) {
    this.turns = new SendTurns({
      queued: () => this.call?.queuedBytes ?? 0,
      limit: streamSendLimit,
      defer: setImmediate,
      clock: opts.tunnel.clock,
      observer: opts.tunnel.metrics,
    });
    this.streamEnded = new Promise((resolve) => (this.endStream = resolve));
    this.table = new ConnectionTable({
      sink: {
        send: (p) => this.send(p),
        sendData: (id, payload) => this.sendData(id, payload),
        turns: this.turns,
      },
      tunnel: opts.tunnel,
      server: opts.server,
      pauseIncoming: () => this.call?.pause(),
      resumeIncoming: () => this.call?.resume(),
    });
  }

  /** Opens the stream on `session`; resolves with the server's response headers. */
  async open(session: AgentSession): Promise<Record<string, string | string[] | undefined>> {
    const { opts } = this;
    const metadata: Record<string, string> = { [Header.agentID.toLowerCase()]: opts.agentID };
    if (opts.identifiers) metadata[Header.agentIdentifiers.toLowerCase()] = opts.identifiers;
    if (opts.authorization) metadata[Header.authorization.toLowerCase()] = opts.authorization();
    let call: ConnectCall;
    try {
      call = await session.openCall({
        metadata,
        timeoutMs: opts.handshakeTimeoutMs,
        maxMessageBytes: 32 << 20,
        onMessage: (message) => this.receive(decode(message)),
        onEnd: (status) => this.ended(status),
      });
    } catch (err) {
      this.endStream();
      throw err;
    }
    this.call = call;
    call.onDrain(() => this.turns.drained());
    if (this.closed) call.cancel();
    return call.responseHeaders;
  }

  private receive(packet: Packet | MalformedPacket): void {
    if (!('malformed' in packet) && packet.type === PacketType.DIAL_REQ) this.lastDialAt = this.opts.tunnel.clock.now();
    this.table.handle(packet);
  }

  /** The server ended the stream (or the connection went): as grpc-js worded it, so logs stay comparable. */
  private ended(status: CallStatus): void {
    this.cancelGrace?.();
    this.endStream();
    if (this.closed) return;
    if (status.code === GrpcStatus.OK) return this.close('stream ended by server');
    this.opts.tunnel.metrics.streamErrors.inc({
      segment: 'to_agent',
      code: String(status.code),
      packet_type: 'UNKNOWN',
    });
    this.close(`stream error: ${grpcStatusName(status.code)}: ${status.details}`);
  }

  /** Writes a packet. Control packets are never held back; the stream's turns bound DATA. */
  send(packet: OutPacket): void {
    if (this.closed || !this.call) return;
    this.opts.tunnel.metrics.observePacket('from_agent', packet.type);
    this.call.write(encodeFrame(packet));
  }

  private sendData(connectID: bigint, payload: Uint8Array): void {
    if (this.closed || !this.call) return;
    this.opts.tunnel.metrics.observePacket('from_agent', PacketType.DATA);
    const frame = encodeDataFrame(connectID, payload, this.frames);
    if (this.frames.owns(frame)) this.call.write(frame, this.frameWritten);
    else this.call.write(frame);
  }

  onClosed(listener: (reason: string) => void): void {
    if (this.closed) listener('closed');
    else this.closedListeners.push(listener);
  }

  /** Tells the server this stream is going away: it then prefers other streams and agents for new dials. */
  drain(): void {
    if (this.drained || this.closed) return;
    this.drained = true;
    this.drainedAt = this.opts.tunnel.clock.now();
    this.opts.tunnel.metrics.drains.inc();
    this.send({ type: PacketType.DRAIN, drain: {} });
    this.opts.tunnel.log.info({ identifiers: this.opts.identifiers || undefined }, 'sent DRAIN');
  }

  /**
   * DRAIN, then close once the server has stopped routing here (nothing pending or open, no DIAL_REQ
   * for the quiet period), or after `timeoutMs` regardless. Resolves when closed.
   */
  retire(timeoutMs: number, reason: string): Promise<void> {
    this.retirement ??= this.retireWhenQuiet(timeoutMs, reason);
    return this.retirement;
  }

  private async retireWhenQuiet(timeoutMs: number, reason: string): Promise<void> {
    this.drain();
    const { clock } = this.opts.tunnel;
    const deadline = clock.now() + timeoutMs;
    while (!this.closed) {
      // Quiet since the DRAIN too: the server routes here until it has read it.
      const quietFor = clock.now() - Math.max(this.lastDialAt, this.drainedAt);
      const left = deadline - clock.now();
      if (left <= 0) {
        if (!this.table.isIdle)
          this.opts.tunnel.log.warn(
            { identifiers: this.opts.identifiers || undefined, connections: this.table.connectionCount, timeoutMs },
            'retirement timed out: closing the stream with connections still open',
          );
        break;
      }
      if (this.table.isIdle && quietFor >= this.opts.quietMs) break;
      // Wait for the stream's connections to close, or for the rest of the quiet period, whichever applies.
      const wait = this.table.isIdle ? this.opts.quietMs - quietFor : left;
      const nap = sleep(clock, Math.min(wait, left));
      await Promise.race([
        this.table.isIdle ? new Promise<void>(() => {}) : this.table.idle(),
        nap.done,
        this.whenClosed(),
      ]);
      nap.cancel();
    }
    // The server ends its side after it has stopped routing here; a server slow to do so (a loaded
    // hub) gets the rest of the retirement's time, so the streams still end in the order they retire.
    this.close(reason, true, Math.max(5000, deadline - clock.now()));
    await this.streamEnded;
  }

  private whenClosed(): Promise<void> {
    return new Promise((resolve) => this.onClosed(() => resolve()));
  }

  /**
   * Ends the stream. `graceful` half-closes it so packets already written (a DRAIN, a last
   * CLOSE_RSP) reach the server first; the server then ends its side, or we reset after a grace.
   */
  close(reason: string, graceful = false, graceMs = 5000): void {
    if (this.closed) return;
    // While the stream still carries packets, the clients of connections cut here are told why.
    this.table.abortAll(graceful ? `the agent closed its stream with this connection open (${reason})` : undefined);
    this.closed = true;
    const { call } = this;
    if (call && graceful) {
      call.end();
      this.cancelGrace = this.opts.tunnel.clock.after(graceMs, () => call.cancel());
    } else if (call) call.cancel();
    else this.endStream();
    this.opts.tunnel.log.info({ identifiers: this.opts.identifiers || undefined, reason }, 'server stream closed');
    for (const listener of this.closedListeners.splice(0)) listener(reason);
  }
}
