// One DNS query on its way through the server, as one object (as CoreDNS's request.Request): the
// message as received and its parsed question, how and from whom it came and when, and, once
// answered, how. The resolver fills it in as it answers; the query log keeps what it needs of it.
import type { Proto, Source } from './metrics.js';
import type { Peer } from './peer.js';
import type { BadQuery, Query } from './wire.js';

/** What the logs and /debug/resolve say about an answer. */
export interface AnswerMeta {
  source: Source;
  rule?: string;
  target?: string;
  answer?: string[];
}

const unanswered: AnswerMeta = { source: 'error' };

/** `Q` is a `BadQuery` only for a question that could not be read (answered FORMERR, NOTIMP at once). */
export class DnsRequest<Q extends Query | BadQuery = Query> {
  /** The answer's rcode, as sent. */
  rcode = 0;
  /** Cut to the client's UDP budget (TC set). */
  truncated = false;
  /** From the answers cache (our own answers, built from the rules). */
  cached = false;
  meta: AnswerMeta = unanswered;
  /** From the arrival to the answer, ms; -1 when not timed. */
  ms = -1;

  constructor(
    readonly msg: Buffer,
    readonly q: Q,
    readonly proto: Proto,
    readonly reply: (response: Buffer) => void,
    /** The client, for the query log; none for an explanation's own query, which is not recorded. */
    readonly peer: Peer | undefined,
    /** When it arrived, ms since the epoch. */
    readonly at: number,
    /** performance.now() when it arrived, or -1 when not timed. */
    public started: number,
  ) {}
}
