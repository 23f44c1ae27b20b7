// Our own answers, built from a rule match (pure: the upstream's answer for a CNAME target comes in as
// bytes). A rewritten name answers like an ExternalName Service: a CNAME to the target, then the
// target's records as the upstream gave them; static IPs answer directly; unmatched names in the
// cluster's zone do not exist. All authoritative, TTLs capped at --dns-ttl.
import type { Target } from '../rules/target.js';
import { decodeMessage } from './dns2.js';
import { encodeResponse, type Query, RCODE, type Rec, TYPE, typeName } from './wire.js';

export interface AnswerContext {
  /** --dns-ttl in seconds: the TTL of our records and the cap on the upstream's. */
  ttl: number;
  /** Recursion available: set when forwarding is on. */
  ra: boolean;
  /** SOA serial: changes with the rules. */
  serial: number;
  /** The zone whose SOA goes with a negative answer. */
  zone: string;
}

/** An answer and its records in short text form (`CNAME x.svc.cluster.local`, `A 10.0.0.1`) for logs and /debug/resolve. */
export interface Built {
  bytes: Buffer;
  answer: string[];
}

/** The upstream's records for a name, as far as they belong in our answer. */
export interface Chased {
  rcode: number;
  records: Rec[];
}

/** The CNAME chain and addresses in an upstream response, TTLs capped. */
export function chasedRecords(response: Buffer, ttl: number): Chased {
  const packet = decodeMessage(response);
  const records: Rec[] = [];
  for (const r of packet.answers) {
    const capped = Math.min(r.ttl, ttl);
    if (r.type === TYPE.CNAME && 'domain' in r)
      records.push({ owner: r.name, type: TYPE.CNAME, target: r.domain, ttl: capped });
    else if ((r.type === TYPE.A || r.type === TYPE.AAAA) && 'address' in r)
      records.push({ owner: r.name, type: r.type, address: r.address, ttl: capped });
  }
  return { rcode: packet.header.rcode, records };
}

function soa(ctx: AnswerContext): Rec {
  const { zone, ttl, serial } = ctx;
  // CoreDNS's kubernetes plugin shape: ns.dns.<zone>, hostmaster.<zone>, MINIMUM = the TTL.
  return {
    owner: zone,
    type: TYPE.SOA,
    ttl,
    soa: {
      mname: `ns.dns.${zone}`,
      rname: `hostmaster.${zone}`,
      serial,
      refresh: 7200,
      retry: 1800,
      expire: 86400,
      minimum: ttl,
    },
  };
}

/** NXDOMAIN for a name in the cluster's zone that no rule matches. */
export function nxdomainAnswer(msg: Buffer, q: Query, ctx: AnswerContext): Built {
  return {
    bytes: encodeResponse(msg, q, { rcode: RCODE.NXDOMAIN, flags: { aa: true, ra: ctx.ra }, authority: [soa(ctx)] }),
    answer: [],
  };
}

/** Fixed addresses: A or AAAA from the list, NODATA (with the SOA) for other types. */
export function staticAnswer(
  msg: Buffer,
  q: Query,
  target: Extract<Target, { kind: 'ip' }>,
  ctx: AnswerContext,
): Built {
  const answers: Rec[] = [];
  if (q.qtype === TYPE.A || q.qtype === TYPE.ANY)
    for (const address of target.v4) answers.push({ type: TYPE.A, address, ttl: ctx.ttl });
  if (q.qtype === TYPE.AAAA || q.qtype === TYPE.ANY)
    for (const address of target.v6) answers.push({ type: TYPE.AAAA, address, ttl: ctx.ttl });
  return {
    bytes: encodeResponse(msg, q, {
      rcode: RCODE.NOERROR,
      flags: { aa: true, ra: ctx.ra },
      answers,
      authority: answers.length ? [] : [soa(ctx)],
    }),
    answer: describe(answers),
  };
}

/**
 * The CNAME, then what the upstream said about the target (for A and AAAA queries; for other types
 * the client follows the CNAME itself). The upstream's NXDOMAIN carries over, as a recursive
 * resolver reports it after a CNAME (RFC 6604).
 */
export function cnameAnswer(
  msg: Buffer,
  q: Query,
  fqdn: string,
  chased: Chased | undefined,
  ctx: AnswerContext,
): Built {
  const answers: Rec[] = [{ type: TYPE.CNAME, target: fqdn, ttl: ctx.ttl }, ...(chased?.records ?? [])];
  const rcode = chased?.rcode === RCODE.NXDOMAIN ? RCODE.NXDOMAIN : RCODE.NOERROR;
  return {
    bytes: encodeResponse(msg, q, { rcode, flags: { aa: true, ra: ctx.ra }, answers }),
    answer: describe(answers),
  };
}

const describe = (records: readonly Rec[]) =>
  records.map((r) => `${typeName(r.type)} ${'address' in r ? r.address : 'target' in r ? r.target : r.soa.mname}`);
