// One tunnelled connection: a target socket on one side, DATA packets on a shared server stream
// on the other.
// - target -> hub: the target is read in its turn on the stream (send-turns.ts): while the stream
//   holds more than its limit, a connection that sent stops reading and queues, so what a burst of
//   targets holds in the agent is bounded per stream, and every target gets its turn; a read brings
//   at most the socket's read size (target-reads.ts).
// - hub -> target: the protocol has no per-connection window, so the only brake on the hub is
//   the whole stream. Bytes wait in this socket's write buffer up to `maxBuffer` without slowing
//   anyone. Past it, a target that is still reading (it accepted bytes within `stallMs`) gets the
//   stream paused until it is back under half the budget, as the Go agent would (fair for slow
//   but steady uploads); a target that has stopped reading is closed with an error instead, so it
//   cannot stall its neighbours (ANP #180). Memory per connection stays near `maxBuffer`, and the
//   sum over all connections within the agent's BufferBudget.
// - closing: once the connection is closed, the socket gets its final bytes flushed and is
//   released (destroyed) as soon as they are, or after `lingerMs` at most, whether or not the
//   target closes its side; until then it is counted as closing.
import type { Duplex } from 'node:stream';
import { PacketType, type OutPacket } from '../proto/packet-types.js';
import type { BufferHolder } from './buffer-budget.js';
import type { Dial } from './dial.js';
import type { RuleTraffic } from './dial-traffic.js';
import type { SendTurns, TurnReader } from './send-turns.js';
import { nextReadBytes, readMost, relayTargetReads } from './target-reads.js';
import type { TunnelContext } from './tunnel-context.js';

/** The side of a server stream that endpoint connections write to. */
export interface PacketSink {
  send(packet: OutPacket): void;
  /** DATA on the hot path: encodes `payload` before returning, so it may be a reused read buffer. */
  sendData(connectID: bigint, payload: Uint8Array): void;
  /** Whose turn it is to read its target, on this stream. */
  turns: SendTurns;
}

export interface EndpointOptions {
  /** The budget, --max-connection-buffer, metrics, log and clock (tunnel-context.ts). */
  tunnel: TunnelContext;
  /** A target over budget that accepted no bytes for this long is considered stopped. */
  stallMs: number;
  /** How long a closed connection may keep flushing its final bytes to its target before it is destroyed. */
  lingerMs: number;
  onClosed: (conn: EndpointConnection) => void;
  /** Over budget but still reading: the owner pauses the stream until `onUnderBudget`. */
  onOverBudget: (conn: EndpointConnection) => void;
  onUnderBudget: (conn: EndpointConnection) => void;
}

export class EndpointConnection implements BufferHolder, TurnReader {
  private closed = false;
  /** The socket is closed (its fd released). */
  private released = false;
  /** Closed but not yet released: counted in the closing gauge. */
  private closing = false;
  private highWater = 0;
  private overBudget = false;
  private readonly wireID: bigint;
  /** Bytes waiting in the socket's write buffer, as last told to the budget. */
  buffered = 0;
  /** When the target last accepted bytes (or bytes started waiting), on the clock. */
  lastProgress: number;
  /** Its rule's counts, where it adds its bytes too, once its dial is recorded (the connection table sets them). */
  traffic: RuleTraffic | undefined = undefined;
  private readonly flushed = () => {
    this.lastProgress = this.opts.tunnel.clock.now();
    this.account();
    if (this.overBudget && this.socket.writableLength <= this.opts.tunnel.maxBuffer / 2) {
      this.overBudget = false;
      this.opts.onUnderBudget(this);
    }
  };

  constructor(
    readonly connectID: string,
    private readonly socket: Duplex,
    private readonly sink: PacketSink,
    private readonly opts: EndpointOptions,
    /** Its dial, which holds its bytes each way and how it closed. */
    readonly dial: Dial,
  ) {
    opts.tunnel.metrics.endpointCounts.open++;
    this.lastProgress = opts.tunnel.clock.now();
    this.wireID = BigInt(connectID);
    opts.tunnel.budget.register(this);
  }

  /** Tells the budget what the socket's write buffer holds now. */
  private account(): void {
    if (this.released) return;
    const now = this.socket.writableLength;
    if (now === this.buffered) return;
    this.opts.tunnel.budget.add(now - this.buffered);
    this.buffered = now;
  }

  /** The socket is gone: its bytes and its fd are free. */
  private release(): void {
    if (this.released) return;
    this.released = true;
    this.opts.tunnel.budget.add(-this.buffered);
    this.buffered = 0;
    this.opts.tunnel.budget.unregister(this);
    if (this.closing) {
      this.closing = false;
      this.opts.tunnel.metrics.endpointCounts.closing--;
    }
  }

  private destroy(): void {
    this.socket.destroy();
    this.release();
  }

  /** Starts relaying target bytes; call after DIAL_RSP is sent so DATA never precedes it. */
  start(): void {
    const { socket } = this;
    // Sockets from our dialer read into a buffer shared by all connections; others emit 'data'.
    if (!relayTargetReads(socket, this.relay)) {
      socket.on('data', (chunk: Buffer) => {
        if (!this.relay(chunk)) socket.pause();
      });
    }
    // Behind the connections already waiting for the stream, if any.
    if (!this.closed && !this.sink.turns.join(this)) socket.pause();
    // Remote EOF ends the whole connection, as in the Go agent: the protocol has no half-close.
    socket.on('end', () => this.finish(undefined, 'remote EOF'));
    // A target that fails mid-connection (a reset) may have sent less than it meant to: the hub's
    // client is told so by CLOSE_RSP's error, not a clean end.
    socket.on('error', (err: Error) => this.finish(`target error: ${err.message}`, `target error: ${err.message}`));
    // One 'close' listener does both (each listener, and a once() wrapper more so, costs every idle connection).
    socket.on('close', () => {
      this.finish(undefined, 'target closed');
      this.release();
    });
  }

  /** Sends target bytes as DATA; false when the socket must stop reading until its next turn. */
  private readonly relay = (chunk: Uint8Array): boolean => {
    if (this.closed) return true;
    this.opts.tunnel.metrics.countBytesFromTarget(chunk.length);
    this.dial.bytesFromTarget += chunk.length;
    if (this.traffic) this.traffic.fromTarget += chunk.length;
    this.sink.sendData(this.wireID, chunk);
    return this.sink.turns.sent(this);
  };

  /** Its turn on the stream: read the target again. */
  resumeReading(): void {
    if (this.closed) return;
    readMost(this.socket);
    this.socket.resume();
  }

  /** Another connection filled the stream: wait for the turn with it. */
  pauseReading(): void {
    this.socket.pause();
  }

  get nextReadBytes(): number {
    return nextReadBytes(this.socket);
  }

  /** DATA from the hub. */
  write(data: Buffer): void {
    if (this.closed) return;
    this.opts.tunnel.metrics.countBytesToTarget(data.length);
    this.dial.bytesToTarget += data.length;
    if (this.traffic) this.traffic.toTarget += data.length;
    // A target's stall clock starts when bytes start waiting for it, not at its last write.
    if (this.buffered === 0) this.lastProgress = this.opts.tunnel.clock.now();
    this.socket.write(data, this.flushed);
    this.account();
    const buffered = this.socket.writableLength;
    if (buffered > this.highWater) this.highWater = buffered;
    if (buffered > this.opts.tunnel.maxBuffer && !this.overBudget) {
      if (this.isStalled()) return this.closeStalled();
      this.overBudget = true;
      this.opts.onOverBudget(this);
    }
  }

  /** Over budget and no byte accepted by the target for `stallMs`. */
  isStalled(): boolean {
    return this.opts.tunnel.clock.now() - this.lastProgress >= this.opts.stallMs;
  }

  /** Closes a target that stopped reading, so it no longer holds the stream or memory. */
  closeStalled(): void {
    this.opts.tunnel.metrics.bufferOverflows.inc();
    this.finish(
      `target stopped reading: more than ${this.opts.tunnel.maxBuffer} bytes buffered and none accepted for ${this.opts.stallMs}ms`,
      'target stalled',
      true,
    );
  }

  /** The agent's buffer budget is exhausted and this target stopped reading: close it now. */
  shed(reason: string): void {
    if (this.closed) return this.destroy();
    this.finish(reason, 'buffer budget', true);
  }

  /** CLOSE_REQ from the hub: answer, then let what is buffered reach the target. */
  closeFromHub(): void {
    this.finish(undefined, 'CLOSE_REQ');
  }

  /**
   * The server stream is going away with this connection open: release the socket now. `tellHub`,
   * while the stream can still carry it, goes to the hub as CLOSE_RSP's error, so the client is told
   * its connection was cut rather than ended; with no stream left there is nobody to tell.
   */
  abort(tellHub?: string): void {
    if (this.closed) return;
    this.markClosed(tellHub ? 'stream closed' : 'server stream lost');
    if (tellHub)
      this.sink.send({ type: PacketType.CLOSE_RSP, closeResponse: { connectID: this.connectID, error: tellHub } });
    this.destroy();
  }

  private finish(error: string | undefined, why: string, destroyNow = false): void {
    if (this.closed) return;
    this.markClosed(why);
    this.sink.send({
      type: PacketType.CLOSE_RSP,
      closeResponse: { connectID: this.connectID, ...(error ? { error } : {}) },
    });
    if (destroyNow || this.socket.destroyed || this.socket.writableFinished) return this.destroy();
    // The final bytes get flushed, then the socket is released without waiting for the target to
    // close its side (the protocol has no half-close), and after `lingerMs` at most.
    const cancel = this.opts.tunnel.clock.after(this.opts.lingerMs, () => this.destroy());
    this.socket.once('finish', () => {
      cancel();
      this.destroy();
    });
    this.socket.end();
  }

  private markClosed(why: string): void {
    this.closed = true;
    this.sink.turns.leave(this);
    this.dial.close(why);
    if (!this.released) {
      this.closing = true;
      this.opts.tunnel.metrics.endpointCounts.closing++;
    }
    if (this.overBudget) {
      this.overBudget = false;
      this.opts.onUnderBudget(this);
    }
    this.opts.tunnel.metrics.endpointCounts.open--;
    this.opts.tunnel.metrics.bufferHighWater.observe(this.highWater);
    this.opts.tunnel.log.debug(
      { connectID: this.connectID, why, highWater: this.highWater },
      'endpoint connection closed',
    );
    this.opts.onClosed(this);
  }
}
