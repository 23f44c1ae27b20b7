// What a query goes through, in this fixed order (as CoreDNS fixes its plugin order in plugin.cfg):
//   1. parse: drop what cannot be answered, FORMERR / NOTIMP / BADVERS what cannot be read;
//   2. the answers cache: our own answers by query key, emptied when the rules change;
//   3. the rules: a match answers (CNAME + upstream records, or static IPs), a miss in the cluster's
//      zone is NXDOMAIN;
//   4. forward (or REFUSED with --dns-forward=false), through the upstream cache;
//   5. the answer: counted, truncated to the UDP budget, and recorded in the query log when it is on.
// Transports call `handle`; the agent's dialer and the debug endpoint come in through `lookupUpstream`
// and `handle` too, so every path sees the same answers.
import { performance } from 'node:perf_hooks';
import type { Logger } from '../observability/log.js';
import type { RuleHolder } from '../rules/holder.js';
import { otherNodeReason } from '../rules/node.js';
import type { NameClass, RuleSet } from '../rules/rule-set.js';
import { targetText } from '../rules/target.js';
import { type AnswerContext, type Built, chasedRecords, cnameAnswer, nxdomainAnswer, staticAnswer } from './answer.js';
import { type CacheEntry, ResponseCache } from './cache.js';
import type { DnsMetrics, Proto } from './metrics.js';
import type { Peer } from './peer.js';
import type { QueryLog } from './query-log.js';
import { type AnswerMeta, DnsRequest } from './request.js';
import { type UpstreamClient, UpstreamError } from './upstream.js';
import {
  CLASS_ANY,
  CLASS_IN,
  encodeQuery,
  encodeResponse,
  headerOnlyResponse,
  inspectResponse,
  parseQuery,
  type Query,
  questionName,
  RCODE,
  type ResponseInfo,
  rcodeName,
  reuseResponse,
  TYPE,
  truncatedResponse,
  typeName,
  udpBudget,
} from './wire.js';

export interface ResolverOptions {
  /** The rules in force, and their changes. */
  holder: RuleHolder;
  upstream: UpstreamClient;
  /** Forward names no rule matches (false: REFUSED). */
  forward: boolean;
  /** Why forwarding is off, for the explanation of a REFUSED answer; default --dns-forward=false. */
  forwardOffReason?: string;
  /** --dns-ttl in seconds. */
  ttl: number;
  /** Entries in each of the two caches; 0 turns caching off. */
  cacheSize: number;
  metrics: DnsMetrics;
  log: Logger;
  /** --dns-query-log-size > 0: every query a client sent (with its peer) is recorded here. */
  queryLog?: QueryLog;
}

interface Resolved {
  bytes: Buffer;
  info: Pick<ResponseInfo, 'ttlOffsets' | 'ttls'>;
  meta: AnswerMeta;
}

const noTtls = { ttlOffsets: [], ttls: [] };

export class Resolver {
  readonly answers: ResponseCache<AnswerMeta>;
  readonly upstreamCache: ResponseCache<AnswerMeta>;
  // Concurrent misses for one key share one build or upstream query.
  private readonly inflight = new Map<string, Promise<Resolved>>();

  constructor(private readonly opts: ResolverOptions) {
    const limits = { maxEntries: opts.cacheSize, maxTtl: 3600, maxNegativeTtl: 1800 };
    this.answers = new ResponseCache(limits);
    this.upstreamCache = new ResponseCache(limits);
    opts.holder.onChange(() => this.answers.clear());
  }

  get holder(): RuleHolder {
    return this.opts.holder;
  }

  get forwarding(): boolean {
    return this.opts.forward;
  }

  /** The DNS metrics, which the transports count their own drops in. */
  get metrics(): DnsMetrics {
    return this.opts.metrics;
  }

  /** The live query log; undefined with --dns-query-log-size=0. */
  get queryLog(): QueryLog | undefined {
    return this.opts.queryLog;
  }

  get upstreamDescription(): string {
    return this.opts.upstream.describe();
  }

  /** Stops using the upstream; queries still in flight fail with SERVFAIL. */
  close(): void {
    this.opts.upstream.close();
  }

  /**
   * Answers one DNS message, now or later; false when it is dropped (`reply` is then never called).
   * Never throws. `peer` is the client, for the query log; without one (an explanation's own query)
   * nothing is recorded. The log reads no clock of its own on the way: an answer from the answers
   * cache is recorded with the arrival time the cache lookup needs anyway, and only answers that wait
   * for something (rules, the upstream) are timed.
   */
  handle(msg: Buffer, proto: Proto, reply: (response: Buffer) => void, peer?: Peer): boolean {
    const logged = peer !== undefined && this.opts.queryLog !== undefined;
    const started = this.opts.log.isLevelEnabled('debug') ? performance.now() : -1;
    const q = parseQuery(msg);
    if (q === undefined) {
      this.opts.metrics.dropped.inc();
      return false;
    }
    if (!('key' in q)) {
      this.opts.metrics.response(q.rcode, 'error');
      if (logged) {
        const bad = new DnsRequest(msg, q, proto, reply, peer, Date.now(), -1);
        bad.rcode = q.rcode;
        this.opts.queryLog!.record(bad);
      }
      reply(headerOnlyResponse(q));
      return true;
    }
    this.opts.metrics.request(proto, q.qtype);
    const req = new DnsRequest(msg, q, proto, reply, peer, Date.now(), started);
    try {
      if (q.edns !== undefined && q.edns.version !== 0) {
        this.send(req, encodeResponse(msg, q, { rcode: RCODE.BADVERS, flags: {} }), { source: 'error' });
        return true;
      }
      const hit = this.answers.get(q.key, req.at);
      if (hit !== undefined) {
        this.opts.metrics.cacheHits.answers.inc();
        req.cached = true;
        this.send(req, aged(hit, req.at, msg, q), hit.meta);
        return true;
      }
      if (req.started < 0 && logged) req.started = performance.now();
      this.resolve(req).then(
        (r) => this.send(req, r.bytes, r.meta),
        (err: unknown) => this.fail(req, err),
      );
    } catch (err) {
      this.fail(req, err);
    }
    return true;
  }

  private fail(req: DnsRequest, err: unknown): void {
    if (err instanceof UpstreamError) this.opts.metrics.upstreamError(err.reason);
    else this.opts.log.error({ err, name: questionName(req.msg) }, 'DNS query failed');
    const bytes = encodeResponse(req.msg, req.q, { rcode: RCODE.SERVFAIL, flags: { ra: this.opts.forward } });
    this.send(req, bytes, { source: 'error', answer: [String((err as Error)?.message ?? err)] });
  }

  /** Answers `req` with `bytes` (cut to its UDP budget), counted, recorded and logged. */
  private send(req: DnsRequest, bytes: Buffer, meta: AnswerMeta): void {
    const { msg, q, proto } = req;
    const out = proto === 'udp' && bytes.length > udpBudget(q) ? truncatedResponse(msg, q, bytes) : bytes;
    req.rcode = out[3]! & 0xf;
    req.truncated = out !== bytes;
    req.meta = meta;
    this.opts.metrics.response(req.rcode, meta.source);
    req.ms = req.started >= 0 ? performance.now() - req.started : -1;
    if (req.peer !== undefined) this.opts.queryLog?.record(req);
    if (req.ms >= 0 && this.opts.log.isLevelEnabled('debug')) {
      this.opts.log.debug(
        {
          name: questionName(msg),
          type: typeName(q.qtype),
          proto,
          rule: meta.rule,
          target: meta.target,
          answer: meta.answer,
          source: meta.source,
          rcode: rcodeName(req.rcode),
          tc: req.truncated,
          ms: +req.ms.toFixed(3),
        },
        'dns query',
      );
    }
    req.reply(out);
  }

  private async resolve(req: DnsRequest): Promise<Resolved> {
    const { msg, q, proto, at: now } = req;
    const name = questionName(msg).toLowerCase();
    const generation = this.opts.holder.generation;
    const ruleSet = this.opts.holder.current;
    const named = ruleSet.classify(name);
    if (named.kind !== 'outside') {
      this.opts.metrics.cacheMisses.answers.inc();
      const built = await this.coalesce(`a${q.key}`, async () => {
        const r = await this.build(req, name, named, ruleSet, generation);
        const info = inspectResponse(r.bytes)!;
        // An answer built from the rules being replaced must not outlive them.
        if (generation === this.opts.holder.generation) this.answers.put(q.key, r.bytes, info, now, r.meta);
        return { ...r, info };
      });
      return { ...built, bytes: reuseResponse(built.bytes, built.info, 0, msg, q) };
    }
    if (!this.opts.forward)
      return {
        bytes: encodeResponse(msg, q, { rcode: RCODE.REFUSED, flags: {} }),
        info: noTtls,
        meta: {
          source: 'forward',
          answer: [`forwarding is off (${this.opts.forwardOffReason ?? '--dns-forward=false'})`],
        },
      };

    const hit = this.cachedUpstream(msg, q, now);
    if (hit !== undefined) return hit;
    // Byte for byte: the client's own query goes upstream (with another ID) and its answer comes back.
    const fetched = await this.coalesce(`${proto}${q.key}`, () => this.fetch(msg, q.key, proto === 'tcp'));
    return { ...fetched, bytes: reuseResponse(fetched.bytes, fetched.info, 0, msg, q) };
  }

  /** Our own answer for a name the rules decide (every class but `outside`). */
  private async build(
    req: DnsRequest,
    name: string,
    named: Exclude<NameClass, { kind: 'outside' }>,
    ruleSet: RuleSet,
    serial: number,
  ): Promise<Resolved> {
    const { msg, q } = req;
    // A static name outside the cluster's zone is a zone of its own for the SOA.
    const zone = ruleSet.inZone(name) ? ruleSet.naming.cluster : name;
    const ctx: AnswerContext = { ttl: this.opts.ttl, ra: this.opts.forward, serial, zone };
    if (named.kind === 'zone') return { ...nxdomainAnswer(msg, q, ctx), info: noTtls, meta: { source: 'zone' } };
    if (named.kind === 'other-node')
      // Not this agent's to answer: NXDOMAIN would say the node does not exist.
      return {
        bytes: encodeResponse(msg, q, { rcode: RCODE.REFUSED, flags: {} }),
        info: noTtls,
        meta: { source: 'zone', answer: [otherNodeReason(named.node)] },
      };
    const { match } = named;
    const meta = { rule: match.rule.source, target: targetText(match.target) };
    if (q.qclass !== CLASS_IN && q.qclass !== CLASS_ANY) {
      return {
        bytes: encodeResponse(msg, q, { rcode: RCODE.REFUSED, flags: {} }),
        info: noTtls,
        meta: { source: 'rule', ...meta },
      };
    }
    let built: Built;
    if (match.target.kind === 'ip') built = staticAnswer(msg, q, match.target, ctx);
    else {
      const chase =
        q.qtype === TYPE.A || q.qtype === TYPE.AAAA
          ? chasedRecords((await this.lookupUpstream(match.target.fqdn, q.qtype)).bytes, this.opts.ttl)
          : undefined;
      if (chase && chase.rcode !== RCODE.NOERROR && chase.rcode !== RCODE.NXDOMAIN) {
        throw new UpstreamError(
          `${this.opts.upstream.describe()} answered ${rcodeName(chase.rcode)} for ${match.target.fqdn}`,
          'rcode',
        );
      }
      built = cnameAnswer(msg, q, match.target.fqdn, chase, ctx);
    }
    return { bytes: built.bytes, info: noTtls, meta: { source: 'rule', ...meta, answer: built.answer } };
  }

  /** The upstream's answer for `name` (an upstream-side name, e.g. a rule's FQDN target), cached; retried over TCP when truncated. */
  async lookupUpstream(name: string, qtype: number): Promise<Resolved> {
    const query = encodeQuery(name, qtype);
    const q = parseQuery(query) as Query;
    const hit = this.cachedUpstream(query, q, Date.now());
    if (hit !== undefined) return hit;
    return this.coalesce(`u${q.key}`, async () => {
      const udp = await this.fetch(query, q.key, false);
      return udp.bytes[2]! & 2 ? this.fetch(query, q.key, true) : udp;
    });
  }

  /** The upstream cache's answer to `msg`, counted as a hit or a miss. */
  private cachedUpstream(msg: Buffer, q: Query, now: number): Resolved | undefined {
    const hit = this.upstreamCache.get(q.key, now);
    if (hit === undefined) {
      this.opts.metrics.cacheMisses.upstream.inc();
      return undefined;
    }
    this.opts.metrics.cacheHits.upstream.inc();
    return { bytes: aged(hit, now, msg, q), info: hit.info, meta: hit.meta };
  }

  private async fetch(query: Buffer, key: string, tcp: boolean): Promise<Resolved> {
    const started = performance.now();
    const bytes = await this.opts.upstream.exchange(query, tcp);
    this.opts.metrics.upstream(tcp ? 'tcp' : 'udp', (performance.now() - started) / 1000);
    const info = inspectResponse(bytes);
    if (!info) throw new UpstreamError(`${this.opts.upstream.describe()} sent a malformed response`, 'mismatch');
    const meta: AnswerMeta = { source: 'forward', target: this.opts.upstream.describe() };
    this.upstreamCache.put(key, bytes, info, Date.now(), meta);
    return { bytes, info, meta };
  }

  private coalesce(key: string, run: () => Promise<Resolved>): Promise<Resolved> {
    let p = this.inflight.get(key);
    if (p === undefined) {
      p = run().finally(() => this.inflight.delete(key));
      this.inflight.set(key, p);
    }
    return p;
  }
}

/** A cached response made into the answer to `msg`, its TTLs reduced by the whole seconds it has been stored. */
function aged(hit: CacheEntry<AnswerMeta>, now: number, msg: Buffer, q: Query): Buffer {
  return reuseResponse(hit.bytes, hit.info, ((now - hit.storedAt) / 1000) | 0, msg, q);
}
