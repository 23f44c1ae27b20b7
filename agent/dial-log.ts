// The dial log: the last --dial-log-size tunnelled connections (live-log/live-log.ts does the
// versions, watchers and batching). A dial (dial.ts) is logged when it settles (connected, denied by
// the dial policy, failed, cancelled by DIAL_CLS) and kept by reference; a connected one
// changes once more when it closes (bytes, duration, how it closed), which is a second change in the
// ring (MODIFIED to watchers). The ring holds two changes per dial, so it holds at least the last N
// dials; a list shows each of the newest N once, in its latest state. Nothing is copied or encoded
// until someone reads: recording is a slot write.
import { type ChangeType, LiveLog, type LiveLogOptions } from '../live-log/live-log.js';
import { type Dial, type DialView, viewOf } from './dial.js';

/** One change of the dial log: the dial as it is now, with the change's seq and the dial's id. */
export type DialEntry = DialView & { seq: number; id: number };

export class DialLog extends LiveLog<DialEntry> {
  private readonly dials: number;
  private readonly records: Array<Dial | undefined>;

  constructor(opts: LiveLogOptions) {
    super({ ...opts, size: opts.size * 2 }, 'dial log');
    this.dials = opts.size;
    this.records = new Array<Dial | undefined>(this.capacity).fill(undefined);
  }

  override get size(): number {
    return this.dials;
  }

  /** A dial settled (connected or not): its first change. */
  added(record: Dial): void {
    record.id = record.seq = this.nextSeq;
    this.records[this.slot] = record;
    this.advance();
  }

  /** A connected dial closed: its second change. */
  modified(record: Dial): void {
    record.seq = this.nextSeq;
    this.records[this.slot] = record;
    this.advance();
  }

  override changeType(e: DialEntry): ChangeType {
    return e.seq === e.id ? 'ADDED' : 'MODIFIED';
  }

  /** The newest `size` dials held, each once in its latest state, oldest first. */
  override current(): DialEntry[] {
    const seen = new Set<Dial>();
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
    const d = this.records[(seq - 1) % this.capacity]!;
    return { seq, id: d.id, ...viewOf(d) };
  }
}
