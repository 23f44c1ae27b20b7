// Who may read its target now, on one server stream (target -> hub). Every connection of a stream
// sends its target's bytes as DATA on that one stream, and what is read from a target waits in the
// agent until the stream has written it out. So a target is read only while the stream has room:
// past `limit` bytes waiting, the connection that sends stops reading and queues for a turn, with every
// connection that sent since the stream last filled, and new connections queue behind them. When the
// stream has room again, the queue's head is let read, as many as the room holds, in order, each one
// read before it queues again. Memory is bounded per stream (the limit, one read of the connection
// that filled it, and the first read of any that had been quiet and read in the same poll), and no target waits
// longer than one round of the queue: a fast one cannot starve the others, nor can new connections.
// Pure logic: the stream's queue length, the readers, the deferral and the clock are passed in.
import type { Clock } from '../clock/clock.js';

/** A connection's target socket, as far as turns are concerned. */
export interface TurnReader {
  /** Start reading the target again (it was paused for its turn). */
  resumeReading(): void;
  /** Stop reading the target until its turn: another connection found the stream full. */
  pauseReading(): void;
  /** The most its next read may bring (target-reads.ts), once resumed. */
  readonly nextReadBytes: number;
}

export interface SendTurnsOptions {
  /** Bytes the stream holds that it has not yet written out to the connection to the hub. */
  queued: () => number;
  /** Past this many queued bytes, a connection that sends stops reading and waits for a turn. */
  limit: number;
  /**
   * Runs `fn` after the event loop's next poll for I/O (setImmediate): the readers let go have read
   * by then if their targets had bytes, so the room left is known.
   */
  defer: (fn: () => void) => void;
  /** What a wait is measured on. */
  clock: Clock;
  /** Told of every wait (metrics.ts). */
  observer?: TurnsObserver;
}

/** Who counts the waits: how many connections wait, and how long each waited for its turn. */
export interface TurnsObserver {
  waiting(delta: number): void;
  waited(ms: number): void;
}

export class SendTurns {
  /** Waiting for a turn, oldest first (a Map keeps insertion order), with when each began to wait. */
  private readonly waiting = new Map<TurnReader, number>();
  /**
   * Readers that sent since the stream last filled, and read on. When it fills, they stop with the
   * one that filled it: each would otherwise read once more in the same poll of the event loop before
   * finding the stream full, and the more connections carry bulk, the further past `limit` that goes
   * (a burst of a thousand: tens of MiB). A connection that sends nothing is never among them.
   */
  private readonly sending = new Set<TurnReader>();
  private pumpScheduled = false;

  constructor(private readonly opts: SendTurnsOptions) {}

  /** Connections waiting for their turn. */
  get waitingCount(): number {
    return this.waiting.size;
  }

  /** A new connection: true if it may read now; false if it waits its turn behind those already waiting. */
  join(reader: TurnReader): boolean {
    if (this.waiting.size === 0 && !this.full) return true;
    this.enqueue(reader);
    return false;
  }

  /**
   * `reader` has just handed the stream one read's bytes: true if it may read on, false if it must
   * stop reading until its turn (`resumeReading`).
   */
  sent(reader: TurnReader): boolean {
    if (!this.full) {
      this.sending.add(reader);
      return true;
    }
    this.sending.delete(reader);
    this.enqueue(reader);
    for (const other of this.sending) {
      other.pauseReading();
      this.enqueue(other);
    }
    this.sending.clear();
    return false;
  }

  /** The connection closed: it no longer waits. */
  leave(reader: TurnReader): void {
    this.sending.delete(reader);
    if (this.waiting.delete(reader)) this.opts.observer?.waiting(-1);
  }

  /** The stream wrote out what it held (after a write found it full): the next readers' turn. */
  drained(): void {
    if (this.waiting.size > 0) this.schedulePump();
  }

  private get full(): boolean {
    return this.opts.queued() >= this.opts.limit;
  }

  private enqueue(reader: TurnReader): void {
    this.waiting.set(reader, this.opts.clock.now());
    this.opts.observer?.waiting(1);
    if (!this.full) this.schedulePump();
  }

  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    this.opts.defer(this.pump);
  }

  /**
   * Lets waiting readers read, oldest first, as many as the room holds (at least one), then looks
   * again once they have read: one whose target had nothing to send took no room, and the next go.
   * While the stream is full it waits for `drained`.
   */
  private readonly pump = (): void => {
    this.pumpScheduled = false;
    let room = this.opts.limit - this.opts.queued();
    if (room <= 0) return;
    const now = this.opts.clock.now();
    let letGo = 0;
    for (const [reader, since] of this.waiting) {
      this.waiting.delete(reader);
      letGo++;
      this.opts.observer?.waited(now - since);
      reader.resumeReading();
      // Read after resuming: a reader resumes with its largest read (target-reads.ts).
      room -= reader.nextReadBytes;
      if (room <= 0) break;
    }
    this.opts.observer?.waiting(-letGo);
    if (this.waiting.size > 0) this.schedulePump();
  };
}
