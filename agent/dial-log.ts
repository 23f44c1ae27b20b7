// The dial log: the last --dial-log-size tunnelled connections (live-log/live-log.ts does the
// versions, watchers and batching). A dial is one record, made when the dial settles (connected,
// refused by the dial policy, failed, cancelled by DIAL_CLS) and kept by reference; a connected one
// changes once more when it closes (bytes, duration, how it closed), which is a second change in the
// ring (MODIFIED to watchers). The ring holds two changes per dial, so it holds at least the last N
// dials; a list shows each of the newest N once, in its latest state. Nothing is copied or encoded
// until someone reads: recording is a slot write.
import { type ChangeType, LiveLog, type LiveLogOptions } from '../live-log/live-log.js';

export type DialResult = 'connected' | 'refused' | 'error' | 'cancelled';
export const dialResults: readonly DialResult[] = ['connected', 'refused', 'error', 'cancelled'];

/** One dial the hub asked for; the connection table fills it in as the dial goes. */
export class DialRecord {
  /** Its place in the dial log (the seq of its first change); 0 until logged. */
  id = 0;
  /** The seq of its latest change. */
  seq = 0;
  connectID: string | undefined = undefined;
  rule: string | undefined = undefined;
  name: string | undefined = undefined;
  address: string | undefined = undefined;
  result: DialResult = 'connected';
  /** Why it did not connect (the error the hub got), or why it closed. */
  reason: string | undefined = undefined;
  /** How long the dial took, ms. */
  dialMs = 0;
  /** Payload bytes each way, once closed (while open, the connection counts them). */
  bytesToTarget = 0;
  bytesFromTarget = 0;
  /** From the dial request to the close, ms; undefined while open. */
  durationMs: number | undefined = undefined;
  closedBy: string | undefined = undefined;

  constructor(
    /** When the DIAL_REQ arrived, ms since the epoch, and performance.now() (for the durations). */
    readonly time: number,
    readonly started: number,
    readonly server: string,
    /** host:port as the hub asked. */
    readonly destination: string,
  ) {}
}

/** One change of the dial log, decoded: the dial as it is now. */
export interface DialEntry {
  seq: number;
  id: number;
  time: number;
  server: string;
  connectID?: string;
  destination: string;
  name?: string;
  rule?: string;
  address?: string;
  result: DialResult;
  reason?: string;
  dialMs: number;
  /** True while the connection is open. */
  open: boolean;
  bytesToTarget: number;
  bytesFromTarget: number;
  durationMs?: number;
  closedBy?: string;
}

export class DialLog extends LiveLog<DialEntry> {
  private readonly dials: number;
  private readonly records: Array<DialRecord | undefined>;

  constructor(opts: LiveLogOptions) {
    super({ ...opts, size: opts.size * 2 }, 'dial log');
    this.dials = opts.size;
    this.records = new Array<DialRecord | undefined>(this.capacity).fill(undefined);
  }

  override get size(): number {
    return this.dials;
  }

  /** A dial settled (connected or not): its first change. */
  added(record: DialRecord): void {
    record.id = record.seq = this.nextSeq;
    this.records[this.slot] = record;
    this.advance();
  }

  /** A connected dial closed: its second change. */
  modified(record: DialRecord): void {
    record.seq = this.nextSeq;
    this.records[this.slot] = record;
    this.advance();
  }

  override changeType(e: DialEntry): ChangeType {
    return e.seq === e.id ? 'ADDED' : 'MODIFIED';
  }

  /** The newest `size` dials held, each once in its latest state, oldest first. */
  override current(): DialEntry[] {
    const seen = new Set<DialRecord>();
    const out: DialEntry[] = [];
    for (let seq = this.last; seq >= this.oldest && seen.size < this.dials; seq--) {
      const r = this.records[(seq - 1) % this.capacity]!;
      if (seen.has(r)) continue;
      seen.add(r);
      out.push(this.decode(seq));
    }
    return out.sort((a, b) => a.id - b.id);
  }

  override get(id: number): DialEntry | undefined {
    for (let seq = this.last; seq >= this.oldest; seq--) {
      const r = this.records[(seq - 1) % this.capacity]!;
      if (r.id === id) return this.decode(seq);
    }
    return undefined;
  }

  protected decode(seq: number): DialEntry {
    const r = this.records[(seq - 1) % this.capacity]!;
    return {
      seq,
      id: r.id,
      time: r.time,
      server: r.server,
      ...(r.connectID !== undefined ? { connectID: r.connectID } : {}),
      destination: r.destination,
      ...(r.name !== undefined ? { name: r.name } : {}),
      ...(r.rule !== undefined ? { rule: r.rule } : {}),
      ...(r.address !== undefined ? { address: r.address } : {}),
      result: r.result,
      ...(r.reason !== undefined ? { reason: r.reason } : {}),
      dialMs: Math.round(r.dialMs * 1000) / 1000,
      open: r.result === 'connected' && r.durationMs === undefined,
      bytesToTarget: r.bytesToTarget,
      bytesFromTarget: r.bytesFromTarget,
      ...(r.durationMs !== undefined ? { durationMs: Math.round(r.durationMs * 1000) / 1000 } : {}),
      ...(r.closedBy !== undefined ? { closedBy: r.closedBy } : {}),
    };
  }
}
