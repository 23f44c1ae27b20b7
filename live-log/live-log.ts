// What every live log shares (the DNS query log, the tunnel's dial log): changes numbered 1, 2, ...
// in a ring the log keeps, a version per change that names the log instance (so a version from
// another agent, or an earlier run, is told apart), and watchers that get what arrived in batches,
// at most every `flushMs`, from a timer that exists only while someone watches: at most one ring's
// worth per batch, so what a burst overwrites before the batch goes out is skipped, and counted,
// rather than slowing the writer down. How a change is stored, and decoded when someone reads it,
// is the log's own (decode).
import { randomBytes } from 'node:crypto';
import { type Clock, systemClock } from '../clock/clock.js';

export type SkipReason = 'overwritten' | 'slow';

/** A change as a log hands it out: its place in the log, and the object it is about (`id`, its first change's seq). */
export interface LiveEntry {
  seq: number;
  id?: number;
}

/** How a watch event names a change: a new object, or a later state of one. */
export type ChangeType = 'ADDED' | 'MODIFIED';

export interface LiveLogOptions {
  /** How many changes the ring holds; at least 1 (0, "off", is no log at all). */
  size: number;
  flushMs?: number;
  /** What the batch timer waits on (default the system clock; tests pass a ManualClock). */
  clock?: Clock;
  /** Changes a watcher did not get: overwritten before a batch went out, or its connection was full. */
  onSkipped?: (reason: SkipReason, count: number) => void;
}

export abstract class LiveLog<E extends LiveEntry> {
  /** Names this log's sequence. */
  readonly instance = randomBytes(4).toString('hex');
  /** How many changes the ring holds. */
  readonly capacity: number;
  /** The seq the next change gets. */
  protected nextSeq = 1;
  private readonly listeners = new Set<(batch: E[]) => void>();
  /** Changes below this were handed to the listeners (or recorded while there were none). */
  private flushed = 1;
  /** Cancels the pending batch; set while one is due. */
  private timer?: () => void;
  private readonly flushMs: number;
  /** What the batches, and the watches streamed from this log, wait on. */
  readonly clock: Clock;

  constructor(
    private readonly opts: LiveLogOptions,
    what: string,
  ) {
    if (!(opts.size >= 1)) throw new Error(`${what} size must be at least 1, got ${opts.size}`);
    this.capacity = opts.size;
    this.flushMs = opts.flushMs ?? 100;
    this.clock = opts.clock ?? systemClock;
  }

  /** The change with this seq, from its slot ((seq - 1) % capacity); called only for a seq held. */
  protected abstract decode(seq: number): E;

  /** How many objects a list holds at most (the flag's N). */
  get size(): number {
    return this.capacity;
  }

  /** The slot of the next change; call `advance` once it is written. */
  protected get slot(): number {
    return (this.nextSeq - 1) % this.capacity;
  }

  /** A change was written in `slot`: numbers it, and wakes the watchers' timer. */
  protected advance(): void {
    this.nextSeq++;
    if (this.listeners.size !== 0 && this.timer === undefined) this.timer = this.clock.after(this.flushMs, this.flush);
  }

  /** How a watch event names a change (a log of objects that change says MODIFIED for later states). */
  changeType(_e: E): ChangeType {
    return 'ADDED';
  }

  /** The seq of the newest change (0 before the first). */
  get last(): number {
    return this.nextSeq - 1;
  }

  /** The oldest seq still held. */
  get oldest(): number {
    return Math.max(1, this.nextSeq - this.capacity);
  }

  /** The changes after `seq` still held, oldest first. */
  entries(after = 0): E[] {
    const out: E[] = [];
    for (let seq = Math.max(after + 1, this.oldest); seq < this.nextSeq; seq++) out.push(this.decode(seq));
    return out;
  }

  /** What a list shows: each object once, in its latest state held (a log of immutable entries: all of them). */
  current(): E[] {
    return this.entries();
  }

  /** One object by its id (a log of immutable entries: the change with that seq), while it is held. */
  get(id: number): E | undefined {
    return Number.isInteger(id) && id >= this.oldest && id < this.nextSeq ? this.decode(id) : undefined;
  }

  /** A change's version: `<instance>-<seq>`. */
  version(seq: number): string {
    return `${this.instance}-${seq}`;
  }

  /** An object's name in the API: the version of its first change. */
  nameOf(e: E): string {
    return this.version(e.id ?? e.seq);
  }

  /**
   * Where a watch from `version` starts: after that change when it is this log's; from everything
   * held when there is none (`""` or `"0"`: the current state, then changes, as the API server does);
   * from now when it is another log's.
   */
  watchAfter(version: string | null | undefined): number {
    if (version === null || version === undefined || version === '' || version === '0') return 0;
    return this.seqOf(version) ?? this.last;
  }

  /** The seq a version of this log names; undefined for another log's, or not a version. */
  seqOf(version: string): number | undefined {
    const m = /^([0-9a-f]+)-(\d+)$/.exec(version);
    return m && m[1] === this.instance ? Number(m[2]) : undefined;
  }

  /** A watcher: gets every batch of new changes until the returned function is called. */
  subscribe(listener: (batch: E[]) => void): () => void {
    if (this.listeners.size === 0) this.flushed = this.nextSeq;
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) {
        this.timer?.();
        this.timer = undefined;
      }
    };
  }

  get watchers(): number {
    return this.listeners.size;
  }

  skipped(reason: SkipReason, count: number): void {
    if (count > 0) this.opts.onSkipped?.(reason, count);
  }

  private readonly flush = () => {
    this.timer = undefined;
    const from = Math.max(this.flushed, this.oldest);
    this.skipped('overwritten', (from - this.flushed) * this.listeners.size);
    const batch = this.entries(from - 1);
    this.flushed = this.nextSeq;
    if (batch.length) for (const listener of this.listeners) listener(batch);
  };
}
