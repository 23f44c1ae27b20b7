import { describe, expect, it } from 'vitest';
import { ResponseCache } from './cache.js';
import { decodeMessage } from './dns2.js';
import {
  encodeQuery,
  encodeResponse,
  inspectResponse,
  parseQuery,
  type Query,
  questionName,
  RCODE,
  reuseResponse,
  sameQuestion,
  TYPE,
  truncatedResponse,
} from './wire.js';

const query = (name: string, qtype: number = TYPE.A) => {
  const msg = encodeQuery(name, qtype);
  msg.writeUInt16BE(0xbeef, 0);
  return { msg, q: parseQuery(msg) as Query };
};

describe('wire', () => {
  it('reads the question and EDNS, with one key for any case', () => {
    const { q } = query('WeB.Prod.cluster1', TYPE.AAAA);
    expect(q).toMatchObject({
      id: 0xbeef,
      rd: true,
      qtype: TYPE.AAAA,
      qclass: 1,
      edns: { udpSize: 1232, do: false, version: 0 },
    });
    expect(query('web.prod.CLUSTER1', TYPE.AAAA).q.key).toBe(q.key);
    expect(query('web.prod.cluster1', TYPE.A).q.key).not.toBe(q.key);
  });

  it('escapes octets that cannot be in a host name, so they never match a rule', () => {
    const msg = Buffer.concat([
      Buffer.from('000001000001000000000000', 'hex'),
      Buffer.from([3, 0x61, 0x2e, 0x00, 8]),
      Buffer.from('cluster1'),
      Buffer.from([0, 0, 1, 0, 1]),
    ]);
    expect(questionName(msg)).toBe('a\\.\\000.cluster1');
    expect(questionName(encodeQuery('.', TYPE.NS))).toBe('.');
  });

  it('rejects malformed questions', () => {
    expect(parseQuery(Buffer.alloc(11))).toBeUndefined();
    expect(parseQuery(Buffer.from('0001840000010000000000000000010001', 'hex'))).toBeUndefined(); // a response
    expect(parseQuery(Buffer.from('000101000001000000000000c00c00010001', 'hex'))).toMatchObject({
      rcode: RCODE.FORMERR,
    }); // pointer in the question
    expect(parseQuery(Buffer.from('00010100000100000000000003616263', 'hex'))).toMatchObject({ rcode: RCODE.FORMERR }); // runs off the end
    const twoOpts = Buffer.concat([encodeQuery('a', 1), Buffer.from('0000290200000000000000', 'hex')]);
    twoOpts.writeUInt16BE(2, 10);
    expect(parseQuery(twoOpts)).toMatchObject({ rcode: RCODE.FORMERR });
  });

  it('encodes answers dns2 decodes, with the question name by pointer', () => {
    const { msg, q } = query('Cluster1');
    const bytes = encodeResponse(msg, q, {
      rcode: RCODE.NOERROR,
      flags: { aa: true, ra: true },
      answers: [
        { type: TYPE.CNAME, target: 'kubernetes.default.svc.cluster.local', ttl: 5 },
        { owner: 'kubernetes.default.svc.cluster.local', type: TYPE.A, address: '127.0.0.1', ttl: 5 },
        { owner: 'kubernetes.default.svc.cluster.local', type: TYPE.AAAA, address: '::ffff:127.0.0.1', ttl: 4 },
        { owner: 'x', type: TYPE.AAAA, address: 'fd00:1::2:0:3', ttl: 4 },
      ],
    });
    const p = decodeMessage(bytes);
    expect(p.header).toMatchObject({ id: 0xbeef, qr: 1, aa: 1, ra: 1, rd: 1, rcode: 0 });
    expect(
      p.answers.map((r) => [r.name, r.type, r.ttl, 'domain' in r ? r.domain : 'address' in r ? r.address : undefined]),
    ).toEqual([
      ['Cluster1', TYPE.CNAME, 5, 'kubernetes.default.svc.cluster.local'],
      ['kubernetes.default.svc.cluster.local', TYPE.A, 5, '127.0.0.1'],
      ['kubernetes.default.svc.cluster.local', TYPE.AAAA, 4, '::ffff:7f00:1'],
      ['x', TYPE.AAAA, 4, 'fd00:1::2:0:3'],
    ]);
    expect(p.additionals[0]).toMatchObject({ type: TYPE.OPT, class: 1232 });
    expect(inspectResponse(bytes)).toMatchObject({ rcode: 0, tc: false, ttls: [5, 5, 4, 4], ttl: 4 });
    expect(sameQuestion(msg, bytes)).toBe(true);
    expect(decodeMessage(truncatedResponse(msg, q, bytes)).header).toMatchObject({ tc: 1, ancount: 0, arcount: 1 });
  });

  it('reuses a stored answer for another query: its ID, its case, TTLs less the age', () => {
    const first = query('web.prod.cluster1');
    const stored = encodeResponse(first.msg, first.q, {
      rcode: 0,
      flags: { aa: true },
      answers: [{ type: TYPE.A, address: '127.0.0.1', ttl: 30 }],
    });
    const info = inspectResponse(stored)!;
    const second = query('WEB.prod.Cluster1');
    second.msg.writeUInt16BE(0x1234, 0);
    const out = decodeMessage(reuseResponse(stored, info, 10, second.msg, second.q));
    expect(out.header.id).toBe(0x1234);
    expect(out.questions[0]!.name).toBe('WEB.prod.Cluster1');
    expect(out.answers[0]).toMatchObject({ name: 'WEB.prod.Cluster1', ttl: 20 });
  });

  it('takes the negative TTL from the SOA (RFC 2308)', () => {
    const { msg, q } = query('nope.cluster1');
    const soa = {
      mname: 'ns.dns.cluster1',
      rname: 'hostmaster.cluster1',
      serial: 1,
      refresh: 1,
      retry: 1,
      expire: 1,
      minimum: 7,
    };
    const nx = encodeResponse(msg, q, {
      rcode: RCODE.NXDOMAIN,
      flags: {},
      authority: [{ owner: 'cluster1', type: TYPE.SOA, ttl: 60, soa }],
    });
    expect(inspectResponse(nx)).toMatchObject({ rcode: RCODE.NXDOMAIN, ttl: 7 });
    expect(inspectResponse(encodeResponse(msg, q, { rcode: RCODE.NXDOMAIN, flags: {} }))!.ttl).toBeUndefined();
  });
});

describe('cache', () => {
  const limits = { maxEntries: 2, maxTtl: 3600, maxNegativeTtl: 1800 };
  const answer = (name: string, ttl: number, rcode: number = RCODE.NOERROR) => {
    const { msg, q } = query(name);
    const bytes = encodeResponse(msg, q, {
      rcode,
      flags: {},
      answers: rcode === RCODE.NOERROR ? [{ type: TYPE.A, address: '127.0.0.1', ttl }] : [],
    });
    return { key: q.key, bytes, info: inspectResponse(bytes)! };
  };

  it('keeps an answer for its TTL', () => {
    const cache = new ResponseCache<string>(limits);
    const a = answer('a', 10);
    expect(cache.put(a.key, a.bytes, a.info, 0, 'm')).toBe(true);
    expect(cache.get(a.key, 9_999)?.meta).toBe('m');
    expect(cache.get(a.key, 10_000)).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('does not keep SERVFAIL, truncated, TTL 0, or negative answers without an SOA', () => {
    const cache = new ResponseCache<string>(limits);
    for (const a of [answer('a', 10, RCODE.SERVFAIL), answer('b', 0), answer('c', 0, RCODE.NXDOMAIN)])
      expect(cache.put(a.key, a.bytes, a.info, 0, '')).toBe(false);
    const t = answer('d', 10);
    expect(cache.put(t.key, t.bytes, { ...t.info, tc: true }, 0, '')).toBe(false);
  });

  it('caps TTLs and evicts the oldest entry when full', () => {
    const cache = new ResponseCache<string>(limits);
    const [a, b, c] = [answer('a', 99_999), answer('b', 10), answer('c', 10)];
    cache.put(a.key, a.bytes, a.info, 0, 'a');
    expect(cache.get(a.key, 3_600_000)).toBeUndefined();
    cache.put(a.key, a.bytes, a.info, 0, 'a');
    cache.put(b.key, b.bytes, b.info, 0, 'b');
    cache.put(c.key, c.bytes, c.info, 0, 'c');
    expect([cache.get(a.key, 1), cache.get(b.key, 1)?.meta, cache.get(c.key, 1)?.meta]).toEqual([undefined, 'b', 'c']);
  });
});
