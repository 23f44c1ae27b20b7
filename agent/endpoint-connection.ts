// One tunnelled connection: a target socket on one side, DATA packets on a shared server stream
// on the other. Flow control is per connection, so a slow target never stalls its neighbours:
// - target -> hub: when the stream is backed up, this socket stops reading until it drains;
// - hub -> target: bytes wait in the socket's write buffer up to `maxBuffer`; past that the
//   protocol has no way to slow one connection down (there is no per-connection window), so the
//   connection is closed with an error rather than blocking the whole stream (ANP #180).
import type { Duplex } from 'node:stream';
import { PacketType, type OutPacket } from '../proto/packets.js';
import type { Logger } from '../observability/log.js';
import type { AgentMetrics } from './metrics.js';

/** The side of a server stream that endpoint connections write to. */
export interface PacketSink {
  /** False when the stream is backed up: stop producing until `whenWritable` fires. */
  send(packet: OutPacket): boolean;
  whenWritable(resume: () => void): void;
}

export interface EndpointOptions {
  maxBuffer: number;
  /** How long a closed connection may keep flushing to its target before it is destroyed. */
  lingerMs: number;
  metrics: AgentMetrics;
  log: Logger;
  onClosed: (conn: EndpointConnection) => void;
}

export class EndpointConnection {
  private closed = false;
  private highWater = 0;

  constructor(readonly connectID: string, private readonly socket: Duplex, private readonly sink: PacketSink, private readonly opts: EndpointOptions) {
    opts.metrics.openEndpointConnections.inc();
  }

  /** Starts relaying target bytes; call after DIAL_RSP is sent so DATA never precedes it. */
  start(): void {
    const { socket } = this;
    socket.on('data', (chunk: Buffer) => {
      if (this.closed) return;
      this.opts.metrics.bytes.inc({ direction: 'from_target' }, chunk.length);
      if (!this.sink.send({ type: PacketType.DATA, data: { connectID: this.connectID, data: chunk } })) {
        socket.pause();
        this.sink.whenWritable(() => {
          if (!this.closed) socket.resume();
        });
      }
    });
    // Remote EOF ends the whole tunnel connection, as in the Go agent: the protocol has no half-close.
    socket.on('end', () => this.finish(undefined, 'remote EOF'));
    socket.on('error', (err: Error) => this.finish(undefined, `target error: ${err.message}`));
    socket.on('close', () => this.finish(undefined, 'target closed'));
  }

  /** DATA from the hub. */
  write(data: Buffer): void {
    if (this.closed) return;
    this.opts.metrics.bytes.inc({ direction: 'to_target' }, data.length);
    this.socket.write(data);
    const buffered = this.socket.writableLength;
    if (buffered > this.highWater) this.highWater = buffered;
    if (buffered > this.opts.maxBuffer) {
      this.opts.metrics.bufferOverflows.inc();
      this.finish(`target is not reading: more than ${this.opts.maxBuffer} bytes buffered`, 'buffer overflow', true);
    }
  }

  /** CLOSE_REQ from the hub: answer, then let what is buffered reach the target. */
  closeFromHub(): void {
    this.finish(undefined, 'CLOSE_REQ');
  }

  /** The server stream is gone: nobody to tell, just release the socket. */
  abort(): void {
    if (this.closed) return;
    this.markClosed('server stream lost');
    this.socket.destroy();
  }

  private finish(error: string | undefined, why: string, destroyNow = false): void {
    if (this.closed) return;
    this.markClosed(why);
    this.sink.send({ type: PacketType.CLOSE_RSP, closeResponse: { connectID: this.connectID, ...(error ? { error } : {}) } });
    if (destroyNow) {
      this.socket.destroy();
      return;
    }
    this.socket.end();
    setTimeout(() => this.socket.destroy(), this.opts.lingerMs).unref();
  }

  private markClosed(why: string): void {
    this.closed = true;
    this.opts.metrics.openEndpointConnections.dec();
    this.opts.metrics.bufferHighWater.observe(this.highWater);
    this.opts.log.debug({ connectID: this.connectID, why, highWater: this.highWater }, 'endpoint connection closed');
    this.opts.onClosed(this);
  }
}
