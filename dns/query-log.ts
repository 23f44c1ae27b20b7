// The live query log: the most recent queries the DNS server answered (--dns-query-log-size of them),
// in a ring allocated once (the watchers, versions and batching are live-log/live-log.ts's).
// Recording is on the query path, so it allocates nothing, encodes nothing and reads no clock (the
// resolver hands over the times it has): numbers go into typed arrays, the question's name bytes are
// copied into a fixed slot, and the answer's metadata and the client are kept by reference (objects
// the query already has). Entries are decoded only when someone reads them.
import { LiveLog, type LiveLogOptions } from '../live-log/live-log.js';
import type { Proto, Source } from './metrics.js';
import { peerAddress, type Peer } from './peer.js';
import type { AnswerMeta, DnsRequest } from './request.js';
import { type BadQuery, nameAt, type Query, rcodeName, typeName } from './wire.js';

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

const NAME_SLOT = 256; // a name's wire form is at most 255 octets
const TCP = 1;
const TRUNCATED = 2;
const NO_QUESTION = 4;
const CACHED = 8;

export class QueryLog extends LiveLog<QueryEntry> {
  private readonly times: Float64Array;
  private readonly millis: Float32Array;
  private readonly qtypes: Uint16Array;
  private readonly rcodes: Uint16Array;
  private readonly bits: Uint8Array;
  private readonly names: Buffer;
  private readonly metas: Array<AnswerMeta | undefined>;
  private readonly peers: Array<Peer | undefined>;

  constructor(opts: LiveLogOptions) {
    super(opts, 'query log');
    const n = opts.size;
    this.times = new Float64Array(n);
    this.millis = new Float32Array(n);
    this.qtypes = new Uint16Array(n);
    this.rcodes = new Uint16Array(n);
    this.bits = new Uint8Array(n);
    // Not zeroed: a slot is read only once written, and pages never written stay out of RSS.
    this.names = Buffer.allocUnsafeSlow(n * NAME_SLOT);
    this.metas = new Array<AnswerMeta | undefined>(n).fill(undefined);
    this.peers = new Array<Peer | undefined>(n).fill(undefined);
  }

  /** On the query path: one answered query, as the resolver left it. */
  record(req: DnsRequest<Query | BadQuery>): void {
    const i = this.slot;
    this.times[i] = req.at;
    this.millis[i] = req.ms;
    this.rcodes[i] = req.rcode;
    let bits = (req.proto === 'tcp' ? TCP : 0) | (req.truncated ? TRUNCATED : 0) | (req.cached ? CACHED : 0);
    if ('key' in req.q) {
      const { msg } = req;
      const base = i * NAME_SLOT;
      for (let k = 12; k < req.q.nameEnd; k++) this.names[base + k - 12] = msg[k]!;
      this.qtypes[i] = req.q.qtype;
    } else {
      bits |= NO_QUESTION;
      this.qtypes[i] = 0;
    }
    this.bits[i] = bits;
    this.metas[i] = req.meta;
    this.peers[i] = req.peer;
    this.advance();
  }

  protected decode(seq: number): QueryEntry {
    const i = (seq - 1) % this.capacity;
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
