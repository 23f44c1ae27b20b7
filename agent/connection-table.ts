// The packet state machine of one server stream: pending dials by `random`, established
// connections by `connectID`, and what each packet from the server does to them. It knows
// nothing of gRPC or sockets beyond a PacketSink and a dial function, so it is tested directly.
import { PacketType, packetTypeName, type Packet } from '../proto/packet-types.js';
import { Dial, type DialResult } from './dial.js';
import type { RuleTraffic } from './dial-traffic.js';
import type { DialRoute } from '../dial-policy/contract.js';
import { DialCancel, TargetDialError } from './dialer.js';
import { EndpointConnection, type EndpointOptions, type PacketSink } from './endpoint-connection.js';
import { RecentlyClosed } from './recently-closed.js';
import type { TunnelContext } from './tunnel-context.js';

/** A dial in progress: its record, and the token DIAL_CLS cancels it with. */
interface PendingDial {
  dial: Dial;
  cancel: DialCancel;
}

/** How long a target over its budget may accept nothing before it counts as stopped. */
export const defaultStallMs = 2000;

export interface ConnectionTableOptions {
  sink: PacketSink;
  /** The dialer, the recorder, the budget, metrics, log and clock (tunnel-context.ts). */
  tunnel: TunnelContext;
  /** See EndpointConnection: how long an over-budget target may accept nothing before it is closed. */
  stallMs?: number;
  /** Stop / restart reading packets from the server (the stream-wide brake). */
  pauseIncoming: () => void;
  resumeIncoming: () => void;
  /** How long a closed connection may flush its final bytes before its socket is destroyed. Default 1 s. */
  lingerMs?: number;
  /** The proxy-server's ID this stream is to (known once the stream is open). */
  server?: () => string;
}

/** A packet the codec could not decode; the stream survives it. */
export interface MalformedPacket {
  malformed: string;
}

export class ConnectionTable {
  private readonly pending = new Map<string, PendingDial>();
  private readonly connections = new Map<string, EndpointConnection>();
  private readonly idleWaiters: Array<() => void> = [];
  /** Connections whose targets are slow but reading; while any exists the stream is paused. */
  private readonly overBudget = new Set<EndpointConnection>();
  private cancelStallCheck = () => {};
  private readonly rejections = new Map<string, number>();
  /** Connections and dials that ended moments ago: packets for them are the close race, not errors. */
  private readonly closedConnections = new RecentlyClosed();
  private readonly finishedDials = new RecentlyClosed();
  /** The agent's buffer budget holds every stream. */
  private budgetBraked = false;
  private paused = false;
  private readonly leaveBudget: () => void;

  private readonly tunnel: TunnelContext;
  private readonly stallMs: number;
  /** Shared by every connection of this stream (not an object and three closures each). */
  private readonly endpointOptions: EndpointOptions;

  constructor(private readonly opts: ConnectionTableOptions) {
    this.tunnel = opts.tunnel;
    this.stallMs = opts.stallMs ?? defaultStallMs;
    this.endpointOptions = {
      tunnel: opts.tunnel,
      lingerMs: opts.lingerMs ?? 1000,
      stallMs: this.stallMs,
      onClosed: (c) => this.forget(c),
      onOverBudget: (c) => this.brake(c),
      onUnderBudget: (c) => this.release(c),
    };
    this.leaveBudget = opts.tunnel.budget.addBrake({
      pause: () => {
        this.budgetBraked = true;
        this.updatePause();
      },
      resume: () => {
        this.budgetBraked = false;
        this.updatePause();
      },
    });
  }

  /** The stream is paused while any connection brakes it or the agent's budget does. */
  private updatePause(): void {
    const pause = this.overBudget.size > 0 || this.budgetBraked;
    if (pause === this.paused) return;
    this.paused = pause;
    if (pause) this.opts.pauseIncoming();
    else this.opts.resumeIncoming();
  }

  get connectionCount(): number {
    return this.connections.size;
  }

  get pendingDialCount(): number {
    return this.pending.size;
  }

  handle(packet: Packet | MalformedPacket): void {
    if ('malformed' in packet)
      return this.reject('malformed', { error: packet.malformed }, 'malformed packet from server');
    this.tunnel.metrics.observePacket('to_agent', packet.type);
    switch (packet.type) {
      case PacketType.DIAL_REQ:
        if (!packet.dialRequest) return this.reject('malformed', { type: 'DIAL_REQ' }, 'packet without its payload');
        return this.dial(packet.dialRequest.random, packet.dialRequest.address, packet.dialRequest.protocol);
      case PacketType.DATA: {
        if (!packet.data) return this.reject('malformed', { type: 'DATA' }, 'packet without its payload');
        const conn = this.connections.get(packet.data.connectID);
        if (conn) return conn.write(packet.data.data);
        if (this.closedConnections.has(packet.data.connectID))
          this.late(PacketType.DATA, { connectID: packet.data.connectID });
        else
          this.reject(
            'unknown_connect_id',
            { connectID: packet.data.connectID, type: 'DATA' },
            'DATA for an unknown connectID',
          );
        // The Go agent's answer either way; the server ignores it for a connection it already closed.
        this.opts.sink.send({
          type: PacketType.CLOSE_RSP,
          closeResponse: { connectID: packet.data.connectID, error: 'unrecognized connectID' },
        });
        return;
      }
      case PacketType.CLOSE_REQ: {
        if (!packet.closeRequest) return this.reject('malformed', { type: 'CLOSE_REQ' }, 'packet without its payload');
        const conn = this.connections.get(packet.closeRequest.connectID);
        if (conn) return conn.closeFromHub();
        if (this.closedConnections.has(packet.closeRequest.connectID))
          this.late(PacketType.CLOSE_REQ, { connectID: packet.closeRequest.connectID });
        else
          this.reject(
            'unknown_connect_id',
            { connectID: packet.closeRequest.connectID, type: 'CLOSE_REQ' },
            'CLOSE_REQ for an unknown connectID',
          );
        this.opts.sink.send({
          type: PacketType.CLOSE_RSP,
          closeResponse: { connectID: packet.closeRequest.connectID, error: 'Unknown connectID' },
        });
        return;
      }
      case PacketType.DIAL_CLS: {
        // The Go agent ignores DIAL_CLS and so leaks the dial; we cancel it. If the dial already
        // completed, the server answers our DIAL_RSP with CLOSE_REQ, which closes it.
        const random = packet.closeDial?.random ?? '';
        const pending = this.pending.get(random);
        if (!pending) {
          // Our DIAL_RSP crossed the server's DIAL_CLS: if the dial connected, its CLOSE_REQ follows.
          if (this.finishedDials.has(random)) return this.late(PacketType.DIAL_CLS, { random });
          return this.reject('unknown_dial', { random }, 'DIAL_CLS for a dial that is not pending');
        }
        this.pending.delete(random);
        pending.cancel.cancel();
        this.settle(pending.dial, 'cancelled', 'cancelled by DIAL_CLS', {});
        this.tunnel.metrics.dialCancellations.inc();
        this.tunnel.log.debug({ random }, 'dial cancelled by DIAL_CLS');
        this.notifyIfIdle();
        return;
      }
      default:
        return this.reject(
          'unexpected_type',
          { type: packetTypeName(packet.type) },
          'unexpected packet type from server',
        );
    }
  }

  private dial(random: string, address: string, protocol: string): void {
    if (protocol !== 'tcp') {
      this.tunnel.metrics.dialFailures.inc({ reason: 'unknown' });
      this.opts.sink.send({
        type: PacketType.DIAL_RSP,
        dialResponse: { random, error: `dial ${protocol} ${address}: unsupported protocol (only tcp)` },
      });
      return;
    }
    if (this.pending.has(random))
      return this.reject('malformed', { random }, 'DIAL_REQ reuses the random of a pending dial');
    const dial = new Dial(Date.now(), performance.now(), this.opts.server?.() ?? '', address);
    const pending: PendingDial = { dial, cancel: new DialCancel() };
    this.pending.set(random, pending);
    this.tunnel.dial(address, pending.cancel).then(
      ({ socket, route }) => {
        if (this.pending.get(random) !== pending) {
          // Cancelled (DIAL_CLS) or the stream closed while the dial was finishing.
          socket.destroy();
          return;
        }
        const connectID = this.tunnel.connectIDs();
        const conn = new EndpointConnection(connectID, socket, this.opts.sink, this.endpointOptions, dial);
        this.connections.set(connectID, conn);
        this.pending.delete(random);
        this.finishedDials.add(random);
        // The answer first: the hub's client waits on it. Node writes it in this turn of the event
        // loop's check phase; what does not need to come before it runs just after (nothing for this
        // connection, from the server or the target, can arrive in between: that is the next turn's I/O).
        this.opts.sink.send({ type: PacketType.DIAL_RSP, dialResponse: { random, connectID } });
        setImmediate(() => {
          // Recorded after the answer, and before any byte is relayed (its rule's counts take them).
          conn.traffic = this.settle(dial, 'connected', undefined, route, connectID);
          // Closed meanwhile (its stream lost): its close was not told, as it was not recorded yet.
          if (dial.closedBy !== undefined) this.recordClose(conn);
          conn.start(); // safe even if the connection closed meanwhile: it then relays nothing
          this.tunnel.metrics.dialDuration.observe(dial.dialMs / 1000);
          this.tunnel.log.debug({ random, connectID, address }, 'dial succeeded');
        });
      },
      (err: unknown) => {
        if (this.pending.get(random) !== pending) return;
        this.pending.delete(random);
        this.finishedDials.add(random);
        const reason = err instanceof TargetDialError ? err.reason : 'unknown';
        this.tunnel.metrics.dialFailures.inc({ reason });
        const message = err instanceof Error ? err.message : String(err);
        const result = reason === 'denied' || reason === 'cancelled' ? reason : 'error';
        this.settle(dial, result, message, err instanceof TargetDialError ? err.route : {});
        this.tunnel.log.info({ random, address, error: message }, 'dial failed');
        this.opts.sink.send({ type: PacketType.DIAL_RSP, dialResponse: { random, error: message } });
        this.notifyIfIdle();
      },
    );
  }

  /** A dial settled: filled in and told to the recorder, which returns its rule's counts. */
  private settle(
    dial: Dial,
    result: DialResult,
    reason: string | undefined,
    route: DialRoute,
    connectID?: string,
  ): RuleTraffic | undefined {
    dial.settle(result, reason, route, connectID);
    return this.tunnel.recorder?.settled(dial);
  }

  /** A recorded connection closed: its dial holds its bytes, duration and how by now. */
  private recordClose(conn: EndpointConnection): void {
    if (conn.traffic) this.tunnel.recorder?.closed(conn.dial, conn.traffic);
  }

  private brake(conn: EndpointConnection): void {
    this.overBudget.add(conn);
    if (this.overBudget.size > 1) return;
    this.updatePause();
    this.scheduleStallCheck();
  }

  /** While paused, a target that stops reading altogether must not hold everyone else. */
  private scheduleStallCheck(): void {
    const cancel = this.tunnel.clock.after(Math.max(10, this.stallMs / 4), () => {
      for (const c of this.overBudget) if (c.isStalled()) c.closeStalled();
      // Not when a release and a new brake while closing already started the next round.
      if (this.cancelStallCheck === cancel && this.overBudget.size > 0) this.scheduleStallCheck();
    });
    this.cancelStallCheck = cancel;
  }

  private release(conn: EndpointConnection): void {
    if (!this.overBudget.delete(conn) || this.overBudget.size > 0) return;
    this.cancelStallCheck();
    this.updatePause();
  }

  /**
   * The stream is going away: cancel pending dials and drop every connection. `tellHub`, when the
   * stream can still carry it, is the error their DIAL_RSP and CLOSE_RSP give the hub's clients.
   */
  abortAll(tellHub?: string): void {
    this.leaveBudget();
    for (const [random, { cancel, dial }] of this.pending) {
      cancel.cancel();
      if (!tellHub) continue;
      this.settle(dial, 'cancelled', tellHub, {});
      this.opts.sink.send({ type: PacketType.DIAL_RSP, dialResponse: { random, error: tellHub } });
    }
    this.pending.clear();
    for (const conn of [...this.connections.values()]) conn.abort(tellHub);
  }

  /** Resolves once no dial is pending and no connection is open (for a graceful drain). */
  idle(): Promise<void> {
    if (this.isIdle) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** No dial pending and no connection open. */
  get isIdle(): boolean {
    return this.pending.size === 0 && this.connections.size === 0;
  }

  private forget(conn: EndpointConnection): void {
    this.connections.delete(conn.connectID);
    this.recordClose(conn);
    this.closedConnections.add(conn.connectID);
    this.notifyIfIdle();
  }

  private notifyIfIdle(): void {
    if (!this.isIdle) return;
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  /** A packet for a connection or dial that just ended on our side: expected, so counted apart and logged at debug. */
  private late(type: PacketType, details: Record<string, unknown>): void {
    this.tunnel.metrics.latePackets.inc({ type: packetTypeName(type) });
    this.tunnel.log.debug({ ...details, type: packetTypeName(type) }, 'packet for a connection that just closed');
  }

  /** Counts every rejected packet; logs the first few of each reason and then every 1000th, so a
   * server sending garbage cannot flood the log. */
  private reject(reason: string, details: Record<string, unknown>, message: string): void {
    this.tunnel.metrics.rejectedPackets.inc({ reason });
    const seen = (this.rejections.get(reason) ?? 0) + 1;
    this.rejections.set(reason, seen);
    if (seen <= 10 || seen % 1000 === 0) this.tunnel.log.warn({ ...details, reason, seen }, message);
  }
}
