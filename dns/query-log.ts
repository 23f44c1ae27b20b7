// The live query log: the most recent queries the DNS server answered (--dns-query-log-size of them),
// in a ring allocated once. Recording is on the query path, so it allocates nothing, encodes nothing
// and reads no clock (the resolver hands over the times it has): numbers go into typed arrays, the
// question's name bytes are copied into a fixed slot, and the answer's metadata and the client are
// kept by reference (objects the query already has). Entries are decoded only when someone reads them. Watchers get what arrived in batches, at most every
// `flushMs`, from a timer that exists only while someone watches: at most one ring's worth per
// batch, so what a burst overwrites before the batch goes out is skipped, and counted, rather than
// slowing the server down.
import { randomBytes } from 'node:crypto';
import type { AnswerMeta } from './resolver.js';
import type { Proto, Source } from './metrics.js';
import { peerAddress, type Peer } from './peer.js';
import { nameAt, rcodeName, typeName } from './wire.js';

/** One answered query, decoded. */
export interface QueryEntry {
  /** Position in this log: 1, 2, ... */
  seq: number;
  /** When it was answered, ms since the epoch. */
  time: number;
  /** As asked (case kept); empty when the question could not be read (FORMERR, NOTIMP). */
  name: string;
  type: string;
  client: string;
  clientPort: number;
  transport: Proto;
  rcode: string;
  source: Source;
  rule?: string;
  target?: string;
  /** Our own answer's records in short form (`A 10.0.0.1`); forwarded answers are not decoded. */
  answer?: string[];
  truncated: boolean;
  /** Answered from the answers cache (our own answers, built from the rules). */
  cached: boolean;
  /**
   * From the query's arrival to its answer, for answers that waited for something (building from
   * the rules, the upstream); absent for those given at once (the answers cache, errors), which
   * take microseconds and are not timed.
   */
  ms?: number;
}

export type SkipReason = 'overwritten' | 'slow';

export interface QueryLogOptions {
  /** How many entries the ring holds; at least 1 (0, "off", is no QueryLog at all). */
  size: number;
  flushMs?: number;
  /** Entries a watcher did not get: overwritten before a batch went out, or its connection was full. */
  onSkipped?: (reason: SkipReason, count: number) => void;
}

const NAME_SLOT = 256; // a name's wire form is at most 255 octets
const TCP = 1;
const TRUNCATED = 2;
const NO_QUESTION = 4;
const CACHED = 8;

export class QueryLog {
  /** Names this log's sequence, so versions from another agent (or an earlier run) are recognised. */
  readonly instance = randomBytes(4).toString('hex');
  readonly size: number;
  private readonly times: Float64Array;
  private readonly millis: Float32Array;
  private readonly qtypes: Uint16Array;
  private readonly rcodes: Uint16Array;
  private readonly bits: Uint8Array;
  private readonly names: Buffer;
  private readonly metas: Array<AnswerMeta | undefined>;
  private readonly peers: Array<Peer | undefined>;
  /** The seq the next entry gets. */
  private nextSeq = 1;
  private slot = 0;
  private readonly listeners = new Set<(batch: QueryEntry[]) => void>();
  /** Entries below this were handed to the listeners (or recorded while there were none). */
  private flushed = 1;
  private timer?: NodeJS.Timeout;
  private readonly flushMs: number;

  constructor(private readonly opts: QueryLogOptions) {
    if (!(opts.size >= 1)) throw new Error(`query log size must be at least 1, got ${opts.size}`);
    const n = opts.size;
    this.size = n;
    this.times = new Float64Array(n);
    this.millis = new Float32Array(n);
    this.qtypes = new Uint16Array(n);
    this.rcodes = new Uint16Array(n);
    this.bits = new Uint8Array(n);
    // Not zeroed: a slot is read only once written, and pages never written stay out of RSS.
    this.names = Buffer.allocUnsafeSlow(n * NAME_SLOT);
    this.metas = new Array<AnswerMeta | undefined>(n).fill(undefined);
    this.peers = new Array<Peer | undefined>(n).fill(undefined);
    this.flushMs = opts.flushMs ?? 100;
  }

  /**
   * On the query path: one answered query. `nameEnd` is where the question's name ends in `msg`
   * (0 when the question could not be read); `at` when it arrived (ms since the epoch); `ms` the
   * time it took, negative when not timed.
   */
  record(
    msg: Buffer,
    nameEnd: number,
    qtype: number,
    rcode: number,
    proto: Proto,
    truncated: boolean,
    cached: boolean,
    meta: AnswerMeta,
    peer: Peer,
    at: number,
    ms: number,
  ): void {
    const i = this.slot;
    this.slot = i + 1 === this.size ? 0 : i + 1;
    this.times[i] = at;
    this.millis[i] = ms;
    this.qtypes[i] = qtype;
    this.rcodes[i] = rcode;
    let bits = (proto === 'tcp' ? TCP : 0) | (truncated ? TRUNCATED : 0) | (cached ? CACHED : 0);
    const base = i * NAME_SLOT;
    if (nameEnd > 12) for (let k = 12; k < nameEnd; k++) this.names[base + k - 12] = msg[k]!;
    else bits |= NO_QUESTION;
    this.bits[i] = bits;
    this.metas[i] = meta;
    this.peers[i] = peer;
    this.nextSeq++;
    if (this.listeners.size !== 0 && this.timer === undefined) this.timer = setTimeout(this.flush, this.flushMs);
  }

  /** The seq of the newest entry (0 before the first). */
  get last(): number {
    return this.nextSeq - 1;
  }

  /** The oldest seq still held. */
  get oldest(): number {
    return Math.max(1, this.nextSeq - this.size);
  }

  /** The entries after `seq` still held, oldest first. */
  entries(after = 0): QueryEntry[] {
    const out: QueryEntry[] = [];
    for (let seq = Math.max(after + 1, this.oldest); seq < this.nextSeq; seq++) out.push(this.decode(seq));
    return out;
  }

  /** One entry, while it is held. */
  get(seq: number): QueryEntry | undefined {
    return Number.isInteger(seq) && seq >= this.oldest && seq < this.nextSeq ? this.decode(seq) : undefined;
  }

  /**
   * An entry's version (its resourceVersion and name in the API): `<instance>-<seq>`, so a version
   * from another agent's log (behind one Service, each request may reach another) or from before a
   * restart is told apart from this log's.
   */
  version(seq: number): string {
    return `${this.instance}-${seq}`;
  }

  /**
   * Where a watch from `version` starts: after that entry when it is this log's; from everything
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

  /** A watcher: gets every batch of new entries until the returned function is called. */
  subscribe(listener: (batch: QueryEntry[]) => void): () => void {
    if (this.listeners.size === 0) this.flushed = this.nextSeq;
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) {
        clearTimeout(this.timer);
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

  private decode(seq: number): QueryEntry {
    const i = (seq - 1) % this.size;
    const meta = this.metas[i]!;
    const bits = this.bits[i]!;
    const { address, port } = peerAddress(this.peers[i]!);
    return {
      seq,
      time: this.times[i]!,
      name: bits & NO_QUESTION ? '' : nameAt(this.names, i * NAME_SLOT),
      type: bits & NO_QUESTION ? '' : typeName(this.qtypes[i]!),
      client: address,
      clientPort: port,
      transport: bits & TCP ? 'tcp' : 'udp',
      rcode: rcodeName(this.rcodes[i]!),
      source: meta.source,
      ...(meta.rule !== undefined ? { rule: meta.rule } : {}),
      ...(meta.target !== undefined ? { target: meta.target } : {}),
      ...(meta.answer !== undefined ? { answer: meta.answer } : {}),
      truncated: (bits & TRUNCATED) !== 0,
      cached: (bits & CACHED) !== 0,
      ...(this.millis[i]! >= 0 ? { ms: Math.round(this.millis[i]! * 1000) / 1000 } : {}),
    };
  }
}
